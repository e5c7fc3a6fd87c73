"""What VolumeBinding decides, as pure functions over lean claim and volume records.

pykoord does not bind or provision volumes. A pod is schedulable only when every claim it mounts exists,
is not being deleted, and is already bound to a PersistentVolume the scheduler knows; then the volume's
``spec.nodeAffinity`` restricts the nodes. Every other case is UnschedulableAndUnresolvable with
kube-scheduler's reason text (``volumebinding/volume_binding.go`` and ``binder.go``):

- ``persistentvolumeclaim "<name>" not found``;
- ``persistentvolumeclaim "<name>" is being deleted``;
- ``pod has unbound immediate PersistentVolumeClaims``: upstream says this for claims of an ``Immediate``
  StorageClass; pykoord says it for every unbound claim, since it can neither wait for the PV controller's
  answer to a ``WaitForFirstConsumer`` claim nor provision one (a documented limitation);
- ``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``;
- Filter: ``node(s) had volume node affinity conflict``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.core.selectors import node_selector_matches
from apis.core.types import NodeSelectorTerm

ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ERR_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_NODE_CONFLICT = "node(s) had volume node affinity conflict"


def err_claim_not_found(name: str) -> str:
    return f'persistentvolumeclaim "{name}" not found'


def err_claim_deleting(name: str) -> str:
    return f'persistentvolumeclaim "{name}" is being deleted'


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    namespace: str
    name: str
    volume_name: str
    """``spec.volumeName``: empty while unbound."""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class VolumeRecord:
    name: str
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    """``spec.nodeAffinity.required.nodeSelectorTerms``; None when the volume is usable from any node."""


def claims_verdict(
    namespace: str,
    claim_names: Sequence[str],
    claims: Mapping[str, ClaimRecord],
    volumes: Mapping[str, VolumeRecord],
) -> tuple[str, tuple[VolumeRecord, ...]]:
    """(rejection reason or "", the bound volumes). ``claims`` is keyed ``namespace/name``. The first
    missing or deleting claim decides, as upstream's ``podHasPVCs`` returns on the first error."""
    bound: list[VolumeRecord] = []
    unbound = False
    missing_pv = False
    for name in claim_names:
        claim = claims.get(f"{namespace}/{name}")
        if claim is None:
            return err_claim_not_found(name), ()
        if claim.deleting:
            return err_claim_deleting(name), ()
        if not claim.volume_name:
            unbound = True
            continue
        volume = volumes.get(claim.volume_name)
        if volume is None:
            missing_pv = True
            continue
        bound.append(volume)
    if unbound:
        return ERR_UNBOUND_IMMEDIATE, ()
    if missing_pv:
        return ERR_PV_NOT_EXIST, ()
    return "", tuple(bound)


def volumes_fit_node(volumes: Sequence[VolumeRecord], node_labels: Mapping[str, str], node_name: str) -> bool:
    """Every bound volume's required node affinity admits the node."""
    return all(
        v.node_affinity is None or node_selector_matches(v.node_affinity, node_labels, node_name) for v in volumes
    )
