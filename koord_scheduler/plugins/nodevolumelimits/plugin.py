"""NodeVolumeLimits (kube-scheduler ``nodevolumelimits/csi.go``, the ``CSILimits`` plugin).

PreFilter returns Skip for pods without claims or inline in-tree disks. Filter reads the node's
CSINode ``allocatable.count`` per driver and rejects the node, Unschedulable (preemption may free
attachments), with ``node(s) exceed max volume count`` when the pod's new volumes would exceed a limit
(:mod:`.policy`). The pod's volumes are worked out once per cycle and per CSINode's migration state;
the pods on a node are read only where one of the pod's drivers has a limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from apis.core.storage import CSINode, PersistentVolumeClaim
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import BatchFilterPlugin, EnqueueExtensions, FilterPlugin, PreFilterPlugin
from koord_scheduler.framework.per_node_filter import PerNodeFilter
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Status, error, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    NodeFilterResult,
    PreFilterResult,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.nodevolumelimits import policy
from koord_scheduler.plugins.storageinfo import kinds
from koord_scheduler.plugins.storageinfo.events import on
from koord_scheduler.plugins.storageinfo.listers import StorageListers

NAME = names.NODE_VOLUME_LIMITS
ARGS = None

_EXCEEDED = unschedulable(policy.ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)


@dataclass(slots=True)
class PreFilterState:
    new_volumes: dict[tuple[bool, frozenset[str]], dict[str, str]] = field(default_factory=dict)
    """The pod's volumes by (CSINode exists, its migrated plugins): they depend on nothing else."""


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)


class NodeVolumeLimits:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.listers = StorageListers().subscribe(
            handle, (kinds.CLAIM, kinds.VOLUME, kinds.STORAGE_CLASS, kinds.CSI_NODE)
        )

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes or not policy.has_attachable_volumes(pod):
            return None, skip()
        state.write(PRE_FILTER_KEY, PreFilterState())
        return None, success()

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        node = node_info.node
        if pre is None or node is None:
            return success()
        csi_node = self.listers.csi_nodes.get(node.name)
        try:
            new_volumes = self._new_volumes(pre, pod, csi_node)
            if not new_volumes:
                return success()
            limits = csi_node.allocatable if csi_node is not None else None
            if not policy.limited_drivers(new_volumes, limits):
                return success()
            assert limits is not None
            attached = policy.union(
                self._volumes(existing, csi_node, new_pod=False)
                for existing in node_info.pods.values()
                if existing.volumes
            )
        except policy.ClaimLookupError as err:
            return unresolvable(str(err)) if err.not_found else error(str(err))
        return _EXCEEDED if policy.exceeds_limits(new_volumes, attached, limits) else success()

    def _new_volumes(self, pre: PreFilterState, pod: Pod, csi_node: CSINode | None) -> dict[str, str]:
        key = (csi_node is not None, csi_node.migrated_plugins if csi_node is not None else frozenset())
        found = pre.new_volumes.get(key)
        if found is None:
            found = pre.new_volumes[key] = self._volumes(pod, csi_node, new_pod=True)
        return found

    def _volumes(self, pod: Pod, csi_node: CSINode | None, *, new_pod: bool) -> dict[str, str]:
        listers = self.listers
        return policy.attachable_volumes(
            pod, csi_node, claims=listers.claims, volumes=listers.volumes, classes=listers.classes, new_pod=new_pod
        )

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        if state.get(PRE_FILTER_KEY) is None:
            return NodeFilterResult.all_pass(len(positions))
        return PerNodeFilter(self).filter_nodes(state, pod, snapshot, positions)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            *on(kinds.CSI_NODE.kind, ActionType.ADD),
            *on(kinds.CSI_NODE.kind, ActionType.UPDATE, after_csi_node_updated),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), after_pod_deleted),
            *on(kinds.CLAIM.kind, ActionType.ADD, after_claim_added),
        ]


def after_csi_node_updated(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """Some driver's limit grew."""
    if not isinstance(old, CSINode) or not isinstance(new, CSINode):
        return QueueingHint.QUEUE
    before = old.allocatable or {}
    for driver in new.drivers:
        if (new.allocatable or {}).get(driver, 0) > before.get(driver, 0):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def after_pod_deleted(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """A pod on a node (or nominated to one) with attachable volumes left."""
    if not isinstance(old, Pod) or not old.volumes or not (old.node_name or old.nominated_node_name):
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if policy.has_attachable_volumes(old) else QueueingHint.SKIP


def after_claim_added(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    if isinstance(new, PersistentVolumeClaim) and new.namespace == pod.namespace and new.name in pod.pvc_names:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: None, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle)


def declared_capabilities(
    plugin: NodeVolumeLimits,
) -> tuple[
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    EnqueueExtensions,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin
