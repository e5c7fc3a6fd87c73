"""VolumeZone (kube-scheduler ``volumezone/volume_zone.go``).

PreFilter reads the zone and region labels of the pod's bound volumes (:mod:`.policy`) and returns Skip
when there are none; a claim, class or volume it cannot find rejects the pod, UnschedulableAndUnresolvable,
with the API server's message. Filter keeps the nodes in those zones:
``node(s) had no available volume zone`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.core.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import BatchFilterPlugin, EnqueueExtensions, FilterPlugin, PreFilterPlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Status, skip, success, unresolvable
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
from koord_scheduler.plugins.volumezone import policy
from koord_scheduler.plugins.volumezone.policy import VolumeTopology

NAME = names.VOLUME_ZONE
ARGS = None

_CONFLICT = unresolvable(policy.ERR_REASON_CONFLICT)


@dataclass(frozen=True, slots=True)
class PreFilterState:
    topologies: tuple[VolumeTopology, ...]


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)


class VolumeZone:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.listers = StorageListers().subscribe(handle, (kinds.CLAIM, kinds.VOLUME, kinds.STORAGE_CLASS))

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.pvc_names:
            return None, skip()
        topologies, problem = policy.pod_topologies(
            pod, self.listers.claims, self.listers.volumes, self.listers.classes
        )
        if problem:
            return None, unresolvable(problem)
        if not topologies:
            return None, skip()
        state.write(PRE_FILTER_KEY, PreFilterState(topologies))
        return None, success()

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        node = node_info.node
        if pre is None or node is None or policy.node_fits(pre.topologies, node.labels):
            return success()
        return _CONFLICT

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return NodeFilterResult.all_pass(len(positions))
        passed = np.fromiter(
            (policy.node_fits(pre.topologies, snapshot.node(p).labels) for p in positions.tolist()),
            dtype=np.bool_,
            count=len(positions),
        )
        return NodeFilterResult.from_mask(passed, _CONFLICT)

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        add_update = ActionType.ADD | ActionType.UPDATE
        return [
            *on(kinds.STORAGE_CLASS.kind, ActionType.ADD, after_storage_class_added),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            *on(kinds.CLAIM.kind, add_update, after_claim_change),
            *on(kinds.VOLUME.kind, add_update, after_volume_change),
        ]


def after_claim_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    if isinstance(new, PersistentVolumeClaim) and new.namespace == pod.namespace:
        claimed = {v.claim_name for v in pod.volumes if v.source == "persistentVolumeClaim"}
        if new.name in claimed:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def after_storage_class_added(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    if isinstance(new, StorageClass) and new.binding_mode == "WaitForFirstConsumer":
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def after_volume_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    if not isinstance(old, PersistentVolume) or not isinstance(new, PersistentVolume):
        return QueueingHint.QUEUE
    changed = policy.volume_topologies(old) != policy.volume_topologies(new)
    return QueueingHint.QUEUE if changed else QueueingHint.SKIP


def new(args: None, handle: Handle) -> VolumeZone:
    return VolumeZone(handle)


def declared_capabilities(
    plugin: VolumeZone,
) -> tuple[
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    EnqueueExtensions,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin
