"""Small harness for plugin unit tests: a snapshot from builders, and one call per extension point."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from prometheus_client import CollectorRegistry

from apis.core.types import Node, Pod
from apis.feature_gates import DEFAULT_FEATURE_GATES, SchedulerFeatureGates
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.handle import Handle, PreemptionExtenders
from koord_scheduler.framework.interfaces import PreFilterPlugin
from koord_scheduler.framework.koordinator_stages import NUMAHintProvider, ReservationFilterPlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import ErrorHandlerFilter, Handler, ObjectHandler, ObjectKind, SimulationReporter
from koord_scheduler.framework.waiting_pods import WaitingPod
from koord_scheduler.scheduler.nominator import PodNominator

T = TypeVar("T")


def make_snapshot(nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> ClusterSnapshot:
    """A snapshot holding ``nodes`` and the ``pods`` (each must have ``node_name`` set)."""
    snap = ClusterSnapshot()
    for node in nodes:
        snap.upsert_node(node)
    for pod in pods:
        snap.add_pod(pod)
    return snap


@dataclass
class FakeHandle:
    """A :class:`~koord_scheduler.framework.handle.Handle` for unit tests: a snapshot, a fixed clock, and
    the scheduler's services kept in lists (watch handlers by kind, pod watchers, reports, forget-pod
    handlers, error filters, accounted and queued pods) so a test can drive or inspect them. It is also
    the :class:`~koord_scheduler.framework.handle.SchedulerServices` of a real ``Framework(name, handle)``.

    The profile half (other plugins, the Filter chain) is empty unless ``framework`` is set: no
    reservation filter plugins, no PreFilter plugins, no preemption gate (and no Filter chain to run)."""

    snapshot: ClusterSnapshot
    now: float = 1_700_000_000.0
    cluster: Any = None
    """A ClusterClient when a test needs one; None for plugins that never call the cluster."""
    calls: list[tuple[str, str]] = field(default_factory=list)
    metrics_registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    watch_handlers: dict[str, list[ObjectHandler]] = field(default_factory=dict)
    pod_watchers: list[ObjectHandler] = field(default_factory=list)
    reports: list[SimulationReporter] = field(default_factory=list)
    forget_pod_handlers: list[Callable[[Pod], None]] = field(default_factory=list)
    error_filters: list[tuple[ErrorHandlerFilter | None, ErrorHandlerFilter | None]] = field(default_factory=list)
    accounted: dict[str, Pod] = field(default_factory=dict)
    queued: dict[str, Pod] = field(default_factory=dict)
    waiting: dict[str, WaitingPod] = field(default_factory=dict)
    feature_gates: SchedulerFeatureGates = DEFAULT_FEATURE_GATES
    nominator: PodNominator = field(default_factory=PodNominator)
    preemption_extenders: PreemptionExtenders | None = None
    activated: list[str] = field(default_factory=list)
    next_pod_hooks: list[Callable[[], str | None]] = field(default_factory=list)
    assumed: set[str] = field(default_factory=set)
    framework: Handle | None = None
    """Answers the profile half of the handle when a test builds one around this fake."""

    @property
    def clock(self) -> Callable[[], float]:
        return lambda: self.now

    def watch(self, kind: ObjectKind[T], handler: Handler[T]) -> None:
        self.watch_handlers.setdefault(kind.kind, []).append(handler)

    def watch_pods(self, handler: ObjectHandler) -> None:
        self.pod_watchers.append(handler)

    def add_simulation_report(self, reporter: SimulationReporter) -> None:
        self.reports.append(reporter)

    def register_forget_pod_handler(self, handler: Callable[[Pod], None]) -> None:
        self.forget_pod_handlers.append(handler)

    def register_error_handler_filters(self, pre: ErrorHandlerFilter | None, post: ErrorHandlerFilter | None) -> None:
        self.error_filters.append((pre, post))

    def forget_pod(self, pod: Pod) -> None:
        for handler in self.forget_pod_handlers:
            handler(pod)

    def account_pod(self, pod: Pod) -> None:
        self.accounted[pod.key] = pod
        self.snapshot.add_pod(pod)

    def unaccount_pod(self, pod: Pod) -> None:
        if self.accounted.pop(pod.key, None) is not None:
            self.snapshot.remove_pod(pod)

    def enqueue_pod(self, pod: Pod) -> None:
        self.queued[pod.key] = pod

    def dequeue_pod(self, pod: Pod) -> None:
        self.queued.pop(pod.key, None)

    def waiting_pod(self, key: str) -> WaitingPod | None:
        return self.waiting.get(key)

    def activate_pods(self, keys: Iterable[str]) -> None:
        self.activated.extend(keys)

    def add_next_pod_hook(self, hook: Callable[[], str | None]) -> None:
        self.next_pod_hooks.append(hook)

    def is_assumed(self, key: str) -> bool:
        return key in self.assumed

    # ----- the profile half of the handle -----

    @property
    def pre_filter_plugins(self) -> Sequence[PreFilterPlugin]:
        return self.framework.pre_filter_plugins if self.framework is not None else ()

    @property
    def filter_plugin_names(self) -> Sequence[str]:
        return self.framework.filter_plugin_names if self.framework is not None else ()

    @property
    def reservation_filter_plugins(self) -> Sequence[ReservationFilterPlugin]:
        return self.framework.reservation_filter_plugins if self.framework is not None else ()

    @property
    def numa_hint_providers(self) -> Sequence[NUMAHintProvider]:
        return self.framework.numa_hint_providers if self.framework is not None else ()

    def filter_nodes_uncached(
        self, state: CycleState, pod: Pod, positions: Positions, diagnosis: Diagnosis
    ) -> Positions:
        assert self.framework is not None, "this FakeHandle has no framework to run the Filter chain"
        return self.framework.filter_nodes_uncached(state, pod, positions, diagnosis)

    def run_reservation_filter_plugins(
        self, state: CycleState, pod: Pod, reservation: object, node_info: NodeInfo
    ) -> Status:
        if self.framework is not None:
            return self.framework.run_reservation_filter_plugins(state, pod, reservation, node_info)
        return Status()

    async def run_pre_bind_reservation(self, state: CycleState, reservation: object, node_name: str) -> Status:
        if self.framework is not None:
            return await self.framework.run_pre_bind_reservation(state, reservation, node_name)
        return Status()

    def preemption_refusal(self, state: CycleState, pod: Pod) -> Status | None:
        return self.framework.preemption_refusal(state, pod) if self.framework is not None else None


if TYPE_CHECKING:
    _handle: type[Handle] = FakeHandle


def filter_statuses(
    plugin: object, pod: Pod, snap: ClusterSnapshot, state: CycleState | None = None
) -> dict[str, Status]:
    """Run PreFilter (if any) then Filter on every node; name -> Status (Success for passing nodes)."""
    state = state or CycleState()
    pre = getattr(plugin, "pre_filter", None)
    if callable(pre):
        _, status = pre(state, pod, snap)
        if status.is_skip:
            return {info.name: Status() for info in snap.iter_nodes()}
        if not status.is_success:
            return {info.name: status for info in snap.iter_nodes()}
    positions = snap.node_order()
    out: dict[str, Status] = {}
    batch = getattr(plugin, "filter_nodes", None)
    if callable(batch):
        result = batch(state, pod, snap, positions)
        for i, pos in enumerate(positions.tolist()):
            out[snap.info(pos).name] = Status() if result.passed[i] else result.status_of(i)
    else:
        for pos in positions.tolist():
            info = snap.info(pos)
            out[info.name] = plugin.filter(state, pod, info)  # type: ignore[attr-defined]
    return out


def scores(
    plugin: object, pod: Pod, snap: ClusterSnapshot, state: CycleState | None = None, *, normalize: bool = True
) -> dict[str, int]:
    """Run PreScore, Score and (optionally) NormalizeScore over every node; name -> score."""
    state = state or CycleState()
    positions = snap.node_order()
    pre = getattr(plugin, "pre_score", None)
    if callable(pre):
        status = pre(state, pod, snap, positions)
        if status.is_skip:
            return {}
        assert status.is_success, status
    batch = getattr(plugin, "score_nodes", None)
    if callable(batch):
        values = np.asarray(batch(state, pod, snap, positions), dtype=np.int64)
    else:
        values = np.array(
            [plugin.score(state, pod, snap.info(p)) for p in positions.tolist()],  # type: ignore[attr-defined]
            dtype=np.int64,
        )
    ext = plugin.score_extensions() if hasattr(plugin, "score_extensions") else None  # type: ignore[attr-defined]
    if normalize and ext is not None:
        ext.normalize_score(state, pod, values)
    return {snap.info(p).name: int(v) for p, v in zip(positions.tolist(), values.tolist(), strict=True)}
