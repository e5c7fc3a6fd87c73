"""CPUs held by Reservations and restored to their owner pods (Koordinator
``pkg/scheduler/plugins/nodenumaresource/reservation.go``: ``RestoreReservation``,
``tryAllocateFromReusable``, ``PreBindReservation``).

- A Reservation whose template asks for bound CPUs is scheduled as its reserve pod: Reserve takes a
  cpuset for it like for a pod, PreBind writes ``resource-status`` on the Reservation object, and while
  the Reservation is Available its cpuset stays held on its node (from that annotation, also after a
  restart), so no other pod gets those CPUs.
- An owner pod that will consume the Reservation on a node (the Reservation plugin names it in
  :class:`~koord_scheduler.framework.restored.RestoredCapacity`) gets the Reservation's remaining CPUs
  (its cpuset less the CPUs its other owner pods hold) back as available, and takes them first
  (``takePreferredCPUs``). Under ``allocatePolicy: Restricted`` it takes CPUs only from them.

Holdings of reservations are keyed ``reservation/<uid>`` so that no pod key can collide with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.core.quantity import to_amount
from apis.core.types import Pod
from apis.extension.numa import (
    ANNOTATION_RESOURCE_STATUS,
    AnnotationError,
    CPUExclusivePolicy,
    parse_cpuset,
    resource_spec_of,
    resource_status_of,
)
from apis.scheduling import ANNOTATION_RESERVATION_NAME, ANNOTATION_RESERVE_POD, ReservationRecord
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.restored import RESTORED_CAPACITY
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.nodenumaresource.allocation import (
    ERR_NOT_ENOUGH_CPUS,
    AllocationError,
    AllocationRequest,
    allocate_cpus_preferring,
)
from koord_scheduler.plugins.nodenumaresource.cache import Holding, NodeAllocations
from koord_scheduler.plugins.nodenumaresource.nrt import NodeTopologyRecord

KEY_PREFIX = "reservation/"
ERR_RESERVATION_NOT_ENOUGH = f"Reservation(s) {ERR_NOT_ENOUGH_CPUS}"


def reservation_key(uid: str) -> str:
    return KEY_PREFIX + uid


def is_reserve_pod(pod: Pod) -> bool:
    return pod.meta.annotations.get(ANNOTATION_RESERVE_POD) == "true"


def holding_key(pod: Pod) -> str:
    """The key a pod's allocation is held under: a reserve pod's is its reservation's (the reserve pod's
    uid is the reservation's uid)."""
    return reservation_key(pod.uid or pod.name) if is_reserve_pod(pod) else pod.key


def reservation_name(pod: Pod) -> str:
    return pod.meta.annotations.get(ANNOTATION_RESERVATION_NAME, "")


def reservation_holding(record: ReservationRecord) -> tuple[str, Holding] | None:
    """(node, what it holds) for an Available, valid Reservation with a ``resource-status`` cpuset (or
    NUMA shares); None otherwise (pending, terminated, invalid, nothing bound, or a malformed
    annotation, which Koordinator skips too)."""
    if not record.is_valid or not record.is_available or record.is_terminated:
        return None
    if ANNOTATION_RESOURCE_STATUS not in record.annotations:
        return None
    owner = f"Reservation {record.name}"
    try:
        status = resource_status_of(record.annotations, owner)
        spec = resource_spec_of(record.annotations, owner)
        cpus = parse_cpuset(status.cpuset)
    except (AnnotationError, ValueError):
        return None
    try:
        shares = {
            r.node: {name: to_amount(name, value) for name, value in r.resources.items()}
            for r in status.numa_node_resources
        }
    except (ValueError, TypeError):
        shares = {}
    if not cpus and not shares:
        return None
    try:
        exclusive = CPUExclusivePolicy(spec.preferred_cpu_exclusive_policy)
    except ValueError:
        exclusive = CPUExclusivePolicy.NONE
    key = reservation_key(record.uid or record.name)
    return record.node_name, Holding(cpus, exclusive, key, shares)


@dataclass(frozen=True, slots=True)
class Restore:
    """What a matched reservation gives back to its owner pod on one node."""

    cpus: frozenset[int]
    """The reservation's CPUs not held by its other owner pods."""
    restricted: bool


def restore_for(state: CycleState, allocations: NodeAllocations, node: str, position: int) -> Restore | None:
    """The reserved CPUs restored to this cycle's pod on ``node``: those of the reservation the pod
    would consume there, if that reservation holds a cpuset."""
    restored = state.get(RESTORED_CAPACITY)
    owner = restored.owner_at(position) if restored is not None else None
    if owner is None:
        return None
    key = reservation_key(owner.uid)
    holding = allocations.holding(node, key)
    if holding is None or not holding.cpus:
        return None
    return Restore(holding.cpus - allocations.taken_except(node, key), owner.restricted)


def available_cpus(
    allocations: NodeAllocations, node: str, record: NodeTopologyRecord, restore: Restore | None
) -> tuple[frozenset[int], dict[int, CPUExclusivePolicy]]:
    """``getAvailableCPUs`` with the reservation's remaining CPUs restored (their reference by the
    reservation no longer counts, so neither does its exclusive policy)."""
    taken, exclusive = allocations.taken(node)
    available = frozenset(record.topology.cpus) - taken - record.reserved
    if restore is None:
        return available, exclusive
    restored = restore.cpus - record.reserved
    if restore.restricted:
        available = restored
    else:
        available |= restored
    if restored:
        exclusive = {cpu: policy for cpu, policy in exclusive.items() if cpu not in restored}
    return available, exclusive


def allocate_on_node(
    allocations: NodeAllocations,
    node: str,
    record: NodeTopologyRecord,
    alloc: AllocationRequest,
    restore: Restore | None,
) -> tuple[int, ...]:
    """The pod's cpuset on ``node``: from its reservation's CPUs first, then from the node's free ones
    (only from the reservation's under Restricted). Raises :class:`AllocationError`."""
    available, exclusive = available_cpus(allocations, node, record, restore)
    preferred = restore.cpus if restore is not None else frozenset()
    if restore is not None and restore.restricted and alloc.num_cpus > len(available):
        raise AllocationError(ERR_RESERVATION_NOT_ENOUGH)
    return allocate_cpus_preferring(record.topology, available, exclusive, alloc, preferred)


def reservation_annotations(annotations: Mapping[str, str | None]) -> dict[str, object]:
    """The merge-patch body that puts ``annotations`` on a Reservation object."""
    return {"metadata": {"annotations": dict(annotations)}}


def apply_reservation_event(allocations: NodeAllocations, event: EventType, old: object, new: object) -> list[str]:
    """A Reservation informer event: an Available Reservation holds its ``resource-status`` cpuset on its
    node; a finished, invalid or deleted one gives it back; a pending one keeps what its reserve pod's
    Reserve assumed. Returns the nodes whose holdings changed."""
    record = new if isinstance(new, ReservationRecord) and event != EventType.DELETED else None
    gone = old if record is None else record
    if not isinstance(gone, ReservationRecord):
        return []
    key = reservation_key(gone.uid or gone.name)
    if record is not None and not record.is_terminated and record.is_valid and not record.is_available:
        return []
    touched = [allocations.release(key) or ""]
    held = reservation_holding(record) if record is not None else None
    if held is not None:
        node, holding = held
        allocations.hold(node, key, holding)
        touched.append(node)
    return [n for n in touched if n]
