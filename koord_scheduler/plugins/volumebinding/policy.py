"""What VolumeBinding decides, as pure functions over claim, volume and class records.

Facts and messages from kube-scheduler ``volumebinding/volume_binding.go`` and ``binder.go`` and
component-helpers ``storage/volume``:

- PreFilter (:func:`claims_problem`, :func:`classify_claims`): a missing, lost or deleting claim, or an
  ephemeral claim the pod does not own, rejects the pod with the claim's own message; a claim that is
  not fully bound and whose class is not ``WaitForFirstConsumer`` (or that names a volume already) is an
  *unbound immediate* claim: ``pod has unbound immediate PersistentVolumeClaims``. Unbound
  ``WaitForFirstConsumer`` claims are left to Filter.
- Filter (:func:`find_pod_volumes`): bound claims' volumes must admit the node; every unbound claim
  needs an available static volume (:func:`find_matching_volume`) or dynamic provisioning allowed on
  the node (:func:`provisioning_problem`). The reasons, in upstream's order, are
  :data:`ERR_NODE_CONFLICT`, :data:`ERR_BIND_CONFLICT`, :data:`ERR_NOT_ENOUGH_SPACE`,
  :data:`ERR_PV_NOT_EXIST`.

Node affinity of volumes is checked the way ``CheckNodeAffinity`` does, against the node's labels
only (a ``matchFields`` term never matches). In-tree volumes are not translated to CSI topology keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from apis.core.selectors import label_selector_matches, node_selector_matches
from apis.core.storage import (
    NOT_SUPPORTED_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    CSIDriver,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologyRequirement,
)
from apis.core.types import Pod

ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ERR_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


class VolumeBindingError(Exception):
    """A failure kube-scheduler returns as an error status (``AsStatus``), not as a rejection."""


def claims_problem(pod: Pod, claims: Mapping[str, PersistentVolumeClaim]) -> str:
    """``podHasPVCs``: the message of the first claim the pod cannot use, or "" (claims by ``ns/name``)."""
    for volume in pod.volumes:
        if not volume.claim_name:
            continue
        ephemeral = volume.source == "ephemeral"
        claim = claims.get(f"{pod.namespace}/{volume.claim_name}")
        if claim is None:
            if ephemeral:
                return (
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{volume.claim_name}"'
                )
            return f'persistentvolumeclaim "{volume.claim_name}" not found'
        if claim.phase == "Lost":
            return f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume "{claim.volume_name}"'
        if claim.meta.deletion_timestamp is not None:
            return f'persistentvolumeclaim "{claim.name}" is being deleted'
        if ephemeral and not owned_by(claim, pod):
            return (
                f"PVC {claim.namespace}/{claim.name} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)"
            )
    return ""


def owned_by(claim: PersistentVolumeClaim, pod: Pod) -> bool:
    """``metav1.IsControlledBy``: the claim's controller owner reference is the pod."""
    return any(ref.controller and ref.uid == pod.uid for ref in claim.meta.owner_references)


@dataclass(frozen=True, slots=True)
class PodVolumeClaims:
    """``GetPodVolumeClaims``: the pod's claims split by binding state, and the volumes of each class an
    unbound ``WaitForFirstConsumer`` claim may take."""

    bound: tuple[PersistentVolumeClaim, ...] = ()
    unbound_delayed: tuple[PersistentVolumeClaim, ...] = ()
    unbound_immediate: tuple[PersistentVolumeClaim, ...] = ()
    volumes_by_class: Mapping[str, tuple[PersistentVolume, ...]] = field(default_factory=dict)


def delay_binding(claim: PersistentVolumeClaim, classes: Mapping[str, StorageClass]) -> bool:
    """``IsDelayBindingMode``: the claim's class exists and is ``WaitForFirstConsumer``."""
    if not claim.class_name:
        return False
    storage_class = classes.get(claim.class_name)
    if storage_class is None:
        return False
    if storage_class.binding_mode is None:
        raise VolumeBindingError(f'VolumeBindingMode not set for StorageClass "{claim.class_name}"')
    return storage_class.binding_mode == WAIT_FOR_FIRST_CONSUMER


