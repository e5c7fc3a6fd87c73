"""VolumeRestrictions' rules (kube-scheduler ``volumerestrictions/volume_restrictions.go``).

Two pods conflict on a node when both mount the same GCE persistent disk (unless both read-only), the
same AWS EBS volume, the same iSCSI IQN (unless both read-only), or the same RBD image of the same pool
with a Ceph monitor in common (unless both read-only). A claim with the ``ReadWriteOncePod`` access mode
that some scheduled pod already uses makes the pod unschedulable everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from apis.core.types import Pod, PodVolume
from apis.core.volume_parse import AWS_EBS, GCE_PD, ISCSI, RBD

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
RESTRICTED_SOURCES = frozenset({GCE_PD, AWS_EBS, RBD, ISCSI})


def needs_restrictions_check(pod: Pod) -> bool:
    return any(v.source in RESTRICTED_SOURCES for v in pod.volumes)


def volumes_conflict(volume: PodVolume, existing: PodVolume) -> bool:
    """``isVolumeConflict`` for one pair of volumes."""
    if volume.source != existing.source or volume.disk != existing.disk:
        return False
    both_read_only = volume.read_only and existing.read_only
    if volume.source == AWS_EBS:
        return True
    if volume.source in (GCE_PD, ISCSI):
        return not both_read_only
    if volume.source == RBD:
        return bool(set(volume.monitors) & set(existing.monitors)) and not both_read_only
    return False


def pod_conflicts(pod: Pod, pods_on_node: Iterable[Pod]) -> bool:
    """``satisfyVolumeConflicts`` negated: some restricted volume of ``pod`` conflicts with a pod there."""
    restricted = [v for v in pod.volumes if v.source in RESTRICTED_SOURCES]
    if not restricted:
        return False
    for other in pods_on_node:
        for existing in other.volumes:
            if existing.source in RESTRICTED_SOURCES and any(volumes_conflict(v, existing) for v in restricted):
                return True
    return False


def claim_refs(pod: Pod, claims: frozenset[str]) -> int:
    """How many of ``pod``'s ``persistentVolumeClaim`` volumes name one of ``claims`` (same namespace)."""
    return sum(
        1 for v in pod.volumes if v.source == "persistentVolumeClaim" and f"{pod.namespace}/{v.claim_name}" in claims
    )
