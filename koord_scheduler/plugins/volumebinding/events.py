"""VolumeBinding's EnqueueExtensions and queueing hints (kube-scheduler ``volume_binding.go``
``EventsToRegister`` with queueing hints on)."""

from __future__ import annotations

from apis.core.storage import CSIDriver, CSINode, CSIStorageCapacity, PersistentVolumeClaim, StorageClass
from apis.core.types import Pod
from koord_scheduler.framework.types import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from koord_scheduler.plugins.storageinfo import kinds
from koord_scheduler.plugins.storageinfo.events import on

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP


def after_claim_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """A claim of the pod was created or changed."""
    if not isinstance(new, PersistentVolumeClaim) or new.namespace != pod.namespace:
        return SKIP
    return QUEUE if new.name in pod.pvc_names else SKIP


def after_storage_class_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """A new class, or a class whose ``allowedTopologies`` changed."""
    if not isinstance(old, StorageClass) or not isinstance(new, StorageClass):
        return QUEUE
    return QUEUE if old.allowed_topologies != new.allowed_topologies else SKIP


def after_csi_node_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """A new CSINode, or one whose migrated-plugins annotation changed."""
    if not isinstance(old, CSINode) or not isinstance(new, CSINode):
        return QUEUE
    return QUEUE if old.migrated_plugins != new.migrated_plugins else SKIP


def after_csi_driver_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """A driver that stopped asking for capacity checks."""
    if isinstance(old, CSIDriver) and isinstance(new, CSIDriver) and old.storage_capacity and not new.storage_capacity:
        return QUEUE
    return SKIP


def after_capacity_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """A new CSIStorageCapacity, or one whose volume limit grew."""
    if not isinstance(old, CSIStorageCapacity) or not isinstance(new, CSIStorageCapacity):
        return QUEUE
    new_limit, old_limit = new.volume_limit, old.volume_limit
    return QUEUE if new_limit is not None and (old_limit is None or new_limit > old_limit) else SKIP


def volume_binding_events() -> list[ClusterEventWithHint]:
    add_update = ActionType.ADD | ActionType.UPDATE
    return [
        *on(kinds.STORAGE_CLASS.kind, add_update, after_storage_class_change),
        *on(kinds.CLAIM.kind, add_update, after_claim_change),
        *on(kinds.VOLUME.kind, add_update),
        ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
        *on(kinds.CSI_NODE.kind, add_update, after_csi_node_change),
        *on(kinds.CSI_DRIVER.kind, ActionType.UPDATE, after_csi_driver_change),
        *on(kinds.STORAGE_CAPACITY.kind, add_update, after_capacity_change),
    ]
