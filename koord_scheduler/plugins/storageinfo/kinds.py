"""The storage kinds the volume plugins have delivered (one definition each: the scheduler refuses two
different definitions of one kind).

The kind names are the ones the scheduling queue knows as event resources where it has them
(``PersistentVolumeClaim``), so their events requeue pods the plugins rejected.
"""

from __future__ import annotations

from apis.core.storage import (
    parse_claim,
    parse_csi_driver,
    parse_csi_node,
    parse_storage_capacity,
    parse_storage_class,
    parse_volume,
)
from koord_scheduler.framework.types import ObjectKind

CLAIM = ObjectKind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True, parse_claim)
VOLUME = ObjectKind("PersistentVolume", "", "v1", "persistentvolumes", False, parse_volume)
STORAGE_CLASS = ObjectKind("StorageClass", "storage.k8s.io", "v1", "storageclasses", False, parse_storage_class)
CSI_NODE = ObjectKind("CSINode", "storage.k8s.io", "v1", "csinodes", False, parse_csi_node)
CSI_DRIVER = ObjectKind("CSIDriver", "storage.k8s.io", "v1", "csidrivers", False, parse_csi_driver)
STORAGE_CAPACITY = ObjectKind(
    "CSIStorageCapacity", "storage.k8s.io", "v1", "csistoragecapacities", True, parse_storage_capacity
)

ALL = (CLAIM, VOLUME, STORAGE_CLASS, CSI_NODE, CSI_DRIVER, STORAGE_CAPACITY)
