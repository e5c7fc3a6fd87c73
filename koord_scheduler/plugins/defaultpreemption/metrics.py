"""DefaultPreemption's metrics (kube-scheduler's names): ``scheduler_preemption_attempts_total`` (every
PostFilter call) and ``scheduler_preemption_victims`` (victims per successful preemption).

Every profile of a scheduler shares one Prometheus registry, and a registry takes each metric name once.
:meth:`PreemptionMetrics.of` therefore creates the metrics once per registry and hands the same object to
every DefaultPreemption instance that reports into it (the registry is held weakly: a scheduler built
and dropped, as in tests, leaves nothing behind).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from prometheus_client import CollectorRegistry, Counter, Histogram

VICTIM_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class PreemptionMetrics:
    """The two metrics, registered in ``registry`` (use :meth:`of` to share them)."""

    __slots__ = ("attempts", "victims")

    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=registry
        )
        self.victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=VICTIM_BUCKETS,
            registry=registry,
        )

    @classmethod
    def of(cls, registry: CollectorRegistry | None) -> PreemptionMetrics:
        """The metrics registered in ``registry``, created at the first call for it; with None, metrics
        in a registry of their own (nothing exports them)."""
        if registry is None:
            return cls(CollectorRegistry())
        metrics = _BY_REGISTRY.get(registry)
        if metrics is None:
            metrics = cls(registry)
            _BY_REGISTRY[registry] = metrics
        return metrics


_BY_REGISTRY: WeakKeyDictionary[CollectorRegistry, PreemptionMetrics] = WeakKeyDictionary()
"""The metrics object of each registry (see the module docstring)."""