def classify_claims(
    claims: Sequence[PersistentVolumeClaim],
    classes: Mapping[str, StorageClass],
    volumes_of_class: Mapping[str, Sequence[PersistentVolume]],
) -> PodVolumeClaims:
    """Split ``claims`` (as the assume cache shows them) into bound, unbound delayed and unbound immediate
    (prebound claims, with a volume name but not fully bound, count as immediate)."""
    bound: list[PersistentVolumeClaim] = []
    delayed: list[PersistentVolumeClaim] = []
    immediate: list[PersistentVolumeClaim] = []
    for claim in claims:
        if claim.fully_bound:
            bound.append(claim)
        elif delay_binding(claim, classes) and not claim.volume_name:
            delayed.append(claim)
        else:
            immediate.append(claim)
    by_class = {
        name: candidate_volumes(volumes_of_class.get(name, ()), [c for c in delayed if c.class_name == name])
        for name in {c.class_name for c in delayed}
    }
    return PodVolumeClaims(tuple(bound), tuple(delayed), tuple(immediate), by_class)


def candidate_volumes(
    volumes: Iterable[PersistentVolume], claims: Sequence[PersistentVolumeClaim]
) -> tuple[PersistentVolume, ...]:
    """The volumes :func:`find_matching_volume` could return for one of ``claims`` on some node, found
    once per pod instead of once per node: not being deleted, and Available without a claim or pre-bound
    to one of the claims. Volumes bound to other claims (the many a provisioner creates) drop out here."""
    return tuple(
        v
        for v in volumes
        if v.meta.deletion_timestamp is None
        and (
            (v.claim_ref is None and v.phase == "Available")
            or (v.claim_ref is not None and any(bound_to(v, c) for c in claims))
        )
    )


