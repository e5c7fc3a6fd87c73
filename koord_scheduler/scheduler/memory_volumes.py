"""The volume controllers of the in-memory cluster (``koord-scheduler simulate``).

A real cluster has the PersistentVolume controller bind a claim to the volume the scheduler chose (the
volume's ``claimRef``) and a provisioner create a volume for a claim annotated
``volume.kubernetes.io/selected-node``. The simulator does both at once, after every write to a
PersistentVolume or PersistentVolumeClaim, so VolumeBinding's PreBind sees its claims bound:

- a volume whose ``claimRef`` names an unbound claim binds it (``spec.volumeName``, the
  ``pv.kubernetes.io/bind-completed`` annotation, both phases ``Bound``);
- an unbound claim with a selected node whose class has a provisioner gets a volume ``pvc-<claim uid or
  namespace-name>`` of the requested size, class and access modes, pinned to that node by
  ``kubernetes.io/hostname``, annotated ``pv.kubernetes.io/provisioned-by``, and is bound to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
HOSTNAME_LABEL = "kubernetes.io/hostname"
NO_PROVISIONER = "kubernetes.io/no-provisioner"

Raw = dict[str, Any]
Changes = list[tuple[str, str, Raw | None, Raw]]
"""(kind, key, old raw object or None when created, new raw object)."""


def reconcile(objects: Mapping[str, dict[str, Mapping[str, Any]]], node_names: set[str]) -> Changes:
    """One pass of both controllers over ``objects`` (kind -> key -> raw); returns the writes to apply,
    in order. Pure: nothing in ``objects`` is modified."""
    claims = objects.get("PersistentVolumeClaim", {})
    volumes = dict(objects.get("PersistentVolume", {}))
    classes = objects.get("StorageClass", {})
    changes: Changes = []
    for key, claim in claims.items():
        spec = claim.get("spec") or {}
        if spec.get("volumeName"):
            continue
        meta = claim.get("metadata") or {}
        volume = _volume_claiming(volumes, meta)
        if volume is None:
            volume = _provision(claim, classes, node_names)
            if volume is None:
                continue
            volumes[volume["metadata"]["name"]] = volume
            changes.append(("PersistentVolume", volume["metadata"]["name"], None, volume))
        bound_volume = _with(volume, status={"phase": "Bound"})
        changes.append(("PersistentVolume", volume["metadata"]["name"], dict(volume), bound_volume))
        annotations = {**(meta.get("annotations") or {}), ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}
        bound_claim = _with(
            claim,
            metadata={**meta, "annotations": annotations},
            spec={**spec, "volumeName": volume["metadata"]["name"]},
            status={"phase": "Bound", "accessModes": spec.get("accessModes") or []},
        )
        changes.append(("PersistentVolumeClaim", key, dict(claim), bound_claim))
    return changes


def _volume_claiming(volumes: Mapping[str, Mapping[str, Any]], claim_meta: Mapping[str, Any]) -> Raw | None:
    for volume in volumes.values():
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if ref.get("name") == claim_meta.get("name") and ref.get("namespace", "default") == claim_meta.get(
            "namespace", "default"
        ):
            if (volume.get("status") or {}).get("phase") == "Bound":
                continue
            return dict(volume)
    return None


def _provision(claim: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]], node_names: set[str]) -> Raw | None:
    meta = claim.get("metadata") or {}
    node = (meta.get("annotations") or {}).get(ANN_SELECTED_NODE)
    if not node or node not in node_names:
        return None
    spec = claim.get("spec") or {}
    class_name = spec.get("storageClassName") or ""
    storage_class = classes.get(class_name) or {}
    provisioner = storage_class.get("provisioner") or ""
    if not provisioner or provisioner == NO_PROVISIONER:
        return None
    namespace = meta.get("namespace", "default")
    name = "pvc-" + (meta.get("uid") or f"{namespace}-{meta.get('name')}")
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")
    term = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: provisioner}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.get("accessModes") or [],
            "storageClassName": class_name,
            "persistentVolumeReclaimPolicy": "Delete",
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": namespace,
                "name": meta.get("name"),
                "uid": meta.get("uid", ""),
            },
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
        "status": {"phase": "Available"},
    }


def _with(raw: Mapping[str, Any], **fields: Any) -> Raw:
    return {**raw, **fields}
