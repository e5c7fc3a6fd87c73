"""Which queueing event (``ClusterEvent``) a watch event of a Node or another object is."""

from __future__ import annotations

from apis.core.types import Node
from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource, EventType

_EVENT_RESOURCES = {r.value: r for r in EventResource}
_OBJECT_ACTIONS = {
    EventType.ADDED: ActionType.ADD,
    EventType.MODIFIED: ActionType.UPDATE,
    EventType.DELETED: ActionType.DELETE,
}


def object_cluster_event(kind: str, event: EventType) -> ClusterEvent | None:
    """The event of an object of ``kind`` (Reservation, NodeMetric...), or None for a kind no plugin can
    register for."""
    resource = _EVENT_RESOURCES.get(kind)
    return None if resource is None else ClusterEvent(resource, _OBJECT_ACTIONS[event])


def node_update_action(old: Node, new: Node) -> ActionType:
    """What changed in a Node update that scheduling cares about (empty: nothing)."""
    action = ActionType(0)
    if old.allocatable != new.allocatable:
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.labels != new.labels:
        action |= ActionType.UPDATE_NODE_LABEL
    if old.taints != new.taints or old.unschedulable != new.unschedulable:
        action |= ActionType.UPDATE_NODE_TAINT
    if old.conditions != new.conditions:
        action |= ActionType.UPDATE_NODE_CONDITION
    return action
