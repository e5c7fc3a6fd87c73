"""What quota preemption needs from the cluster: a node's free room, and carrying out a decision."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from apis.core.types import Pod
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.plugins.elasticquota.preemption import Victim

log = logging.getLogger(__name__)


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


async def execute(
    cluster: ClusterClient, pod: Pod, node_name: str, victims: Sequence[Victim], pods: Mapping[str, Pod]
) -> None:
    """Nominate ``pod`` to ``node_name``, then delete each victim with a reason (failures are logged)."""
    try:
        await cluster.set_nominated_node_name(pod, node_name)
    except Exception as exc:
        log.warning("nominating %s to %s failed: %s", pod.key, node_name, exc)
    for victim in victims:
        victim_pod = pods.get(victim.key)
        if victim_pod is None:
            continue
        reason = f"Preempted by pod {pod.meta.uid or pod.key} on node {node_name} (quota preemption)"
        try:
            await cluster.delete_pod(victim_pod, reason=reason)
        except Exception as exc:
            log.warning("preempting %s failed: %s", victim.key, exc)
