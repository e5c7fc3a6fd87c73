"""What the eviction strategies share: who may be a victim, in which order, and how many are enough.

Pure functions over :class:`Candidate` records, plus :func:`evict_until`, the one loop that hands a sorted
victim list to the :class:`~koordlet.qosmanager.evictor.PodEvictor` and stops once the release is covered.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from apis.extension import LABEL_POD_PRIORITY
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
        allowed = json.loads(raw)
    except ValueError:
        return False
    return isinstance(allowed, list) and gate in allowed


def opted_in(pod: PodMeta, priority_threshold: int) -> bool:
    """Priority-based eviction candidates: the opt-in label and ``priority <= threshold``."""
    return (
        pod.labels.get(LABEL_EVICTION_ENABLED) == "true"
        and pod.priority is not None
        and pod.priority <= priority_threshold
    )


def candidate(pod: PodMeta, *, used: float | None, release: float, sort_ratio: float | None = None) -> Candidate:
    return Candidate(
        uid=pod.uid,
        name=f"{pod.namespace}/{pod.name}",
        priority=pod.priority,
        used=used,
        release=release,
        eviction_priority=_int_or_none(pod.annotations.get(ANNOTATION_EVICTION_PRIORITY)),
        sub_priority=_int_or_none(pod.labels.get(LABEL_POD_PRIORITY)),
        sort_ratio=sort_ratio,
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


def plan_victims(
    ordered: Sequence[Candidate], need: float, pending: Callable[[str], bool] = lambda _uid: False
) -> list[Candidate]:
    """Victims in order until their releases cover ``need``. A pod evicted a moment ago that still exists
    (``pending``) counts toward the release without being evicted again (koordinator#3137)."""
    victims: list[Candidate] = []
    released = 0.0
    for c in ordered:
        if released >= need:
            break
        released += c.release
        if not pending(c.uid):
            victims.append(c)
    return victims


def evict_until(
    ordered: Iterable[Candidate],
    need: float,
    pods: Mapping[str, PodMeta],
    evictor: PodEvictor,
    *,
    gate: str,
    message: str,
) -> tuple[list[str], float]:
    """Evict in order until ``need`` is covered; a victim the API refuses (PDB) is passed over for the next.

    Returns the UIDs actually evicted and the amount counted as released.
    """
    evicted: list[str] = []
    released = 0.0
    for c in ordered:
        if released >= need:
            break
        pod = pods.get(c.uid)
        if pod is None:
            continue
        if evictor.recently_evicted(c.uid):
            released += c.release
            continue
        outcome = evictor.evict(pod, gate, f"{message}, pod releases {c.release:.0f}")
        if outcome is EvictionOutcome.EVICTED:
            evicted.append(c.uid)
        if outcome.releases or outcome is EvictionOutcome.DRY_RUN:
            released += c.release
    return evicted, released


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

    def execute(self, gate: str, ordered: Sequence[Candidate], need: float, message: str) -> list[str]:
        """Evict in order until ``need`` is covered; start the cool-down when something was evicted."""
        evicted, released = evict_until(ordered, need, self.active_pods(), self.evictor, gate=gate, message=message)
        if evicted:
            self.last_evict_time = self.ctx.clock()
            self.evicted.extend(evicted)
        if released < need:
            log.warning("%s: released %.0f of %.0f wanted (%s)", gate, released, need, message)
        return evicted
