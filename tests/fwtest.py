"""Small harness for plugin unit tests: a snapshot from builders, and one call per extension point."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from apis.core.types import Node, Pod
from apis.feature_gates import DEFAULT_FEATURE_GATES, SchedulerFeatureGates
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import ErrorHandlerFilter, ObjectHandler, ObjectKind, SimulationReporter
from koord_scheduler.framework.waiting_pods import WaitingPod


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
    """An ExtendedHandle for unit tests: a snapshot, a fixed clock, and the scheduler's services kept in
    lists (watch handlers by kind, pod watchers, reports, forget-pod handlers, error filters, accounted
    and queued pods) so a test can drive or inspect them."""

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

    @property
    def clock(self) -> Callable[[], float]:
        return lambda: self.now

    def watch(self, kind: ObjectKind, handler: ObjectHandler) -> None:
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


def filter_statuses(plugin: object, pod: Pod, snap: ClusterSnapshot, state: CycleState | None = None
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


def scores(plugin: object, pod: Pod, snap: ClusterSnapshot, state: CycleState | None = None,
           *, normalize: bool = True) -> dict[str, int]:
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
        values = np.array([plugin.score(state, pod, snap.info(p)) for p in positions.tolist()],  # type: ignore[attr-defined]
                          dtype=np.int64)
    ext = plugin.score_extensions() if hasattr(plugin, "score_extensions") else None  # type: ignore[attr-defined]
    if normalize and ext is not None:
        ext.normalize_score(state, pod, values)
    return {snap.info(p).name: int(v) for p, v in zip(positions.tolist(), values.tolist(), strict=True)}
