"""What quota preemption needs from the cluster: a node's free room (victims are evicted through
:mod:`koord_scheduler.plugins.victim_execution`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from apis.core.types import Pod
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.plugins.victim_execution import VictimTracker, disruption_target_patch


def node_free(snapshot: ClusterSnapshot, position: int, request: Mapping[str, int]) -> dict[str, int]:
    """Allocatable minus requested on the node, for the resources of ``request``."""
    free: dict[str, int] = {}
    for key in request:
        column = snapshot.column(key)
        if column is None:
            free[key] = 0
        else:
            free[key] = int(snapshot.allocatable[position, column] - snapshot.requested[position, column])
    return free


def victims_terminating(
    tracker: VictimTracker,
    snapshot: ClusterSnapshot,
    pod: Pod,
    statuses: Mapping[str, Status],
    same_quota: Callable[[Pod], bool],
) -> bool:
    """Koordinator's ``PodEligibleToPreemptOthers``: the pod's nominated node still holds a lower-priority
    pod of the same quota being deleted by a preemption (unless Filter found that node unresolvable)."""
    node = pod.nominated_node_name
    status = statuses.get(node) if node else None
    if not node or (status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
        return False
    info = snapshot.node_info(node)
    return info is not None and any(
        other.priority < pod.priority and tracker.terminating(other) and same_quota(other)
        for other in info.pods.values()
    )


async def evict(
    tracker: VictimTracker, handle: Handle, pod: Pod, node_name: str, victims: Sequence[Pod], *, plugin: str
) -> None:
    """Nominate ``pod`` to ``node_name``, then mark each victim (``DisruptionTarget``) and delete it with a
    reason; failures are logged."""
    await tracker.call(
        handle.cluster, "set_nominated_node_name", pod, node_name, what=f"nominating {pod.key} to {node_name}"
    )
    message = f"{pod.scheduler_name}: preempting to accommodate a higher priority pod"
    for victim in victims:
        await tracker.evict(
            victim,
            reject_plugin=plugin,
            patch=disruption_target_patch(victim, message, handle.clock()),
            reason=f"Preempted by pod {pod.meta.uid or pod.key} on node {node_name} (quota preemption)",
        )
