"""VolumeZone's rules (kube-scheduler ``volumezone/volume_zone.go``), as pure functions.

A bound volume labelled with a zone or region (GA or beta label) restricts the pod to nodes whose label
of that key (or its GA form) holds one of the label's values; values are ``__``-separated lists
(``LabelZonesToSet``), and a value with an empty element is ignored. Nodes without any zone or region
label are not restricted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.core.storage import WAIT_FOR_FIRST_CONSUMER, PersistentVolume, PersistentVolumeClaim, StorageClass
from apis.core.types import Pod

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_REGION: REGION, BETA_ZONE: ZONE}

ERR_REASON_CONFLICT = "node(s) had no available volume zone"


@dataclass(frozen=True, slots=True)
class VolumeTopology:
    volume: str
    key: str
    values: frozenset[str]


def zones_of(value: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: the ``__``-separated values, trimmed; None when one is empty."""
    parts = [p.strip() for p in value.split("__")]
    if any(not p for p in parts):
        return None
    return frozenset(parts)


def volume_topologies(volume: PersistentVolume) -> tuple[VolumeTopology, ...]:
    """``getPVTopologies``."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = volume.meta.labels.get(key)
        if value is None:
            continue
        values = zones_of(value)
        if values is not None:
            out.append(VolumeTopology(volume.name, key, values))
    return tuple(out)


def pod_topologies(
    pod: Pod,
    claims: Mapping[str, PersistentVolumeClaim],
    volumes: Mapping[str, PersistentVolume],
    classes: Mapping[str, StorageClass],
) -> tuple[tuple[VolumeTopology, ...], str]:
    """``getPVbyPod``: (the topologies of the pod's bound volumes, the rejection message or "").
    Only ``persistentVolumeClaim`` volumes count; unbound ``WaitForFirstConsumer`` claims are skipped."""
    out: list[VolumeTopology] = []
    for pod_volume in pod.volumes:
        if pod_volume.source != "persistentVolumeClaim":
            continue
        claim = claims.get(f"{pod.namespace}/{pod_volume.claim_name}")
        if claim is None:
            return (), f'persistentvolumeclaim "{pod_volume.claim_name}" not found'
        if not claim.volume_name:
            if not claim.class_name:
                return (), "PersistentVolumeClaim had no pv name and storageClass name"
            storage_class = classes.get(claim.class_name)
            if storage_class is None:
                return (), f'storageclass.storage.k8s.io "{claim.class_name}" not found'
            if storage_class.binding_mode is None:
                return (), f'VolumeBindingMode not set for StorageClass "{claim.class_name}"'
            if storage_class.binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return (), "PersistentVolume had no name"
        volume = volumes.get(claim.volume_name)
        if volume is None:
            return (), f'persistentvolume "{claim.volume_name}" not found'
        out.extend(volume_topologies(volume))
    return tuple(out), ""


def node_fits(topologies: Sequence[VolumeTopology], node_labels: Mapping[str, str]) -> bool:
    """Filter: a node without zone or region labels fits; otherwise every topology must find the node's
    value (under its key, or the key's GA form) among its values."""
    if not any(key in node_labels for key in TOPOLOGY_LABELS):
        return True
    for topology in topologies:
        value = node_labels.get(topology.key)
        if value is None:
            value = node_labels.get(_GA.get(topology.key, topology.key))
        if value is None or value not in topology.values:
            return False
    return True
