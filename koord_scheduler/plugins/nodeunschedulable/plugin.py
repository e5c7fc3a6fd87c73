"""NodeUnschedulable (kube-scheduler ``nodeunschedulable/node_unschedulable.go``).

A node with ``spec.unschedulable`` rejects, with UnschedulableAndUnresolvable ``"node(s) were
unschedulable"``, every pod that does not tolerate ``node.kubernetes.io/unschedulable:NoSchedule``.

The flags of the (few) cordoned nodes are indexed once per ``nodes_generation``; a pod costs one
toleration check and one gather over ``positions``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.fast_paths import SignedPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import BatchFilterPlugin, EnqueueExtensions
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, Positions
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
from koord_scheduler.plugins.helpers import SnapshotCache, live_nodes
from koord_scheduler.plugins.nodeunschedulable.policy import (
    tolerates_unschedulable,
    unschedulable_flags,
    unschedulable_mask,
)

NAME = names.NODE_UNSCHEDULABLE
ARGS = None

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
_REJECTED = unresolvable(ERR_REASON_UNSCHEDULABLE)


@dataclass(frozen=True, slots=True)
class CordonIndex:
    schedulable: BoolArray
    """Indexed by position: the node is not cordoned."""
    count: int
    """Cordoned nodes."""


class NodeUnschedulable:
    name = NAME

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answer depends on, besides the node (see framework.node_cache)."""
        return pod.tolerations

    def __init__(self) -> None:
        self._index: SnapshotCache[str, CordonIndex] = SnapshotCache(max_entries=1)

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        index = self._index.get(snapshot, "cordoned", lambda: build_index(snapshot))
        if index.count == 0:
            return NodeFilterResult.all_pass(len(positions))
        tolerated = tolerates_unschedulable(pod.tolerations)
        return NodeFilterResult.from_mask(
            unschedulable_mask(index.schedulable, positions, tolerated=tolerated), _REJECTED
        )

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
                is_schedulable_after_pod_toleration_change,
            ),
        )


def build_index(snapshot: ClusterSnapshot) -> CordonIndex:
    flags = unschedulable_flags(((pos, node.unschedulable) for pos, node in live_nodes(snapshot)), snapshot.capacity)
    return CordonIndex(~flags, int(flags.sum()))


def is_schedulable_after_node_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """A node that is (now) schedulable may take the pod; one that stays cordoned may not."""
    if not isinstance(new, Node):
        return QueueingHint.SKIP
    if not new.unschedulable and (not isinstance(old, Node) or old.unschedulable):
        return QueueingHint.QUEUE
    if new.unschedulable and tolerates_unschedulable(pod.tolerations):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def is_schedulable_after_pod_toleration_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    if isinstance(new, Pod) and new.key == pod.key and tolerates_unschedulable(new.tolerations):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: None, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()


def declared_capabilities(plugin: NodeUnschedulable) -> tuple[BatchFilterPlugin, EnqueueExtensions, SignedPlugin]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin
