"""Prometheus metrics with kube-scheduler's names, on a registry owned by the scheduler (no globals).

The histograms the scheduling loop records per pod are :class:`FastHistogram` (no locks, bisection).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from koord_scheduler.scheduler.fast_histogram import FastHistogram
from koord_scheduler.scheduler.object_errors import ObjectErrors
from koord_scheduler.scheduler.task_restarts import TaskRestarts


def _exp_buckets(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by result.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = FastHistogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=_exp_buckets(0.001, 2, 15),
            registry=r,
        )
        self.algorithm_duration = FastHistogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds.",
            buckets=_exp_buckets(0.001, 2, 15),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            ["queue"],
            registry=r,
        )
        self.sli_duration = FastHistogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the queue.",
            ["attempts"],
            buckets=_exp_buckets(0.01, 2, 20),
            registry=r,
        )
        self.pod_attempts = FastHistogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=_exp_buckets(1, 2, 5),
            registry=r,
        )
        self.extension_point_duration = FastHistogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=_exp_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod counts for every plugin that "
            "caused it not to schedule (or held it at PreEnqueue).",
            ["plugin", "profile"],
            registry=r,
        )
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed pods in the scheduler cache.",
            ["type"],
            registry=r,
        )
        self.bindings_in_flight = Gauge(
            "scheduler_goroutines",
            "Number of running tasks split by the work they do such as binding.",
            ["operation"],
            registry=r,
        )

        self.object_errors = ObjectErrors(r)
        """``koord_scheduler_object_errors_total``: bad objects, each logged and counted once."""
        self.task_restarts = TaskRestarts(r)
        """``koord_scheduler_task_restarts_total``: watches and controller loops that failed and were
        started again."""

        self._children: dict[tuple[object, tuple[str, ...]], Any] = {}

    def child(self, metric: Counter | Gauge | FastHistogram, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once: the per-pod paths record several series per pod,
        and ``labels()`` validates and locks on every call. Children are created on first use, as
        ``labels()`` would, so a series appears in ``/metrics`` only once it has been recorded."""
        key = (metric, labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def record_attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt: ``scheduler_schedule_attempts`` and its duration."""
        self.child(self.schedule_attempts, result, profile).inc()
        self.child(self.attempt_duration, result, profile).observe(seconds)

    def observer(self, profile: str):  # type: ignore[no-untyped-def]
        hist = self.extension_point_duration
        children: dict[tuple[str, object], Any] = {}

        def observe(point: str, code: object, seconds: float) -> None:
            child = children.get((point, code))
            if child is None:
                name = getattr(code, "name", str(code))
                child = hist.labels(point[0].upper() + point[1:], _status_label(name), profile)
                children[(point, code)] = child
            child.observe(seconds)

        return observe


def _status_label(code_name: str) -> str:
    return "".join(part.capitalize() for part in code_name.split("_"))


def attempts_label(attempts: int) -> str:
    return "15+" if attempts >= 15 else str(attempts)
