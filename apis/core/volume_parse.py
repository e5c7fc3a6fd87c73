"""A pod's ``spec.volumes`` -> the :class:`~apis.core.types.PodVolume` records the volume plugins read.

Only claims (``persistentVolumeClaim``, generic ``ephemeral``) and the inline disk types that can
conflict on a node (VolumeRestrictions) or count against a CSI attach limit once migrated to CSI
(NodeVolumeLimits) are kept; every other volume type is skipped. Errors are
:class:`~apis.core.errors.ParseError` with the path below ``volumes[i]``.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.core.errors import ParseError
from apis.core.jsonfields import Json, JsonList, as_map, check_item, get_bool, get_required_str, get_str, get_str_list
from apis.core.types import PodVolume

PVC = "persistentVolumeClaim"
EPHEMERAL = "ephemeral"
GCE_PD = "gcePersistentDisk"
AWS_EBS = "awsElasticBlockStore"
AZURE_DISK = "azureDisk"
CINDER = "cinder"
PORTWORX = "portworxVolume"
RBD = "rbd"
ISCSI = "iscsi"

_DISK_FIELD = {
    GCE_PD: "pdName",
    AWS_EBS: "volumeID",
    AZURE_DISK: "diskURI",
    CINDER: "volumeID",
    PORTWORX: "volumeID",
    ISCSI: "iqn",
}
"""The field that names the disk, for the inline types identified by one field."""

KEPT_SOURCES = frozenset({PVC, EPHEMERAL, RBD, *_DISK_FIELD})
"""The volume types :func:`parse_pod_volumes` keeps; a volume of any other type is left out."""


def parse_pod_volumes(volumes: JsonList, pod_name: str) -> tuple[PodVolume, ...]:
    """The kept volumes of ``spec.volumes``, in order. ``pod_name`` names generic ephemeral claims
    (``<pod>-<volume>``, as the ephemeral volume controller does)."""
    out: list[PodVolume] = []
    for i, item in enumerate(volumes):
        volume = check_item(item, "volumes", i)
        try:
            parsed = _volume(volume, pod_name)
        except ParseError as err:
            raise err.under(f"volumes[{i}]") from None
        if parsed is not None:
            out.append(parsed)
    return tuple(out)


LOCAL_STORAGE_SOURCES = frozenset({"emptyDir", "hostPath"})
"""The volume types that are local storage (:func:`has_local_storage`)."""


def has_local_storage(volumes: JsonList) -> bool:
    """Whether ``spec.volumes`` has an ``emptyDir`` or ``hostPath`` volume (sigs.k8s.io/descheduler
    ``IsPodWithLocalStorage``)."""
    return any(
        isinstance(v, Mapping) and any(v.get(source) is not None for source in LOCAL_STORAGE_SOURCES) for v in volumes
    )


def claim_names(volumes: tuple[PodVolume, ...]) -> tuple[str, ...]:
    """The claims the pod mounts (``Pod.pvc_names``), ephemeral ones included."""
    return tuple(v.claim_name for v in volumes if v.claim_name)


def _volume(volume: Json, pod_name: str) -> PodVolume | None:
    claim = volume.get(PVC)
    if claim is not None:
        fields = as_map(claim, PVC)
        try:
            claim_name = get_required_str(fields, "claimName")
            read_only = get_bool(fields, "readOnly")
        except ParseError as err:
            raise err.under(PVC) from None
        return PodVolume(get_str(volume, "name"), PVC, claim_name=claim_name, read_only=read_only)
    if volume.get(EPHEMERAL) is not None:
        name = get_required_str(volume, "name")
        return PodVolume(name, EPHEMERAL, claim_name=f"{pod_name}-{name}")
    for source, field in _DISK_FIELD.items():
        raw = volume.get(source)
        if raw is not None:
            fields = as_map(raw, source)
            try:
                return PodVolume(
                    get_str(volume, "name"),
                    source,
                    disk=get_str(fields, field),
                    read_only=get_bool(fields, "readOnly"),
                )
            except ParseError as err:
                raise err.under(source) from None
    raw = volume.get(RBD)
    if raw is not None:
        fields = as_map(raw, RBD)
        try:
            pool = get_str(fields, "pool") or "rbd"
            return PodVolume(
                get_str(volume, "name"),
                RBD,
                disk=f"{pool}/{get_str(fields, 'image')}",
                read_only=get_bool(fields, "readOnly"),
                monitors=get_str_list(fields, "monitors"),
            )
        except ParseError as err:
            raise err.under(RBD) from None
    return None
