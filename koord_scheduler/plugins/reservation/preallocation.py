"""Pre-allocation: a Reservation with ``spec.preAllocation: true`` adopts running pods (Koordinator
``pkg/scheduler/plugins/reservation``, ``filterWithPreAllocatablePod(s)``, ``listPreAllocatableCandidates``,
``PreBindReservation``).

Only a ``Restricted`` reservation may pre-allocate. While it is scheduled, running pods on a node may be
*adopted*: the reservation is placed as if they were gone (their requests count as the node's free
capacity for the reserve pod), and at PreBind they get the ``reservation-allocated`` annotation, so they
become the reservation's owners and their requests its allocated share. Candidates:

- **Default mode**: bound, not finished pods matching the reservation's owners;
- **Cluster mode** (``spec.preAllocationPolicy.mode: Cluster``, needs ``preAllocationConfig.enableClusterMode``):
  bound pods labelled ``<clusterLabelKey>: "true"``, highest ``<clusterPriorityAnnotationKey>`` first;

never a pod already allocated to a reservation, never a reserve pod; a candidate's own reservation
affinity and exact-match annotation must allow the reservation. A candidate fits when its requests fit in
the reservation (every reserved resource it requests) and the reservation fits the node with the
candidate's requests given back (:func:`choose`).

- Single mode (default): the first candidate that fits (Default mode: tightest fit in the reservation
  first, then pod key; Cluster mode: priority order). ``enableMultiple``: candidates in that order are
  added until the reservation fits.
- ``preferNoPreAllocatedPods``: a node where the reservation fits without adopting anything adopts nothing.
- A reservation labelled ``scheduling.koordinator.sh/pre-allocation-required: "true"`` must adopt: nodes
  without a fitting candidate fail (``node(s) no pod(s) to meet the pre-allocation requirements``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from apis.config.reservation_args import PreAllocationConfig
from apis.core.types import Pod
from apis.scheduling import (
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVE_POD,
    ReservationRecord,
)
from apis.scheduling.record import RESTRICTED
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import Status, success, unresolvable, unschedulable
from koord_scheduler.framework.types import NodeFilterResult, PreFilterResult
from koord_scheduler.plugins.reservation.accounting import ReservationAccounting
from koord_scheduler.plugins.reservation.cache import ReservationEntry
from koord_scheduler.plugins.reservation.matching import (
    affinity_allows,
    exact_match_ok,
    owner_term_matches,
    pod_intent,
)

LABEL_PRE_ALLOCATION_REQUIRED = "scheduling.koordinator.sh/pre-allocation-required"
MODE_DEFAULT = "Default"
MODE_CLUSTER = "Cluster"

ERR_REQUIRED_NO_CANDIDATE = "node(s) no pod match reservation with pre allocation required"
ERR_UNSUPPORTED = "node(s) reservation pre allocation is unsupported with current attributes"
ERR_NO_PODS_MEET = "node(s) no pod(s) to meet the pre-allocation requirements"
ERR_CLUSTER_MODE_DISABLED = "reservation requires cluster mode pre-allocation which is disabled"


@dataclass(slots=True)
class PreAllocationState:
    """A pre-allocating reserve pod's cycle: candidates per node (PreFilter), the pods it adopts per node
    position (BeforeFilter), and those adopted on the chosen node (Reserve)."""

    required: bool
    candidates: dict[str, list[Pod]] = field(default_factory=dict)
    chosen: dict[int, tuple[Pod, ...]] = field(default_factory=dict)
    adopted: tuple[Pod, ...] = ()
    """Set at Reserve: the pods adopted on the chosen node."""
    reservation_uid: str = ""


PRE_ALLOCATION_KEY: StateKey[PreAllocationState] = StateKey("Reservation/pre-allocation")


def is_required(record: ReservationRecord) -> bool:
    return record.labels.get(LABEL_PRE_ALLOCATION_REQUIRED) == "true"


def unsupported(record: ReservationRecord, config: PreAllocationConfig) -> str:
    """Why ``record`` cannot pre-allocate at all ("" when it can)."""
    if record.allocate_policy != RESTRICTED:
        return ERR_UNSUPPORTED
    if record.pre_allocation_mode == MODE_CLUSTER and not config.enable_cluster_mode:
        return ERR_CLUSTER_MODE_DISABLED
    return ""


def cluster_priority(pod: Pod, config: PreAllocationConfig) -> int:
    try:
        return int(pod.annotations.get(config.cluster_priority_annotation_key, "0"))
    except ValueError:
        return 0


def is_candidate(
    pod: Pod, record: ReservationRecord, config: PreAllocationConfig, node_labels: Mapping[str, str]
) -> bool:
    """Whether ``pod`` may be adopted by ``record`` (module docstring), resources aside."""
    if not pod.node_name or pod.is_terminal or pod.meta.deletion_timestamp is not None:
        return False
    if ANNOTATION_RESERVATION_ALLOCATED in pod.annotations or pod.annotations.get(ANNOTATION_RESERVE_POD) == "true":
        return False
    if record.pre_allocation_mode == MODE_CLUSTER:
        if pod.labels.get(config.cluster_label_key) != "true":
            return False
    elif not any(owner_term_matches(term, pod) for term in record.owners):
        return False
    intent = pod_intent(pod)
    if intent.error:
        return False
    if affinity_allows(intent.affinity, record, node_labels):
        return False
    return exact_match_ok(pod, record)


def candidates(
    record: ReservationRecord, reserved: Mapping[str, int], snapshot: ClusterSnapshot, config: PreAllocationConfig
) -> dict[str, list[Pod]]:
    """Per node name, the pods ``record`` (reserving ``reserved``) may adopt, in the order they are tried."""
    out: dict[str, list[Pod]] = {}
    for name, pos in snapshot.positions.items():
        info = snapshot.info(pos)
        labels = info.node.labels if info.node is not None else {}
        found = [p for p in info.pods.values() if is_candidate(p, record, config, labels)]
        if found:
            out[name] = order(found, reserved, record.pre_allocation_mode, config)
    return out


def tightness(requests: Mapping[str, int], reserved: Mapping[str, int]) -> int:
    """Mean percentage of the reservation's non-zero resources the pod's requests fill (higher = tighter)."""
    names = [n for n, v in reserved.items() if v > 0 and n != "pods"]
    if not names:
        return 0
    return sum(min(100, requests.get(n, 0) * 100 // reserved[n]) for n in names) // len(names)


def order(pods: list[Pod], reserved: Mapping[str, int], mode: str, config: PreAllocationConfig) -> list[Pod]:
    if mode == MODE_CLUSTER:
        return sorted(pods, key=lambda p: (-cluster_priority(p, config), p.uid, p.key))
    return sorted(pods, key=lambda p: (-tightness(p.requests, reserved), p.key))


def fits_in_reservation(requests: Mapping[str, int], reserved: Mapping[str, int]) -> bool:
    """Restricted: every reserved resource the pod requests fits in what the reservation reserves."""
    return all(amount <= reserved[name] for name, amount in requests.items() if reserved.get(name, 0) > 0)


def fits_node(request: Mapping[str, int], free: Mapping[str, int], given_back: Mapping[str, int]) -> bool:
    """The reservation fits the node's free capacity plus the adopted pods' requests."""
    return all(amount <= free.get(name, 0) + given_back.get(name, 0) for name, amount in request.items() if amount)


def choose(
    request: Mapping[str, int],
    free: Mapping[str, int],
    pods: Sequence[Mapping[str, int]],
    *,
    multiple: bool,
    prefer_none: bool,
    required: bool,
) -> list[int] | None:
    """Indices of the pods to adopt on one node ([] adopts none), or None when the reservation cannot be
    placed there. ``request`` is the reservation's (also what it reserves), ``free`` the node's free
    capacity, ``pods`` the candidates' requests in the order they are tried."""
    alone = fits_node(request, free, {})
    if alone and prefer_none and not required:
        return []
    if multiple:
        total: dict[str, int] = {}
        picked: list[int] = []
        for i, p in enumerate(pods):
            trial = {k: total.get(k, 0) + p.get(k, 0) for k in set(total) | set(p)}
            if not fits_in_reservation(trial, request):
                continue
            total, picked = trial, [*picked, i]
            if fits_node(request, free, total):
                return picked
    else:
        for i, p in enumerate(pods):
            if fits_in_reservation(p, request) and fits_node(request, free, p):
                return [i]
    if required:
        return None
    return [] if alone else None


def node_free(snapshot: ClusterSnapshot, position: int, names: Iterable[str]) -> dict[str, int]:
    free: dict[str, int] = {}
    for name in names:
        col = snapshot.column(name)
        if col is None:
            free[name] = 0
            continue
        free[name] = int(snapshot.allocatable[position, col] - snapshot.requested[position, col])
    return free


# ----- the plugin's extension points for a pre-allocating reserve pod -----


def pre_filter(
    state: CycleState,
    *,
    record: ReservationRecord,
    reserve_pod: Pod,
    snapshot: ClusterSnapshot,
    config: PreAllocationConfig,
    pinned: str,
) -> tuple[PreFilterResult | None, Status]:
    """Lists the candidates; a required pre-allocation is restricted to the nodes that have some."""
    reason = unsupported(record, config)
    if reason:
        return None, unresolvable(reason)
    found = candidates(record, reserve_pod.requests, snapshot, config)
    if pinned:
        found = {pinned: found[pinned]} if pinned in found else {}
    required = is_required(record)
    if required and not found:
        return None, unresolvable(ERR_REQUIRED_NO_CANDIDATE)
    state.write(PRE_ALLOCATION_KEY, PreAllocationState(required, found))
    if required:
        return PreFilterResult(frozenset(found)), success()
    if pinned:
        return PreFilterResult(frozenset({pinned})), success()
    return None, success()


def before_filter(
    state: CycleState,
    *,
    pre: PreAllocationState,
    record: ReservationRecord,
    reserve_pod: Pod,
    snapshot: ClusterSnapshot,
    config: PreAllocationConfig,
    positions: Positions,
) -> None:
    """Chooses the pods to adopt on each candidate node, and gives their requests back to the reserve
    pod there (:data:`RESTORED_CAPACITY`, read by NodeResourcesFit)."""
    request = {k: v for k, v in reserve_pod.requests.items() if k != "pods"}
    wanted = set(positions.tolist())
    for name, pods in pre.candidates.items():
        pos = snapshot.positions.get(name)
        if pos is None or pos not in wanted:
            continue
        picked = choose(
            request,
            node_free(snapshot, pos, request),
            [p.requests for p in pods],
            multiple=record.pre_allocation_multiple,
            prefer_none=config.prefer_no_pre_allocated_pods,
            required=pre.required,
        )
        if picked:
            pre.chosen[pos] = tuple(pods[i] for i in picked)
    if not pre.chosen:
        return
    order = sorted(pre.chosen)
    vectors = [[snapshot.request_vector(p) for p in pre.chosen[pos]] for pos in order]
    width = len(snapshot.resource_names)
    amounts = np.zeros((len(order), width), dtype=np.int64)
    for row, rows in enumerate(vectors):
        for vector in rows:
            amounts[row, : len(vector)] += vector
    state.write(
        RESTORED_CAPACITY,
        RestoredCapacity(
            np.asarray(order, dtype=np.intp),
            amounts,
            pod_slots=np.asarray([len(pre.chosen[pos]) for pos in order], dtype=np.int64),
        ),
    )


def filter_nodes(pre: PreAllocationState, positions: Positions) -> NodeFilterResult:
    """A required pre-allocation fails the nodes where no candidate makes the reservation fit."""
    if not pre.required:
        return NodeFilterResult.all_pass(len(positions))
    passed = np.isin(positions, np.asarray(sorted(pre.chosen), dtype=np.intp))
    return NodeFilterResult.from_mask(passed, unschedulable(ERR_NO_PODS_MEET))


def adopt(state: CycleState, accounting: ReservationAccounting, entry: ReservationEntry, position: int | None) -> None:
    """Reserve: the pods chosen on the node become the (assumed) owners of the reservation."""
    pre = state.get(PRE_ALLOCATION_KEY)
    if pre is None or position is None:
        return
    pre.adopted = pre.chosen.get(position, ())
    pre.reservation_uid = entry.uid
    for pod in pre.adopted:
        accounting.assume_owner(entry, pod)


def release(state: CycleState, accounting: ReservationAccounting) -> None:
    """Unreserve: undo :func:`adopt`."""
    pre = state.get(PRE_ALLOCATION_KEY)
    if pre is None:
        return
    for pod in pre.adopted:
        accounting.unassume(pre.reservation_uid, pod.key)
    pre.adopted = ()
