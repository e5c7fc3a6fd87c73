"""What the eviction strategies share: who may be a victim, in which order, and how many are enough.

Pure functions over :class:`Candidate` records. Decide, then do: :func:`plan_victims` decides which pods to
evict for a need; :meth:`EvictionStrategy.execute` hands that plan to the
:class:`~koordlet.qosmanager.evictor.PodEvictor`, and when the API refuses a victim (a PodDisruptionBudget)
asks :func:`plan_victims` again with that pod excluded, until the need is covered or no candidate is left.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from apis.core import boundedjson
from apis.extension import LABEL_POD_PRIORITY, PRIORITY_RANGES
from koordlet.qosmanager.evictor import EvictionOutcome, PodEvictor
from koordlet.qosmanager.framework import PluginContext
from koordlet.qosmanager.plugins.strategy import Strategy, arg
from koordlet.statesinformer import PodMeta

log = logging.getLogger("koordlet.qos")

LABEL_EVICTION_ENABLED = "koordinator.sh/eviction-enabled"
"""Opt-in for the priority-based CPUEvict / MemoryEvict: only pods with ``"true"`` are candidates."""
ANNOTATION_EVICTION_POLICY = "koordinator.sh/eviction-policy"
"""JSON list of gate names allowed to evict the pod (absent: every gate may)."""
ANNOTATION_EVICTION_PRIORITY = "koordinator.sh/eviction-priority"
"""int32; lower is evicted first. Pods without it sort after pods with it."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod as the victim sort sees it. ``release`` is what evicting it gives back (bytes or millicores)."""

    uid: str
    name: str
    priority: int | None
    used: float | None
    release: float
    eviction_priority: int | None = None
    sub_priority: int | None = None
    sort_ratio: float | None = None
    """BECPUEvict's tiebreak: CPU usage / request."""
    resource: str = ""
    """Which resource ``release`` is of, when a need has several (``kubernetes.io/batch-cpu``, ...)."""


