"""ReservationCache: every known reservation, and for the Available ones, rows of numpy arrays.

Per Available reservation (one row): its node, allocatable and unallocated remainder as vectors over the
snapshot's resource columns, and flags (matchable, Restricted, needs a per-pod check, order, holds a pod
slot). Every change is O(1) rows; nothing is rebuilt per scheduling cycle.

What a reservation has allocated comes from three sources, so that it is right at once and stays right
when one of them lags:

- ``status.currentOwners`` / ``status.allocated``, written by the lifecycle controller (the only source
  in a simulate file without owner pods);
- the owner pods the scheduler's pod watch sees bound on the reservation's node with the
  ``reservation-allocated`` annotation naming it (:meth:`ReservationCache.owner_bound`), and the recorded
  owners it saw leave (deleted, finished, re-annotated or elsewhere: :meth:`ReservationCache.owner_left`),
  which are taken out of ``status.allocated`` until the controller rewrites it;
- owner pods assumed by Reserve, until the watch or the status shows them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from apis.core.frozendict import FrozenDict
from apis.core.types import PODS, ObjectMeta, Pod
from apis.scheduling import ReservationRecord
from apis.scheduling.record import RESTRICTED
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, IntArray, PortKey, Positions
from koord_scheduler.plugins.reservation.matching import OwnerIndex, reservation_order
from koord_scheduler.plugins.reservation.reserve_pod import holding_pod

Rows = npt.NDArray[np.intp]


class OwnerRef(NamedTuple):
    """An owner pod as the pod watch saw it: bound on ``node`` with the annotation naming a reservation."""

    key: str
    node: str
    requests: Mapping[str, int]


def pod_id(uid: str, key: str) -> str:
    """How owners are identified across the status, the watch and Reserve: uid, else namespace/name."""
    return uid or key


class AssumedOwner(NamedTuple):
    """An owner pod Reserve assumed into a reservation (not yet seen bound or recorded)."""

    uid: str
    requests: Mapping[str, int]
    """Its requests, ``pods`` left out."""


@dataclass(slots=True)
class ReservationEntry:
    record: ReservationRecord
    reserve_pod: Pod
    row: int = -1
    """Array row while Available, else -1."""
    assumed: dict[str, AssumedOwner] = field(default_factory=dict)
    """Owner pods assumed by Reserve and not yet seen bound or recorded, by pod key."""
    holding: Pod | None = None
    """The pod accounted on the node for this reservation (its remainder), if any."""
    bound: dict[str, OwnerRef] = field(default_factory=dict)
    """Owner pods seen by the pod watch, by :func:`pod_id` (shared with the cache's per-uid map)."""
    left: dict[str, Mapping[str, int]] = field(default_factory=dict)
    """Recorded owners the pod watch saw leave, by :func:`pod_id` -> requests (until the status drops them)."""

    def recorded_ids(self) -> set[str]:
        return {pod_id(uid, f"{ns}/{name}") for ns, name, uid in self.record.current_owners}

    def _live(self) -> tuple[set[str], list[tuple[str, Mapping[str, int]]]]:
        """(ids of every current owner, the requests of those ``status.allocated`` does not include)."""
        recorded = self.recorded_ids()
        ids = recorded - self.left.keys()
        extra: list[tuple[str, Mapping[str, int]]] = []
        node = self.record.node_name
        bound_keys = set()
        for pid, ref in self.bound.items():
            if ref.node != node:
                continue
            bound_keys.add(ref.key)
            if pid not in ids:
                ids.add(pid)
                extra.append((pid, ref.requests))
        for key, owner in self.assumed.items():
            pid = pod_id(owner.uid, key)
            if pid not in ids and key not in bound_keys:
                ids.add(pid)
                extra.append((pid, owner.requests))
        return ids, extra

    @property
    def uid(self) -> str:
        return self.record.uid or self.record.name

    @property
    def allocatable(self) -> Mapping[str, int]:
        """``status.allocatable``, else the template's requests."""
        if self.record.allocatable:
            return self.record.allocatable
        return {k: v for k, v in self.reserve_pod.requests.items() if k != PODS}

    def allocated(self) -> dict[str, int]:
        """``status.allocated``, less the recorded owners that left, plus the owners it does not know yet
        (seen bound, or assumed), masked to the allocatable names."""
        names = self.allocatable
        out = {k: v for k, v in self.record.allocated.items() if k in names}
        if self.left:
            for pid in self.recorded_ids() & self.left.keys():
                for name, amount in self.left[pid].items():
                    if name in out:
                        out[name] = max(0, out[name] - amount)
        if self.bound or self.assumed:
            for _, requests in self._live()[1]:
                for name, amount in requests.items():
                    if name in names:
                        out[name] = out.get(name, 0) + amount
        return {k: v for k, v in out.items() if v}

    def owner_count(self) -> int:
        if not (self.bound or self.assumed or self.left):
            return len(self.record.current_owners)
        return len(self._live()[0])

    def owners(self) -> list[str]:
        """``namespace/name`` of the current owners (recorded, seen bound, assumed)."""
        names = {
            f"{ns}/{name}"
            for ns, name, uid in self.record.current_owners
            if pod_id(uid, f"{ns}/{name}") not in self.left
        }
        names.update(ref.key for ref in self.bound.values() if ref.node == self.record.node_name)
        return sorted(names | set(self.assumed))

    @property
    def exhausted(self) -> bool:
        """allocateOnce and already allocated: never matchable again, holds nothing."""
        return self.record.allocate_once and self.owner_count() > 0

    def remainder(self) -> dict[str, int]:
        if self.exhausted:
            return {}
        allocated = self.allocated()
        return {k: max(0, v - allocated.get(k, 0)) for k, v in self.allocatable.items() if v > 0}


class ReservationCache:
    """See the module docstring. ``snapshot`` gives the resource columns and node positions."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.entries: dict[str, ReservationEntry] = {}
        """uid -> entry, for every valid reservation not terminated."""
        self.by_name: dict[str, str] = {}
        self.by_node: dict[str, set[str]] = {}
        self.owner_index = OwnerIndex()
        self.bound_owners: dict[str, dict[str, OwnerRef]] = {}
        """Reservation uid -> owner pods the pod watch sees bound into it (also for reservations not yet
        known: a pod event may come first)."""
        cap = 16
        self._width = len(snapshot.resource_names)
        self.row_uid: list[str] = []
        self.row_node: list[str] = []
        self._free_rows: list[int] = []
        self.remainder: IntArray = np.zeros((cap, self._width), dtype=np.int64)
        self.allocatable: IntArray = np.zeros((cap, self._width), dtype=np.int64)
        self.matchable: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.restricted: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.needs_check: BoolArray = np.zeros(cap, dtype=np.bool_)
        """Rows whose reservation is unschedulable or tainted: checked against each pod's tolerations."""
        self.order: IntArray = np.zeros(cap, dtype=np.int64)
        self.pod_slots: IntArray = np.zeros(cap, dtype=np.int64)
        """1 where the reservation is accounted on its node as a pod (its holding pod): the slot its owner
        takes over."""
        self.row_ports: dict[int, frozenset[PortKey]] = {}
        """Host ports the row's holding pod holds on its node (rows without any are absent)."""
        self._positions: npt.NDArray[np.intp] = np.full(cap, -1, dtype=np.intp)
        self._positions_key: tuple[int, int] = (-1, -1)
        self._generation = 0
        self._uid_rows: dict[str, int] = {}

    # ----- reading -----

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[ReservationEntry]:
        return iter(list(self.entries.values()))

    def get(self, uid: str) -> ReservationEntry | None:
        return self.entries.get(uid)

    def get_by_name(self, name: str) -> ReservationEntry | None:
        uid = self.by_name.get(name)
        return None if uid is None else self.entries.get(uid)

    @property
    def num_available(self) -> int:
        return len(self._uid_rows)

    def width(self) -> int:
        """Pads the arrays when the snapshot gained resource columns; returns the width."""
        width = len(self.snapshot.resource_names)
        if width > self._width:
            pad = ((0, 0), (0, width - self._width))
            self.remainder = np.pad(self.remainder, pad)
            self.allocatable = np.pad(self.allocatable, pad)
            self._width = width
        return self._width

    def positions(self) -> npt.NDArray[np.intp]:
        """Node position of every row (-1 when the node is unknown or the row is free)."""
        snap = self.snapshot
        key = (snap.nodes_generation, self._generation)
        if key != self._positions_key:
            pos = np.full(len(self.matchable), -1, dtype=np.intp)
            for row, node in enumerate(self.row_node):
                if node:
                    pos[row] = snap.positions.get(node, -1)
            self._positions = pos
            self._positions_key = key
        return self._positions

    def rows_of(self, uids: set[str]) -> Rows:
        rows = [self._uid_rows[u] for u in uids if u in self._uid_rows]
        return np.asarray(rows, dtype=np.intp)

    def match(self, pod: Pod) -> Rows:
        """Rows of the matchable Available reservations whose owners match ``pod``."""
        if not self._uid_rows:
            return np.empty(0, dtype=np.intp)
        rows = self.rows_of(self.owner_index.match(pod))
        if len(rows) == 0:
            return rows
        result: Rows = rows[self.matchable[rows]]
        return result

    def vector(self, amounts: Mapping[str, int]) -> IntArray:
        """``amounts`` as a row over the snapshot's columns (adds columns for new resources)."""
        vec = self.snapshot.request_vector(Pod(meta=ObjectMeta(name=""), requests=FrozenDict(amounts)))
        width = self.width()
        if len(vec) < width:
            vec = np.pad(vec, (0, width - len(vec)))
        return vec

    # ----- writing -----

    def upsert(self, record: ReservationRecord, reserve_pod: Pod) -> ReservationEntry:
        """Add or update a valid, not terminated reservation; returns its entry (with ``holding``
        recomputed by :meth:`refresh`)."""
        uid = record.uid or record.name
        entry = self.entries.get(uid)
        if entry is None:
            entry = ReservationEntry(record, reserve_pod, bound=self.bound_owners.setdefault(uid, {}))
            self.entries[uid] = entry
        else:
            if entry.record.node_name and entry.record.node_name != record.node_name:
                self.by_node.get(entry.record.node_name, set()).discard(uid)
            entry.record = record
            entry.reserve_pod = reserve_pod
        self.by_name[record.name] = uid
        recorded = {owner_uid for _, _, owner_uid in record.current_owners}
        for key, owner in list(entry.assumed.items()):
            if owner.uid in recorded or any(f"{ns}/{n}" == key for ns, n, _ in record.current_owners):
                del entry.assumed[key]
        if entry.left:
            still = entry.recorded_ids()
            for pid in [p for p in entry.left if p not in still]:
                del entry.left[pid]
        if record.is_available:
            self.by_node.setdefault(record.node_name, set()).add(uid)
            self.owner_index.add(uid, record.owners)
        else:
            self.owner_index.remove(uid)
        self.refresh(entry)
        return entry

    def remove(self, uid: str) -> ReservationEntry | None:
        entry = self.entries.pop(uid, None)
        if entry is None:
            return None
        if self.by_name.get(entry.record.name) == uid:
            del self.by_name[entry.record.name]
        if entry.record.node_name:
            self.by_node.get(entry.record.node_name, set()).discard(uid)
        self.owner_index.remove(uid)
        self._free_row(entry)
        if not self.bound_owners.get(uid):
            self.bound_owners.pop(uid, None)
        return entry

    def owner_bound(self, uid: str, pod: Pod) -> ReservationEntry | None:
        """The pod watch sees ``pod`` bound with the annotation naming reservation ``uid``. Returns the
        entry (to :meth:`refresh`) when it is known."""
        pid = pod_id(pod.uid, pod.key)
        ref = OwnerRef(pod.key, pod.node_name, {k: v for k, v in pod.requests.items() if k != PODS})
        self.bound_owners.setdefault(uid, {})[pid] = ref
        entry = self.entries.get(uid)
        if entry is not None:
            entry.left.pop(pid, None)
            if ref.node == entry.record.node_name:
                entry.assumed.pop(pod.key, None)
        return entry

    def owner_left(self, uid: str, pod: Pod) -> ReservationEntry | None:
        """``pod`` no longer holds reservation ``uid`` (deleted, finished, re-annotated). Returns the entry
        (to :meth:`refresh`) when it is known."""
        pid = pod_id(pod.uid, pod.key)
        owners = self.bound_owners.get(uid)
        if owners is not None:
            owners.pop(pid, None)
        entry = self.entries.get(uid)
        if entry is None:
            if owners is not None and not owners:
                del self.bound_owners[uid]
            return None
        if pid in entry.recorded_ids():
            entry.left[pid] = {k: v for k, v in pod.requests.items() if k != PODS}
        return entry

    def assume(self, uid: str, pod: Pod) -> ReservationEntry | None:
        entry = self.entries.get(uid)
        if entry is None:
            return None
        entry.assumed[pod.key] = AssumedOwner(pod.uid, {k: v for k, v in pod.requests.items() if k != PODS})
        self.refresh(entry)
        return entry

    def unassume(self, uid: str, pod_key: str) -> ReservationEntry | None:
        entry = self.entries.get(uid)
        if entry is None or entry.assumed.pop(pod_key, None) is None:
            return None
        self.refresh(entry)
        return entry

    def refresh(self, entry: ReservationEntry) -> None:
        """Recompute the entry's row and ``holding`` pod from its record and assumed owners."""
        record = entry.record
        if not record.is_available:
            self._free_row(entry)
            entry.holding = None
            return
        remainder = entry.remainder()
        if entry.row < 0:
            entry.row = self._alloc_row(entry.uid, record.node_name)
        row = entry.row
        self.row_node[row] = record.node_name
        self.remainder[row] = self.vector(remainder)
        self.allocatable[row] = self.vector(entry.allocatable)
        self.matchable[row] = not entry.exhausted
        self.restricted[row] = record.allocate_policy == RESTRICTED
        self.needs_check[row] = record.unschedulable or bool(record.taints)
        self.order[row] = reservation_order(record)
        self._generation += 1
        held = bool(remainder) or bool(entry.reserve_pod.host_ports and not entry.exhausted)
        entry.holding = holding_pod(entry.reserve_pod, record.node_name, remainder) if held else None
        self.pod_slots[row] = 1 if held else 0
        ports = frozenset((hp.host_ip, hp.protocol, hp.port) for hp in entry.reserve_pod.host_ports) if held else None
        if ports:
            self.row_ports[row] = ports
        else:
            self.row_ports.pop(row, None)

    def _alloc_row(self, uid: str, node: str) -> int:
        if self._free_rows:
            row = self._free_rows.pop()
            self.row_uid[row] = uid
            self.row_node[row] = node
        else:
            row = len(self.row_uid)
            self.row_uid.append(uid)
            self.row_node.append(node)
            if row >= len(self.matchable):
                self._grow(2 * len(self.matchable))
        self._uid_rows[uid] = row
        return row

    def _free_row(self, entry: ReservationEntry) -> None:
        row = entry.row
        if row < 0:
            return
        entry.row = -1
        self._uid_rows.pop(entry.uid, None)
        self.row_uid[row] = ""
        self.row_node[row] = ""
        self.remainder[row] = 0
        self.allocatable[row] = 0
        self.matchable[row] = False
        self.needs_check[row] = False
        self.pod_slots[row] = 0
        self.row_ports.pop(row, None)
        self._free_rows.append(row)
        self._generation += 1

    def _grow(self, cap: int) -> None:
        extra = cap - len(self.matchable)
        self.remainder = np.concatenate([self.remainder, np.zeros((extra, self._width), dtype=np.int64)])
        self.allocatable = np.concatenate([self.allocatable, np.zeros((extra, self._width), dtype=np.int64)])
        self.matchable = np.concatenate([self.matchable, np.zeros(extra, dtype=np.bool_)])
        self.restricted = np.concatenate([self.restricted, np.zeros(extra, dtype=np.bool_)])
        self.needs_check = np.concatenate([self.needs_check, np.zeros(extra, dtype=np.bool_)])
        self.order = np.concatenate([self.order, np.zeros(extra, dtype=np.int64)])
        self.pod_slots = np.concatenate([self.pod_slots, np.zeros(extra, dtype=np.int64)])
        self._positions_key = (-1, -1)

    def ports_at(self, rows: Rows, positions: Positions) -> dict[int, frozenset[PortKey]] | None:
        """Position -> host ports held by ``rows`` (row ``rows[i]`` is on ``positions[i]``); None when none
        of them holds a port, which is the usual case and costs one test."""
        if not self.row_ports:
            return None
        out: dict[int, frozenset[PortKey]] = {}
        for row, pos in zip(rows.tolist(), positions.tolist(), strict=True):
            ports = self.row_ports.get(row)
            if ports:
                out[pos] = out.get(pos, frozenset()) | ports
        return out or None

    def node_remainders(self) -> tuple[Positions, IntArray, IntArray, dict[int, frozenset[PortKey]] | None]:
        """(positions, summed remainder, summed pod slots, host ports) per position over every Available
        reservation: what a ``reservation-ignored`` pod may use."""
        pos = self.positions()
        live = np.flatnonzero(pos[: len(self.row_uid)] >= 0)
        if len(live) == 0:
            empty = np.empty(0, dtype=np.intp)
            return empty, np.zeros((0, self.width()), dtype=np.int64), np.zeros(0, dtype=np.int64), None
        uniq, inverse = np.unique(pos[live], return_inverse=True)
        sums = np.zeros((len(uniq), self.width()), dtype=np.int64)
        np.add.at(sums, inverse, self.remainder[live])
        slots = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(slots, inverse, self.pod_slots[live])
        return uniq.astype(np.intp), sums, slots, self.ports_at(live.astype(np.intp), pos[live])
