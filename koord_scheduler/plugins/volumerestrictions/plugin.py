"""VolumeRestrictions (kube-scheduler ``volumerestrictions/volume_restrictions.go``).

PreFilter looks up the pod's claims (a missing one rejects the pod, UnschedulableAndUnresolvable) and
counts how many of its ``ReadWriteOncePod`` claims scheduled pods use; it returns Skip when the pod has
no such claim in use and no inline disk that can conflict. Filter rejects, Unschedulable, a node where
an inline disk conflicts (``node(s) had no available disk``), and every node while a ReadWriteOncePod
claim is in use. PreFilterExtensions keep the count right in preemption dry runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apis.core.storage import READ_WRITE_ONCE_POD, PersistentVolumeClaim
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
)
from koord_scheduler.framework.per_node_filter import PerNodeFilter
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Status, skip, success, unresolvable, unschedulable
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
from koord_scheduler.plugins.storageinfo import kinds
from koord_scheduler.plugins.storageinfo.events import on
from koord_scheduler.plugins.storageinfo.listers import StorageListers
from koord_scheduler.plugins.volumerestrictions import policy

NAME = names.VOLUME_RESTRICTIONS
ARGS = None

_DISK_CONFLICT = unschedulable(policy.ERR_REASON_DISK_CONFLICT)
_RWOP_CONFLICT = unschedulable(policy.ERR_REASON_RWOP_CONFLICT)


@dataclass(slots=True)
class PreFilterState:
    read_write_once_pod_claims: frozenset[str]
    """``namespace/name`` of the pod's ReadWriteOncePod claims."""
    conflicting_refs: int


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)


class VolumeRestrictions:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.listers = StorageListers().subscribe(handle, (kinds.CLAIM,))

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, skip()
        rwop: set[str] = set()
        for volume in pod.volumes:
            if volume.source != "persistentVolumeClaim":
                continue
            claim = self.listers.claim(pod.namespace, volume.claim_name)
            if claim is None:
                return None, unresolvable(f'persistentvolumeclaim "{volume.claim_name}" not found')
            if READ_WRITE_ONCE_POD in claim.access_modes:
                rwop.add(claim.key)
        claims = frozenset(rwop)
        conflicts = sum(1 for key in claims if _claim_in_use(snapshot, key)) if claims else 0
        if not policy.needs_restrictions_check(pod) and conflicts == 0:
            return None, skip()
        state.write(PRE_FILTER_KEY, PreFilterState(claims, conflicts))
        return None, success()

    def pre_filter_extensions(self) -> VolumeRestrictions:
        return self

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        if pre is not None:
            pre.conflicting_refs += policy.claim_refs(pod_to_add, pre.read_write_once_pod_claims)
        return success()

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        if pre is not None:
            pre.conflicting_refs -= policy.claim_refs(pod_to_remove, pre.read_write_once_pod_claims)
        return success()

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if policy.pod_conflicts(pod, node_info.pods.values()):
            return _DISK_CONFLICT
        pre = state.get(PRE_FILTER_KEY)
        if pre is not None and pre.conflicting_refs > 0:
            return _RWOP_CONFLICT
        return success()

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        if state.get(PRE_FILTER_KEY) is None:
            return NodeFilterResult.all_pass(len(positions))
        return PerNodeFilter(self).filter_nodes(state, pod, snapshot, positions)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
            *on(kinds.CLAIM.kind, ActionType.ADD, after_claim_added),
        ]


def _claim_in_use(snapshot: ClusterSnapshot, key: str) -> bool:
    """``IsPVCUsedByPods``: some pod the scheduler has on a node mounts the claim."""
    claims = frozenset((key,))
    return any(
        policy.claim_refs(pod, claims)
        for info in snapshot.infos
        if info is not None
        for pod in info.pods.values()
        if pod.volumes
    )


def after_pod_deleted(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """The deleted pod held a conflicting disk, or shared a claim with the waiting pod."""
    if not isinstance(old, Pod) or old.namespace != pod.namespace:
        return QueueingHint.SKIP
    if policy.pod_conflicts(pod, [old]):
        return QueueingHint.QUEUE
    claims = {v.claim_name for v in pod.volumes if v.source == "persistentVolumeClaim"}
    if any(v.source == "persistentVolumeClaim" and v.claim_name in claims for v in old.volumes):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def after_claim_added(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    if not isinstance(new, PersistentVolumeClaim) or new.namespace != pod.namespace:
        return QueueingHint.SKIP
    claims = {v.claim_name for v in pod.volumes if v.source == "persistentVolumeClaim"}
    return QueueingHint.QUEUE if new.name in claims else QueueingHint.SKIP


def new(args: None, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)


def declared_capabilities(
    plugin: VolumeRestrictions,
) -> tuple[
    PreFilterExtensions,
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    EnqueueExtensions,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin
