"""Restored capacity: resources reserved for a pod that a batch Filter/Score adds back for it.

Koordinator gives reserved resources back to owner pods by cloning and mutating node views each cycle.
Here a plugin (Reservation) writes a :class:`RestoredCapacity` into the cycle state instead: per-node
amounts a batch Filter/Score adds to the node's free capacity for this pod. The runtime reads the key
too: answers that depend on it are not cached per node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from koord_scheduler.framework.cycle_state import StateKey
from koord_scheduler.framework.snapshot import IntArray, PortKey, Positions


@dataclass(frozen=True, slots=True)
class RestoredReservation:
    """The reservation a pod would consume on one node."""

    uid: str
    """The reservation's uid (its name where it has none, as in simulate files)."""
    restricted: bool
    """``allocatePolicy: Restricted``: the pod may use only what the reservation holds."""


@dataclass(frozen=True, slots=True)
class RestoredCapacity:
    """Extra free capacity this pod may use on some nodes (reserved for it).

    ``amounts[i]`` is a row over ``snapshot.resource_names`` (as of when it was written) for node
    ``positions[i]``. Batch Filter plugins that check capacity add it to the node's free amount.

    ``pod_slots[i]`` (optional) is how many accounted pods on that node are reservations this pod may
    take the place of: their pod slots are the pod's too (Koordinator's ``pods - matched + 1``).
    ``ports`` (optional) maps a position to the host ports held there for this pod (``(ip, protocol,
    port)`` keys as in ``NodeInfo.used_ports``); NodePorts counts one use of each as free.
    """

    positions: Positions
    amounts: IntArray
    pod_slots: IntArray | None = None
    ports: Mapping[int, frozenset[PortKey]] | None = None
    owners: Mapping[int, RestoredReservation] | None = None
    """(optional) position -> the reservation whose remainder is restored there (the one the pod would
    consume on that node): plugins that keep their own per-reservation state (NodeNUMAResource's
    reserved cpusets; Koordinator's ReservationRestorePlugin) give back from it."""

    def lookup(self, positions: Positions) -> tuple[Positions, Positions]:
        """(indices into ``positions`` that have restored capacity, the matching indices into this
        object's rows)."""
        if len(self.positions) == 0 or len(positions) == 0:
            empty = np.empty(0, dtype=np.intp)
            return empty, empty
        order = np.argsort(self.positions)
        sorted_pos = self.positions[order]
        idx = np.clip(np.searchsorted(sorted_pos, positions), 0, len(sorted_pos) - 1)
        where = np.flatnonzero(sorted_pos[idx] == positions)
        return where, order[idx[where]]

    def for_positions(self, positions: Positions, width: int) -> tuple[Positions, IntArray]:
        """Indices into ``positions`` that have restored capacity, and their amounts (``width`` columns)."""
        where, rows = self.lookup(positions)
        if len(where) == 0:
            return where, np.zeros((0, width), dtype=np.int64)
        amounts = self.amounts[rows]
        if amounts.shape[1] < width:
            amounts = np.pad(amounts, ((0, 0), (0, width - amounts.shape[1])))
        return where, amounts[:, :width]

    def pod_slots_for(self, positions: Positions) -> IntArray:
        """Pod slots given back at each of ``positions`` (0 where none)."""
        out = np.zeros(len(positions), dtype=np.int64)
        if self.pod_slots is not None:
            where, rows = self.lookup(positions)
            out[where] = self.pod_slots[rows]
        return out

    def owner_at(self, position: int) -> RestoredReservation | None:
        """The reservation restored at ``position``, if any."""
        return self.owners.get(position) if self.owners else None


RESTORED_CAPACITY: StateKey[RestoredCapacity] = StateKey("frameworkext/RestoredCapacity")
