"""NodeName (kube-scheduler ``nodename/node_name.go``).

Filter passes every node when ``spec.nodeName`` is empty, else only the node of that name; the others get
UnschedulableAndUnresolvable ``"node(s) didn't match the requested node name"``. One dictionary lookup
per pod, whatever the cluster size.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.fast_paths import SignedPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import BatchFilterPlugin, EnqueueExtensions
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import unresolvable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    NodeFilterResult,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.nodename.policy import node_name_mask

NAME = names.NODE_NAME
ARGS = None

ERR_REASON = "node(s) didn't match the requested node name"
_REJECTED = unresolvable(ERR_REASON)


class NodeName:
    name = NAME

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answer depends on, besides the node (see framework.node_cache)."""
        return pod.node_name

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        if not pod.node_name:
            return NodeFilterResult.all_pass(len(positions))
        wanted = snapshot.positions.get(pod.node_name)
        return NodeFilterResult.from_mask(node_name_mask(positions, pod.node_name, wanted), _REJECTED)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE),
                is_schedulable_after_node_change,
            ),
        )


def is_schedulable_after_node_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """Only the arrival (or update) of the named node can help."""
    if isinstance(new, Node) and (not pod.node_name or new.name == pod.node_name):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: None, handle: Handle) -> NodeName:
    return NodeName()


def declared_capabilities(plugin: NodeName) -> tuple[BatchFilterPlugin, EnqueueExtensions, SignedPlugin]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin
