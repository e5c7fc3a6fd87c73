"""Devices held by Reservations (Koordinator ``deviceshare/reservation.go``: ``RestoreReservation``,
``tryAllocateFromReusable``, ``PreBindReservation``).

- A Reservation whose template asks for devices is scheduled as its reserve pod: Reserve gives it
  devices like a pod, held under ``reservation/<uid>``; PreBindReservation writes them to the
  Reservation's ``device-allocated`` annotation; while the Reservation is Available its devices stay
  held on its node (read back from that annotation, so also after a restart), so no other pod gets them.
  It gives them back when it succeeds, fails, expires or is deleted.
- An owner pod that consumes the Reservation (the Reservation plugin names it, per node, in the
  cycle's :class:`~koord_scheduler.framework.restored.RestoredCapacity`) gets the Reservation's
  remainder back (:meth:`.cache.NodeDevices.for_owner`) and takes the Reservation's devices first; under
  ``allocatePolicy: Restricted`` only them. Its devices are then taken out of the Reservation's (its
  ``reservation-allocated`` annotation names the Reservation once bound).
"""

from __future__ import annotations

from apis.core.types import Pod
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED, decode_device_allocations
from apis.scheduling import ANNOTATION_RESERVATION_NAME, ANNOTATION_RESERVE_POD, ReservationRecord
from apis.scheduling.annotations import parse_allocated_annotation
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.deviceshare.cache import Allocations, DeviceCache, reservation_key


def is_reserve_pod(pod: Pod) -> bool:
    return pod.annotations.get(ANNOTATION_RESERVE_POD) == "true"


def holding_key(pod: Pod) -> str:
    """The key a pod's devices are held under: a reserve pod's is its Reservation's (the reserve pod's uid
    is the Reservation's)."""
    return reservation_key(pod.uid or pod.name) if is_reserve_pod(pod) else pod.key


def reservation_name(pod: Pod) -> str:
    return pod.annotations.get(ANNOTATION_RESERVATION_NAME, "")


def consumed_reservation(pod: Pod) -> str:
    """The uid of the Reservation a bound pod consumes (its ``reservation-allocated`` annotation), or ""."""
    ref = parse_allocated_annotation(pod.annotations)
    if ref is None:
        return ""
    name, uid = ref
    return uid or name


def reservation_devices(record: ReservationRecord) -> tuple[str, Allocations] | None:
    """(node, devices) of an Available, valid Reservation with a ``device-allocated`` annotation; None
    otherwise (pending, terminated, invalid, no devices, or a malformed annotation, which is skipped)."""
    if not record.is_valid or not record.is_available or record.is_terminated or not record.node_name:
        return None
    text = record.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if not text:
        return None
    try:
        decoded = decode_device_allocations(text)
    except ValueError:
        return None
    allocations = {t: tuple(items) for t, items in decoded.items() if items}
    return (record.node_name, allocations) if allocations else None


def apply_reservation_event(cache: DeviceCache, event: EventType, old: object, new: object) -> None:
    """A Reservation informer event: an Available Reservation holds its devices on its node; a finished,
    invalid or deleted one gives them back; a pending one keeps what its reserve pod's Reserve assumed."""
    record = new if isinstance(new, ReservationRecord) and event != EventType.DELETED else None
    gone = old if record is None else record
    if not isinstance(gone, ReservationRecord):
        return
    key = reservation_key(gone.uid or gone.name)
    if record is not None and not record.is_terminated and record.is_valid and not record.is_available:
        return
    held = reservation_devices(record) if record is not None else None
    if held is None:
        cache.unassign(key)
        return
    node, allocations = held
    cache.assign(key, node, allocations)
