"""Per-node devices and what pods and Reservations hold of them (Koordinator ``deviceshare/device_cache.go``,
and the used/remained arithmetic of ``deviceshare/reservation.go``).

A node's devices come from its ``Device`` object. What is held comes from

- pods: the ``device-allocated`` annotation of pods bound to the node, and the allocations this
  scheduler reserved but has not yet seen bound (keyed ``namespace/name``);
- Reservations: an Available Reservation's ``device-allocated`` annotation, or what its reserve pod's
  Reserve assumed (keyed ``reservation/<uid>``).

A pod that consumes a Reservation (its ``reservation-allocated`` annotation, or the Reservation its
Reserve was nominated to) takes its devices out of that Reservation's: on a minor the Reservation holds,
the device counts ``max(reserved, taken by its owners)`` once, not both. What the Reservation still has
there (``reserved - taken by its owners``, at least 0) is its *remainder*, which only its owners may be
given back (:meth:`NodeDevices.for_owner`). Unhealthy devices count for nothing. Each node's view is
recomputed when its Device object or its holdings change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from apis.extension.device import DeviceAllocation
from apis.scheduling.device import NodeDeviceRecord
from koord_scheduler.plugins.deviceshare.allocation import DeviceGroup, DeviceState, FreeVF
from koord_scheduler.plugins.deviceshare.partitions import (
    ANNOTATION_GPU_PARTITIONS,
    PartitionError,
    PartitionIndex,
    index_of,
    parse_partition_table,
)

log = logging.getLogger(__name__)

Allocations = Mapping[str, Sequence[DeviceAllocation]]
"""Device type → the devices held."""
DeviceAmounts = dict[str, dict[int, dict[str, int]]]
"""Device type → minor → resource → amount."""

RESERVATION_PREFIX = "reservation/"


def reservation_key(uid: str) -> str:
    """The holding key of a Reservation's devices (no pod key can collide with it)."""
    return RESERVATION_PREFIX + uid


@dataclass(frozen=True, slots=True)
class Holding:
    """What one pod or Reservation holds on a node."""

    allocations: Allocations
    reservation: str = ""
    """For a pod: the uid of the Reservation whose devices it consumes ("" for none)."""


@dataclass(frozen=True, slots=True)
class Remainder:
    """What a Reservation still has for its owners: amounts per type and minor, and its VFs no owner holds."""

    amounts: Mapping[str, Mapping[int, Mapping[str, int]]]
    vfs: Mapping[str, Mapping[int, frozenset[str]]] = field(default_factory=dict)

    def minors(self, device_type: str) -> frozenset[int]:
        return frozenset(self.amounts.get(device_type, {}))


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """A node's healthy devices by type, with free amounts and free VFs, and its Reservations' remainders."""

    groups: Mapping[str, DeviceGroup]
    remainders: Mapping[str, Remainder] = field(default_factory=dict)
    """Reservation uid → its remainder on this node."""

    def group(self, device_type: str) -> DeviceGroup:
        return self.groups.get(device_type, _EMPTY)

    def for_owner(self, uid: str, *, restricted: bool) -> tuple[NodeDevices, Mapping[str, frozenset[int]]]:
        """The node as an owner of Reservation ``uid`` sees it, and the minors to prefer (the
        Reservation's). The remainder is added to the free amounts on the Reservation's minors; under
        ``restricted`` (``allocatePolicy: Restricted``) only the Reservation's minors are left, each with
        its remainder as free."""
        remainder = self.remainders.get(uid)
        if remainder is None:
            return self, {}
        groups: dict[str, DeviceGroup] = {}
        for device_type, group in self.groups.items():
            amounts = remainder.amounts.get(device_type, {})
            vfs = remainder.vfs.get(device_type, {})
            devices: list[DeviceState] = []
            for d in group.devices:
                left = amounts.get(d.minor)
                if left is None:
                    if not restricted:
                        devices.append(d)
                    continue
                back = tuple(
                    FreeVF(labels, minor, bus)
                    for labels, minor, bus in _vf_rows(d.all_vfs)
                    if bus in vfs.get(d.minor, frozenset())
                )
                if restricted:
                    free = {name: min(left.get(name, 0), total) for name, total in d.total.items()}
                    devices.append(replace(d, free=free, free_vfs=back))
                else:
                    free = {
                        name: min(d.free.get(name, 0) + left.get(name, 0), total) for name, total in d.total.items()
                    }
                    devices.append(replace(d, free=free, free_vfs=d.free_vfs + back))
            groups[device_type] = DeviceGroup.of(devices)
        preferred = {t: remainder.minors(t) for t in remainder.amounts}
        return NodeDevices(groups, self.remainders), preferred


_EMPTY = DeviceGroup.of(())


def _vf_rows(all_vfs: Sequence[FreeVF]) -> list[tuple[Mapping[str, str], int, str]]:
    return [(vf.labels, vf.minor, vf.bus_id) for vf in all_vfs]


def _add(target: DeviceAmounts, device_type: str, minor: int, resources: Mapping[str, int]) -> None:
    row = target.setdefault(device_type, {}).setdefault(minor, {})
    for name, amount in resources.items():
        row[name] = row.get(name, 0) + amount


def node_devices(record: NodeDeviceRecord, holdings: Mapping[str, Holding]) -> NodeDevices:
    """The node's view from its Device object and what is held there (see the module docstring)."""
    reserved = {key[len(RESERVATION_PREFIX) :]: h for key, h in holdings.items() if key.startswith(RESERVATION_PREFIX)}
    reserved_minors = {
        uid: {t: {a.minor for a in items} for t, items in h.allocations.items()} for uid, h in reserved.items()
    }
    used: DeviceAmounts = {}
    owners: dict[str, DeviceAmounts] = {}
    used_vfs: dict[str, dict[int, set[str]]] = {}
    owner_vfs: dict[str, dict[str, dict[int, set[str]]]] = {}
    for key, h in holdings.items():
        if key.startswith(RESERVATION_PREFIX):
            for device_type, items in h.allocations.items():
                for a in items:
                    if a.vfs:
                        bucket = used_vfs.setdefault(device_type, {}).setdefault(a.minor, set())
                        bucket.update(vf.bus_id for vf in a.vfs)
            continue  # counted below, with what its owners take of it
        uid = h.reservation if h.reservation in reserved else ""
        for device_type, items in h.allocations.items():
            inside = reserved_minors[uid].get(device_type, set()) if uid else set()
            for a in items:
                if a.minor in inside:
                    _add(owners.setdefault(uid, {}), device_type, a.minor, a.resources)
                    if a.vfs:
                        bucket = owner_vfs.setdefault(uid, {}).setdefault(device_type, {}).setdefault(a.minor, set())
                        bucket.update(vf.bus_id for vf in a.vfs)
                else:
                    _add(used, device_type, a.minor, a.resources)
                if a.vfs:
                    used_vfs.setdefault(device_type, {}).setdefault(a.minor, set()).update(vf.bus_id for vf in a.vfs)
    remainders: dict[str, Remainder] = {}
    for uid, h in reserved.items():
        taken = owners.get(uid, {})
        left: DeviceAmounts = {}
        left_vfs: dict[str, dict[int, frozenset[str]]] = {}
        for device_type, items in h.allocations.items():
            for a in items:
                by_owners = taken.get(device_type, {}).get(a.minor, {})
                row = left.setdefault(device_type, {}).setdefault(a.minor, {})
                for name in set(a.resources) | set(by_owners):
                    r, o = a.resources.get(name, 0), by_owners.get(name, 0)
                    _add(used, device_type, a.minor, {name: max(r, o)})
                    row[name] = row.get(name, 0) + max(r - o, 0)
                if a.vfs:
                    held = owner_vfs.get(uid, {}).get(device_type, {}).get(a.minor, set())
                    left_vfs.setdefault(device_type, {})[a.minor] = frozenset(
                        vf.bus_id for vf in a.vfs if vf.bus_id not in held
                    )
        remainders[uid] = Remainder(left, left_vfs)
    groups: dict[str, DeviceGroup] = {}
    for device_type in sorted({d.type for d in record.devices}):
        taken_by_type = used.get(device_type, {})
        vfs_taken = used_vfs.get(device_type, {})
        states: list[DeviceState] = []
        for d in record.of_type(device_type):
            if not d.health:
                continue
            taken_here = taken_by_type.get(d.minor, {})
            free = {name: max(total - taken_here.get(name, 0), 0) for name, total in d.resources.items()}
            all_vfs = tuple(FreeVF(g.labels, minor, bus) for g in d.vf_groups for minor, bus in g.vfs)
            busy = vfs_taken.get(d.minor, set())
            states.append(
                DeviceState(
                    minor=d.minor,
                    total=d.resources,
                    free=free,
                    numa=d.numa_node,
                    pcie=d.pcie_id,
                    socket=d.socket,
                    labels=d.labels,
                    all_vfs=all_vfs,
                    free_vfs=tuple(vf for vf in all_vfs if vf.bus_id not in busy),
                )
            )
        groups[device_type] = DeviceGroup.of(states)
    return NodeDevices(groups, remainders)