def volume_admits(volume: PersistentVolume, node_labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: the volume's required node affinity (if any) admits a node with these labels."""
    return volume.node_affinity is None or node_selector_matches(volume.node_affinity, node_labels, "")


def bound_to(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """``IsVolumeBoundToClaim``."""
    ref = volume.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
        return False
    return not ref.uid or ref.uid == claim.meta.uid


def find_matching_volume(
    claim: PersistentVolumeClaim,
    volumes: Sequence[PersistentVolume],
    node_labels: Mapping[str, str],
    excluded: frozenset[str] | set[str],
) -> PersistentVolume | None:
    """``FindMatchingVolume`` with a node and delayed binding: the volume pre-bound to the claim if it
    admits the node (else None); otherwise the smallest Available volume of the claim's class, size,
    volume mode, attributes class, selector, access modes and node affinity. ``excluded``: names taken
    by the pod's other claims."""
    requested = claim.request_bytes or 0
    smallest: PersistentVolume | None = None
    for volume in volumes:
        if volume.name in excluded:
            continue
        if volume.claim_ref is not None and not bound_to(volume, claim):
            continue
        if volume.capacity_bytes < requested or volume.volume_mode != claim.volume_mode:
            continue
        if volume.volume_attributes_class != claim.volume_attributes_class:
            continue
        if volume.meta.deletion_timestamp is not None:
            continue
        admits = volume_admits(volume, node_labels)
        if bound_to(volume, claim):
            return volume if admits else None
        if volume.phase != "Available":
            continue
        if claim.selector is not None and not label_selector_matches(claim.selector, volume.meta.labels):
            continue
        if volume.class_name != claim.class_name or not admits:
            continue
        if not set(claim.access_modes) <= set(volume.access_modes):
            continue
        if smallest is None or volume.capacity_bytes < smallest.capacity_bytes:
            smallest = volume
    return smallest


def topology_allows(terms: Sequence[Sequence[TopologyRequirement]], node_labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms``: no terms allow every node; else any term whose every requirement
    finds the node's label value among its values."""
    if not terms:
        return True
    return any(all(node_labels.get(r.key) in r.values for r in term) for term in terms)


@dataclass(frozen=True, slots=True)
class StaticBinding:
    claim: PersistentVolumeClaim
    volume: PersistentVolume


@dataclass(frozen=True, slots=True)
class DynamicProvision:
    claim: PersistentVolumeClaim
    capacity: CSIStorageCapacity | None = None
    """The CSIStorageCapacity that showed enough room on the node, when the driver asked for checks."""


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """``PodVolumes``: what Reserve assumes and PreBind writes for one node."""

    static_bindings: tuple[StaticBinding, ...] = ()
    provisions: tuple[DynamicProvision, ...] = ()


@dataclass(frozen=True, slots=True)
class StorageView:
    """The listers :func:`find_pod_volumes` reads (volumes through the assume cache)."""

    volumes: Mapping[str, PersistentVolume]
    classes: Mapping[str, StorageClass]
    drivers: Mapping[str, CSIDriver]
    capacities: Sequence[CSIStorageCapacity]


def find_pod_volumes(
    claims: PodVolumeClaims, node_name: str, node_labels: Mapping[str, str], view: StorageView
) -> tuple[PodVolumes, tuple[str, ...]]:
    """``FindPodVolumes`` for one node: (what to bind or provision there, the rejection reasons).
    Raises :class:`VolumeBindingError` for a claim without a class or with an unknown class."""
    bound_ok, bound_found = True, True
    for claim in claims.bound:
        volume = view.volumes.get(claim.volume_name)
        if volume is None:
            bound_found = False
            break
        if not volume_admits(volume, node_labels):
            bound_ok = False
            break
    unbound_ok, enough_space = True, True
    bindings: list[StaticBinding] = []
    provisions: list[DynamicProvision] = []
    if claims.unbound_delayed:
        to_match: list[PersistentVolumeClaim] = []
        to_provision: list[PersistentVolumeClaim] = []
        for claim in claims.unbound_delayed:
            selected = claim.selected_node
            if selected is not None:
                if selected != node_name:
                    return PodVolumes(), _reasons(bound_ok, False, True, bound_found)
                to_provision.append(claim)
            else:
                to_match.append(claim)
        if to_match:
            chosen: set[str] = set()
            for claim in sorted(to_match, key=lambda c: c.request_bytes or 0):
                candidates = claims.volumes_by_class.get(claim.class_name, ())
                volume = find_matching_volume(claim, candidates, node_labels, chosen)
                if volume is None:
                    unbound_ok = False
                    to_provision.append(claim)
                    continue
                chosen.add(volume.name)
                bindings.append(StaticBinding(claim, volume))
        if to_provision:
            unbound_ok, enough_space, provisions = check_provisions(to_provision, node_labels, view)
    return PodVolumes(tuple(bindings), tuple(provisions)), _reasons(bound_ok, unbound_ok, enough_space, bound_found)


def _reasons(bound_ok: bool, unbound_ok: bool, enough_space: bool, bound_found: bool) -> tuple[str, ...]:
    out = []
    if not bound_ok:
        out.append(ERR_NODE_CONFLICT)
    if not unbound_ok:
        out.append(ERR_BIND_CONFLICT)
    if not enough_space:
        out.append(ERR_NOT_ENOUGH_SPACE)
    if not bound_found:
        out.append(ERR_PV_NOT_EXIST)
    return tuple(out)


def check_provisions(
    claims: Sequence[PersistentVolumeClaim], node_labels: Mapping[str, str], view: StorageView
) -> tuple[bool, bool, list[DynamicProvision]]:
    """``checkVolumeProvisions``: (every claim can be provisioned, storage is sufficient, provisions)."""
    provisions: list[DynamicProvision] = []
    for claim in claims:
        if not claim.class_name:
            raise VolumeBindingError(f'no class for claim "{claim.key}"')
        storage_class = view.classes.get(claim.class_name)
        if storage_class is None:
            raise VolumeBindingError(f'failed to find storage class "{claim.class_name}"')
        provisioner = storage_class.provisioner
        if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            return False, True, []
        if not topology_allows(storage_class.allowed_topologies, node_labels):
            return False, True, []
        sufficient, capacity = enough_capacity(claim, storage_class, node_labels, view)
        if not sufficient:
            return True, False, []
        provisions.append(DynamicProvision(claim, capacity))
    return True, True, provisions


def enough_capacity(
    claim: PersistentVolumeClaim, storage_class: StorageClass, node_labels: Mapping[str, str], view: StorageView
) -> tuple[bool, CSIStorageCapacity | None]:
    """``hasEnoughCapacity``: checked only for a CSI driver with ``storageCapacity: true``; then some
    CSIStorageCapacity of the class, reachable from the node, must hold the requested size."""
    if claim.request_bytes is None:
        return True, None
    driver = view.drivers.get(storage_class.provisioner)
    if driver is None or not driver.storage_capacity:
        return True, None
    for capacity in view.capacities:
        limit = capacity.volume_limit
        if (
            capacity.storage_class == storage_class.name
            and limit is not None
            and limit >= claim.request_bytes
            and capacity.node_topology is not None
            and label_selector_matches(capacity.node_topology, node_labels)
        ):
            return True, capacity
    return False, None
