"""Listers over the watched storage objects: maps kept current by watch events.

Each volume plugin keeps its own :class:`StorageListers`, subscribed to the kinds it reads; nothing is
shared between plugins, so each one's view changes only through its own handlers (events arrive on the
scheduler's loop, between scheduling cycles). ``not found`` messages are the API server's, which
kube-scheduler passes on as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from apis.core.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.types import EventType, ObjectHandler, ObjectKind
from koord_scheduler.plugins.storageinfo import kinds


def claim_not_found(name: str) -> str:
    return f'persistentvolumeclaim "{name}" not found'


def volume_not_found(name: str) -> str:
    return f'persistentvolume "{name}" not found'


def class_not_found(name: str) -> str:
    return f'storageclass.storage.k8s.io "{name}" not found'


class StorageListers:
    """Claims by ``namespace/name``; volumes by name (and by class); classes, CSINodes and CSIDrivers by
    name; CSIStorageCapacities by ``namespace/name``. ``on_change`` callbacks get the wake-up keys
    (:func:`claim_key`, :func:`volume_key`) of every claim or volume event (VolumeBinding's PreBind waits
    on them)."""

    def __init__(self) -> None:
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.volumes: dict[str, PersistentVolume] = {}
        self.volumes_by_class: dict[str, dict[str, PersistentVolume]] = {}
        self.classes: dict[str, StorageClass] = {}
        self.csi_nodes: dict[str, CSINode] = {}
        self.csi_drivers: dict[str, CSIDriver] = {}
        self.capacities: dict[str, CSIStorageCapacity] = {}
        self.on_change: list[Callable[[frozenset[str]], None]] = []

    def subscribe(self, handle: Handle, wanted: Iterable[ObjectKind[Any]] = kinds.ALL) -> StorageListers:
        handlers: dict[str, ObjectHandler] = {
            kinds.CLAIM.kind: self.on_claim,
            kinds.VOLUME.kind: self.on_volume,
            kinds.STORAGE_CLASS.kind: self.on_storage_class,
            kinds.CSI_NODE.kind: self.on_csi_node,
            kinds.CSI_DRIVER.kind: self.on_csi_driver,
            kinds.STORAGE_CAPACITY.kind: self.on_capacity,
        }
        for kind in wanted:
            handle.watch(kind, handlers[kind.kind])
        return self

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.claims.get(f"{namespace}/{name}")

    # ----- handlers -----

    def on_claim(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, PersistentVolumeClaim):
                self.claims.pop(old.key, None)
        elif isinstance(new, PersistentVolumeClaim):
            self.claims[new.key] = new
        self._changed(_claim_keys(old, new))

    def on_volume(self, event: EventType, old: Any, new: Any) -> None:
        if isinstance(old, PersistentVolume):
            self.volumes.pop(old.name, None)
            by_class = self.volumes_by_class.get(old.class_name)
            if by_class is not None:
                by_class.pop(old.name, None)
        if event != EventType.DELETED and isinstance(new, PersistentVolume):
            self.volumes[new.name] = new
            self.volumes_by_class.setdefault(new.class_name, {})[new.name] = new
        self._changed(_volume_keys(old, new))

    def on_storage_class(self, event: EventType, old: Any, new: Any) -> None:
        _keep(self.classes, event, old, new)

    def on_csi_node(self, event: EventType, old: Any, new: Any) -> None:
        _keep(self.csi_nodes, event, old, new)

    def on_csi_driver(self, event: EventType, old: Any, new: Any) -> None:
        _keep(self.csi_drivers, event, old, new)

    def on_capacity(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, CSIStorageCapacity):
                self.capacities.pop(f"{old.namespace}/{old.name}", None)
        elif isinstance(new, CSIStorageCapacity):
            self.capacities[f"{new.namespace}/{new.name}"] = new

    def _changed(self, keys: frozenset[str]) -> None:
        for callback in self.on_change:
            callback(keys)


def claim_key(key: str) -> str:
    """The wake-up key of a claim (``namespace/name``)."""
    return f"pvc:{key}"


def volume_key(name: str) -> str:
    """The wake-up key of a volume."""
    return f"pv:{name}"


def _claim_keys(old: Any, new: Any) -> frozenset[str]:
    """What a claim event may change for a pod in PreBind: the claim and the volume it names."""
    keys: set[str] = set()
    for claim in (old, new):
        if isinstance(claim, PersistentVolumeClaim):
            keys.add(claim_key(claim.key))
            if claim.volume_name:
                keys.add(volume_key(claim.volume_name))
    return frozenset(keys)


def _volume_keys(old: Any, new: Any) -> frozenset[str]:
    """What a volume event may change: the volume and the claim it is bound (or being bound) to."""
    keys: set[str] = set()
    for volume in (old, new):
        if isinstance(volume, PersistentVolume):
            keys.add(volume_key(volume.name))
            if volume.claim_ref is not None:
                keys.add(claim_key(f"{volume.claim_ref.namespace}/{volume.claim_ref.name}"))
    return frozenset(keys)


def _keep(store: dict[str, Any], event: EventType, old: Any, new: Any) -> None:
    if event == EventType.DELETED:
        if old is not None:
            store.pop(old.name, None)
    elif new is not None:
        store[new.name] = new