class DeviceCache:
    """Device objects and holdings per node (see the module docstring). Not thread-safe: the scheduling
    cycle and the informer handlers run on one event loop."""

    def __init__(self) -> None:
        self.devices: dict[str, NodeDeviceRecord] = {}
        self._held: dict[str, dict[str, Holding]] = {}
        """Node → holding key → what it holds there."""
        self._node_of: dict[str, str] = {}
        self._views: dict[str, NodeDevices] = {}
        self.partition_tables: dict[str, PartitionIndex] = {}
        """Node → the GPU partition table of its Device object's ``gpu-partitions`` annotation."""

    # ----- devices -----

    def set_device(self, record: NodeDeviceRecord) -> None:
        """Take the node's Device object; a malformed partition table is logged and left out."""
        self.devices[record.name] = record
        self._views.pop(record.name, None)
        self.partition_tables.pop(record.name, None)
        text = record.annotations.get(ANNOTATION_GPU_PARTITIONS)
        if text:
            try:
                self.partition_tables[record.name] = index_of(parse_partition_table(text))
            except PartitionError as exc:
                log.warning("Device %s: %s; its GPUs are allocated without the table", record.name, exc)

    def delete_device(self, name: str) -> None:
        self.devices.pop(name, None)
        self._views.pop(name, None)
        self.partition_tables.pop(name, None)

    # ----- holdings -----

    def assign(self, key: str, node: str, allocations: Allocations, *, reservation: str = "") -> None:
        """``key`` (a pod key or :func:`reservation_key`) holds ``allocations`` on ``node``; a pod consuming
        Reservation ``reservation`` takes them out of that Reservation's devices."""
        self.unassign(key)
        self._held.setdefault(node, {})[key] = Holding(allocations, reservation)
        self._node_of[key] = node
        self._views.pop(node, None)

    def unassign(self, key: str) -> str | None:
        """Drop what ``key`` holds; returns its node (None when it held nothing)."""
        node = self._node_of.pop(key, None)
        if node is None:
            return None
        held = self._held.get(node)
        if held is not None:
            held.pop(key, None)
            if not held:
                del self._held[node]
        self._views.pop(node, None)
        return node

    def holds(self, key: str) -> bool:
        return key in self._node_of

    def held_on(self, node: str) -> Mapping[str, Holding]:
        return self._held.get(node, {})

    def held(self, node: str, key: str) -> Allocations | None:
        """What ``key`` holds on ``node`` (None when nothing)."""
        h = self._held.get(node, {}).get(key)
        return h.allocations if h is not None else None

    # ----- queries -----

    def node_devices(self, node: str) -> NodeDevices | None:
        """The node's devices with free amounts; None when the node has no Device object."""
        cached = self._views.get(node)
        if cached is not None:
            return cached
        record = self.devices.get(node)
        if record is None:
            return None
        view = node_devices(record, self._held.get(node, {}))
        self._views[node] = view
        return view