def _int_or_none(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def gate_allows(annotations: Mapping[str, str], gate: str) -> bool:
    """``koordinator.sh/eviction-policy`` lists the gates that may evict the pod; a bad value allows none."""
    raw = annotations.get(ANNOTATION_EVICTION_POLICY)
    if raw is None:
        return True
    try:
        allowed = boundedjson.loads(raw)
    except ValueError:
        return False
    return isinstance(allowed, list) and gate in allowed


def priority_value_with_default(pod: PodMeta) -> int:
    """Koordinator's ``GetPodPriorityValueWithDefault``: a non-zero ``spec.priority``, else the default value
    of the pod's priority class (koord-batch 5500, ...), else 0."""
    if pod.priority:
        return pod.priority
    for r in PRIORITY_RANGES:
        if r.priority_class is pod.priority_class:
            return r.default_value
    return 0


def opted_in(pod: PodMeta, priority_threshold: int) -> bool:
    """Priority-based eviction candidates: the opt-in label and a (defaulted) ``priority <= threshold``."""
    return pod.labels.get(LABEL_EVICTION_ENABLED) == "true" and priority_value_with_default(pod) <= priority_threshold


def candidate(
    pod: PodMeta,
    *,
    used: float | None,
    release: float,
    sort_ratio: float | None = None,
    resource: str = "",
    priority: int | None = None,
) -> Candidate:
    """``priority`` overrides ``spec.priority`` for the sort (the defaulted value of priority-based gates)."""
    return Candidate(
        uid=pod.uid,
        name=f"{pod.namespace}/{pod.name}",
        priority=pod.priority if priority is None else priority,
        used=used,
        release=release,
        eviction_priority=_int_or_none(pod.annotations.get(ANNOTATION_EVICTION_PRIORITY)),
        sub_priority=_int_or_none(pod.labels.get(LABEL_POD_PRIORITY)),
        sort_ratio=sort_ratio,
        resource=resource,
    )


def _asc(value: int | None) -> tuple[bool, int]:
    return (value is None, value or 0)


def _desc(value: float | None) -> tuple[bool, float]:
    """Larger first, missing last."""
    return (value is None, -(value or 0.0))


def be_memory_order(c: Candidate) -> tuple[object, ...]:
    """BEMemoryEvict: ``spec.priority`` ascending, then memory used descending (no metric last), then name."""
    return (_asc(c.priority), _desc(c.used), c.name)


def be_cpu_order(c: Candidate) -> tuple[object, ...]:
    """BECPUEvict: ``spec.priority`` ascending, then CPU usage/request descending, then name."""
    return (_asc(c.priority), _desc(c.sort_ratio), c.name)


def priority_order(c: Candidate) -> tuple[object, ...]:
    """CPUEvict / MemoryEvict: eviction-priority, priority, ``koordinator.sh/priority`` ascending; used desc."""
    return (_asc(c.eviction_priority), _asc(c.priority), _asc(c.sub_priority), _desc(c.used), c.name)


def release_from_threshold(used: float, capacity: float, threshold_percent: int, lower_percent: int) -> float:
    """Node-usage trigger (memory and CPU): ``usage% = floor(used*100/capacity)``; at or over the threshold,
    release ``capacity * (usage% - lower%) / 100``; otherwise 0."""
    if capacity <= 0:
        return 0.0
    usage_percent = math.floor(used * 100 / capacity)
    if usage_percent < threshold_percent:
        return 0.0
    return capacity * (usage_percent - lower_percent) / 100


@dataclass(frozen=True, slots=True)
class VictimPlan:
    """What to evict for a release need: ``victims`` in order, and the pods already evicted a moment ago
    that still exist (``pending``: counted as released, not evicted again, as Koordinator does)."""

    victims: tuple[Candidate, ...]
    pending: tuple[Candidate, ...] = ()
    outstanding: Mapping[str, float] = field(default_factory=dict)
    """What the candidates cannot cover, by resource (empty when the need is met)."""


def _as_need(need: float | Mapping[str, float]) -> dict[str, float]:
    if isinstance(need, Mapping):
        return {r: float(v) for r, v in need.items() if v > 0}
    return {"": float(need)} if need > 0 else {}


def plan_victims(
    ordered: Sequence[Candidate],
    need: float | Mapping[str, float],
    *,
    pending: Collection[str] = (),
    excluded: Collection[str] = (),
) -> VictimPlan:
    """Walk ``ordered`` and pick victims until ``need`` is covered (pure; the strategies' only decision).

    ``need`` is one amount, or an amount per resource (a candidate releases ``release`` of its
    ``resource``; one that releases nothing still outstanding is passed over). ``pending`` UIDs count toward
    the release without being evicted; ``excluded`` UIDs (the API refused them this round, e.g. a
    PodDisruptionBudget) are passed over for the next in order.
    """
    outstanding = _as_need(need)
    victims: list[Candidate] = []
    counted: list[Candidate] = []
    for c in ordered:
        if not outstanding:
            break
        if c.uid in excluded or outstanding.get(c.resource, 0.0) <= 0:
            continue
        left = outstanding[c.resource] - c.release
        if left > 0:
            outstanding[c.resource] = left
        else:
            del outstanding[c.resource]
        (counted if c.uid in pending else victims).append(c)
    return VictimPlan(tuple(victims), tuple(counted), outstanding)


class EvictionStrategy(Strategy):
    """An eviction strategy: ticks in a worker thread (the API calls block) and cools down after evicting.

    ``first_eviction_after_start``: Koordinator's CPU eviction starts its cool-down at start-up (no eviction
    in the first 20 s); memory eviction may fire at once.
    """

    BLOCKING = True
    COOL_FLAG = ""
    DEFAULT_COOL_SECONDS = 4.0
    COOL_FROM_START = False

    def __init__(self) -> None:
        super().__init__()
        self.cool_seconds = self.DEFAULT_COOL_SECONDS
        self.last_evict_time = float("-inf")
        self._evictor: PodEvictor | None = None
        self.evicted: list[str] = []
        self._short: set[str] = set()

    def configure(self, ctx: PluginContext) -> None:
        self.cool_seconds = float(arg(ctx, self.COOL_FLAG, self.DEFAULT_COOL_SECONDS))
        if self.COOL_FROM_START:
            self.last_evict_time = ctx.clock()
        evictor = ctx.evictor
        if evictor is None:
            log.warning("%s: no evictor in the context (standalone?): evictions are only logged", self.NAME)
            evictor = PodEvictor(None, node_name=ctx.node_name, clock=ctx.clock, dry_run=True)
        self._evictor = evictor

    @property
    def evictor(self) -> PodEvictor:
        if self._evictor is None:
            raise RuntimeError(f"{self.NAME}: setup() has not been called")
        return self._evictor

    def cooling(self) -> bool:
        return self.ctx.clock() - self.last_evict_time < self.cool_seconds

    def active_pods(self) -> dict[str, PodMeta]:
        return {p.uid: p for p in self.ctx.states_informer.get_all_pods() if p.phase in ("Running", "Pending", "")}

    def execute(
        self, gate: str, ordered: Sequence[Candidate], need: float | Mapping[str, float], message: str
    ) -> list[str]:
        """Carry out :func:`plan_victims` through the evictor; re-plan without the pods the API refused.

        Starts the cool-down when something was evicted. Returns the UIDs evicted. A shortfall (every
        candidate tried) is logged once per gate until the gate's need is met again.
        """
        pods = self.active_pods()
        done: set[str] = set()
        refused: set[str] = set()
        evicted: list[str] = []
        while True:
            pending = {c.uid for c in ordered if self.evictor.recently_evicted(c.uid)} | done
            plan = plan_victims(ordered, need, pending=pending, excluded=refused)
            todo = [c for c in plan.victims if c.uid not in done and c.uid not in refused]
            if not todo:
                break
            for c in todo:
                pod = pods.get(c.uid)
                if pod is None:
                    refused.add(c.uid)
                    continue
                outcome = self.evictor.evict(pod, gate, f"{message}, kill pod: {pod.name}")
                if outcome is EvictionOutcome.EVICTED:
                    evicted.append(c.uid)
                if outcome.releases or outcome is EvictionOutcome.DRY_RUN:
                    done.add(c.uid)
                else:
                    refused.add(c.uid)
        if evicted:
            self.last_evict_time = self.ctx.clock()
            self.evicted.extend(evicted)
        if plan.outstanding:
            if gate not in self._short:
                self._short.add(gate)
                wanted = ", ".join(f"{r or 'amount'} {v:.0f}" for r, v in sorted(plan.outstanding.items()))
                log.warning("%s: candidates cannot cover the need (%s still wanted; %s)", gate, wanted, message)
        else:
            self._short.discard(gate)
        return evicted
