"""The cluster events a pod update amounts to (kube's ``framework.PodSchedulingPropertiesChange``)."""

from __future__ import annotations

from apis.core.types import Pod
from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource


def pod_scheduling_property_events(old: Pod, new: Pod) -> tuple[ClusterEvent, ...]:
    """The events an update from ``old`` to ``new`` produces, in kube's order.

    Resource is ``AssignedPod`` when ``new`` has a node, else ``UnscheduledPod``. Label change, request
    scale-down (a request removed or lowered), scheduling gates eliminated, toleration change and
    generated ResourceClaim (``status.resourceClaimStatuses``) each give one event; if none applies the
    update is a generic ``UPDATE``.
    """
    resource = EventResource.ASSIGNED_POD if new.node_name else EventResource.UNSCHEDULED_POD
    actions: list[ActionType] = []
    if old.labels != new.labels:
        actions.append(ActionType.UPDATE_POD_LABEL)
    if _scaled_down(old, new):
        actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
    if old.scheduling_gates and not new.scheduling_gates:
        actions.append(ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    # The API only lets tolerations be added, so a length change is a change (kube does the same).
    if len(old.tolerations) != len(new.tolerations):
        actions.append(ActionType.UPDATE_POD_TOLERATIONS)
    if old.resource_claim_statuses != new.resource_claim_statuses:
        actions.append(ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    if not actions:
        actions.append(ActionType.UPDATE)
    return tuple(ClusterEvent(resource, action) for action in actions)


def _scaled_down(old: Pod, new: Pod) -> bool:
    for name, old_request in old.requests.items():
        new_request = new.requests.get(name)
        if new_request is None or new_request < old_request:
            return True
    return False
