"""SchedulingGates (kube-scheduler ``schedulinggates/scheduling_gates.go``).

PreEnqueue rejects a pod while ``spec.schedulingGates`` is non-empty, with UnschedulableAndUnresolvable
``"waiting for scheduling gates: [g1 g2]"`` (Go's ``%v`` of a string slice). The queue keeps such a pod in
the gated pool; the pod update that removes the last gate brings it back.
"""

from __future__ import annotations

from collections.abc import Sequence

from apis.core.types import Pod
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import EnqueueExtensions, PreEnqueuePlugin
from koord_scheduler.framework.status import Status, success, unresolvable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from koord_scheduler.plugins import names

NAME = names.SCHEDULING_GATES
ARGS = None


def gated_message(gates: Sequence[str]) -> str:
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


class SchedulingGates:
    name = NAME

    def pre_enqueue(self, pod: Pod) -> Status:
        if not pod.scheduling_gates:
            return success()
        return unresolvable(gated_message(pod.scheduling_gates))

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                is_schedulable_after_gates_eliminated,
            ),
        )


def is_schedulable_after_gates_eliminated(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """Only the pod's own update can lift its gates."""
    if isinstance(new, Pod) and new.uid == pod.uid and new.key == pod.key and not new.scheduling_gates:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: None, handle: Handle) -> SchedulingGates:
    return SchedulingGates()


def declared_capabilities(plugin: SchedulingGates) -> tuple[PreEnqueuePlugin, EnqueueExtensions]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin
