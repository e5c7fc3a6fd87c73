"""NodeVolumeLimits' rules (kube-scheduler ``nodevolumelimits/csi.go``), as pure functions.

A pod's attachable volumes are named ``<driver>/<volume handle>``: a claim's bound CSI volume; a bound
in-tree volume or inline in-tree disk migrated to CSI (the CSI driver's name, the disk as handle); an
unbound claim, by its class's provisioner (a migrated in-tree provisioner by its CSI driver) and a
handle made of the claim's name. Volumes already attached for pods on the node are not counted twice.
A node fails when, for some driver with an ``allocatable.count`` in its CSINode, the volumes attached
plus the pod's new ones exceed it. VolumeAttachment objects are not read: a volume still attached after
its pod left is not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apis.core.storage import IN_TREE_SOURCES, CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from apis.core.types import Pod
from koord_scheduler.plugins.storageinfo import csi

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
UNBOUND_HANDLE_PREFIX = "pykoord"
"""Upstream prefixes unbound claims' handles with a random string per scheduler; any fixed one serves."""


class ClaimLookupError(Exception):
    """A claim of the pod being scheduled is missing (``not_found``) or not its own."""

    def __init__(self, message: str, *, not_found: bool) -> None:
        super().__init__(message)
        self.not_found = not_found


def has_attachable_volumes(pod: Pod) -> bool:
    """PreFilter: a claim, a generic ephemeral volume, or an inline in-tree disk that migrates to CSI."""
    return any(v.claim_name or v.source in IN_TREE_SOURCES for v in pod.volumes)


def attachable_volumes(
    pod: Pod,
    csi_node: CSINode | None,
    *,
    claims: Mapping[str, PersistentVolumeClaim],
    volumes: Mapping[str, PersistentVolume],
    classes: Mapping[str, StorageClass],
    new_pod: bool,
) -> dict[str, str]:
    """``filterAttachableVolumes``: unique volume name -> CSI driver. For the pod being scheduled
    (``new_pod``) a missing claim raises; for pods on the node it is skipped."""
    out: dict[str, str] = {}
    for volume in pod.volumes:
        if not volume.claim_name:
            plugin = IN_TREE_SOURCES.get(volume.source)
            if plugin is not None and csi.csi_migration_on(csi_node, plugin):
                driver = csi.CSI_DRIVER_OF[plugin]
                out[f"{driver}/{volume.disk}"] = driver
            continue
        claim = claims.get(f"{pod.namespace}/{volume.claim_name}")
        if claim is None:
            if new_pod:
                raise ClaimLookupError(
                    f"looking up PVC {pod.namespace}/{volume.claim_name}: persistentvolumeclaim "
                    f'"{volume.claim_name}" not found',
                    not_found=True,
                )
            continue
        if volume.source == "ephemeral" and not any(
            ref.controller and ref.uid == pod.uid for ref in claim.meta.owner_references
        ):
            raise ClaimLookupError(
                f"PVC {claim.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name} "
                "(pod is not owner)",
                not_found=False,
            )
        driver, handle = _claim_driver(claim, csi_node, volumes, classes)
        if driver and handle:
            out[f"{driver}/{handle}"] = driver
    return out


def _claim_driver(
    claim: PersistentVolumeClaim,
    csi_node: CSINode | None,
    volumes: Mapping[str, PersistentVolume],
    classes: Mapping[str, StorageClass],
) -> tuple[str, str]:
    """``getCSIDriverInfo``: (driver, handle) of the claim's volume, or of its class when unbound."""
    volume = volumes.get(claim.volume_name) if claim.volume_name else None
    if volume is None:
        return _class_driver(claim, csi_node, classes)
    if volume.csi_driver:
        return volume.csi_driver, volume.volume_handle
    plugin = IN_TREE_SOURCES.get(volume.in_tree_source)
    if plugin is None or not csi.csi_migration_on(csi_node, plugin):
        return "", ""
    return csi.CSI_DRIVER_OF[plugin], volume.volume_handle


def _class_driver(
    claim: PersistentVolumeClaim, csi_node: CSINode | None, classes: Mapping[str, StorageClass]
) -> tuple[str, str]:
    storage_class = classes.get(claim.class_name) if claim.class_name else None
    if storage_class is None:
        return "", ""
    handle = f"{UNBOUND_HANDLE_PREFIX}-{claim.namespace}/{claim.name}"
    provisioner = storage_class.provisioner
    if provisioner in csi.CSI_DRIVER_OF:
        if not csi.csi_migration_on(csi_node, provisioner):
            return "", ""
        return csi.CSI_DRIVER_OF[provisioner], handle
    return provisioner, handle


def exceeds_limits(new_volumes: Mapping[str, str], attached: Mapping[str, str], limits: Mapping[str, int]) -> bool:
    """Whether some driver's attached volumes plus the pod's volumes not attached yet exceed its limit."""
    attached_count: dict[str, int] = {}
    for driver in attached.values():
        attached_count[driver] = attached_count.get(driver, 0) + 1
    new_count: dict[str, int] = {}
    for name, driver in new_volumes.items():
        if name not in attached:
            new_count[driver] = new_count.get(driver, 0) + 1
    return any(
        driver in limits and attached_count.get(driver, 0) + count > limits[driver]
        for driver, count in new_count.items()
    )


def limited_drivers(new_volumes: Mapping[str, str], limits: Mapping[str, int] | None) -> bool:
    """Whether any of the pod's drivers has a limit on the node (else the node passes at once)."""
    return bool(limits) and any(driver in limits for driver in new_volumes.values())  # type: ignore[operator]


def union(maps: Iterable[Mapping[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in maps:
        out.update(m)
    return out
