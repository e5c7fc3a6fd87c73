"""Builders for the scheduling-queue tests: pods, a fake clock, a PreEnqueue stand-in, registered events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from apis.core.frozendict import FrozenDict
from apis.core.types import ObjectMeta, Pod, Toleration
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueuedPodInfo,
    QueueingHint,
)
from koord_scheduler.scheduler.queue import QueueOptions, SchedulingQueue

T0 = 1_700_000_000.25
"""A start time a quarter into a second, so whole-second truncation of backoff expiries is visible."""

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
NODE_LABEL = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)
NODE_TAINT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT)
EVERYTHING = ClusterEvent(EventResource.WILDCARD, ActionType.ALL)

FIT = "NodeResourcesFit"
AFFINITY = "NodeAffinity"
GATES = "SchedulingGates"
SILENT = "NoEventsPlugin"
"""Registered with no events: every event may help it."""


def make_pod(
    name: str,
    *,
    priority: int = 0,
    gates: tuple[str, ...] = (),
    uid: str | None = None,
    node: str = "",
    labels: Mapping[str, str] | None = None,
    requests: Mapping[str, int] | None = None,
    tolerations: tuple[Toleration, ...] = (),
) -> Pod:
    return Pod(
        meta=ObjectMeta(
            name=name,
            namespace="default",
            uid=uid if uid is not None else f"uid-{name}",
            labels=FrozenDict(labels or {}),
        ),
        priority=priority,
        scheduling_gates=gates,
        node_name=node,
        requests=FrozenDict(requests or {}),
        tolerations=tolerations,
    )


def key(name: str) -> str:
    return f"default/{name}"


@dataclass
class FakeClock:
    now: float = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def scheduling_gates(pod: Pod) -> Status:
    """The SchedulingGates PreEnqueue plugin, already stamped as the runtime would."""
    if pod.scheduling_gates:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("waiting for scheduling gates",), GATES)
    return Status()


def affinity_hint(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """Queue unless the new object says it is irrelevant; "boom" makes the hint fail."""
    if new == "boom":
        raise RuntimeError("hint failed")
    return QueueingHint.SKIP if new == "irrelevant" else QueueingHint.QUEUE


def default_plugin_events() -> dict[str, Sequence[ClusterEventWithHint]]:
    return {
        FIT: [ClusterEventWithHint(NODE_ADD)],
        AFFINITY: [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL), affinity_hint
            )
        ],
        GATES: [
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED))
        ],
        SILENT: [],
    }


def priority_sort_key(qpi: QueuedPodInfo) -> tuple[int, float]:
    return (-qpi.pod.priority, qpi.timestamp)


def priority_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    return a.pod.priority > b.pod.priority or (a.pod.priority == b.pod.priority and a.timestamp < b.timestamp)


@dataclass
class Harness:
    """A queue on a fake clock, recording ``scheduler_queue_incoming_pods_total`` increments."""

    clock: FakeClock
    queue: SchedulingQueue
    incoming: list[tuple[str, str]] = field(default_factory=list)

    def fail(
        self,
        *,
        unschedulable: frozenset[str] = frozenset(),
        pending: frozenset[str] = frozenset(),
        error: bool = False,
        events: Sequence[tuple[ClusterEvent, object | None]] = (),
    ) -> QueuedPodInfo:
        """Pop one pod, deliver ``events`` (event, new object) while it is in flight, and report it failed."""
        qpi = self.queue.pop()
        assert qpi is not None
        for event, new in events:
            self.queue.on_cluster_event(event, None, new)
        qpi.unschedulable_plugins = unschedulable
        qpi.pending_plugins = pending
        self.queue.add_unschedulable(qpi, error=error)
        return qpi

    def pop_names(self) -> list[str]:
        names = []
        while (qpi := self.queue.pop()) is not None:
            names.append(qpi.pod.name)
            self.queue.done(qpi.key)
        return names


def make_harness(
    *,
    pop_from_backoff: bool = True,
    use_sort_key: bool = True,
    plugin_events: Mapping[str, Sequence[ClusterEventWithHint]] | None = None,
) -> Harness:
    clock = FakeClock()
    incoming: list[tuple[str, str]] = []
    queue = SchedulingQueue(
        less=priority_less,
        pre_enqueue=scheduling_gates,
        plugin_events=default_plugin_events() if plugin_events is None else plugin_events,
        clock=clock,
        options=QueueOptions(
            pop_from_backoff=pop_from_backoff,
            sort_key=priority_sort_key if use_sort_key else None,
            on_incoming=lambda queue, event: incoming.append((queue, event)),
        ),
    )
    return Harness(clock, queue, incoming)


def counts(active: int = 0, backoff: int = 0, unschedulable: int = 0, gated: int = 0) -> dict[str, int]:
    return {"active": active, "backoff": backoff, "unschedulable": unschedulable, "gated": gated}
