"""Koordinator's framework extender, as native stages of the runtime.

- **Transformers** run before/after the standard points and may replace the pod (and, for Score, the
  node list). A transformer runs only if its plugin is enabled at the matching extension point, in
  the profile's order; a non-success status aborts the cycle, naming the plugin.
- **Error-handler filters** intercept a scheduling failure (pre filters may take it over).
- **Reservation interfaces** are found on plugins by capability when the runtime is built.
- **Restored capacity**: Koordinator gives reserved resources back to owner pods by cloning and
  mutating node views each cycle. Here a plugin writes a :class:`RestoredCapacity` into the cycle
  state instead: per-node amounts a batch Filter/Score adds to the node's free capacity for this pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, PortKey, Positions
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import PreFilterResult, QueuedPodInfo

if TYPE_CHECKING:
    from koord_scheduler.framework.runtime import Framework


# ----- transformers -----


@runtime_checkable
class PreFilterTransformer(Protocol):
    name: str

    def before_pre_filter(self, state: CycleState, pod: Pod) -> tuple[Pod | None, Status]:
        """Return a replacement pod (or None to keep it) used for the rest of the cycle."""
        ...

    def after_pre_filter(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> Status: ...


@runtime_checkable
class FilterTransformer(Protocol):
    name: str

    def before_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> tuple[Pod | None, Status]:
        """Runs once per cycle over the candidate nodes, before any Filter. May replace the pod and
        write a :class:`RestoredCapacity` into ``state`` (the batch form of Koordinator's per-node
        BeforeFilter, which swaps the NodeInfo)."""
        ...


@runtime_checkable
class ScoreTransformer(Protocol):
    name: str

    def before_score(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> tuple[Pod | None, Positions | None, Status]:
        """May replace the pod and/or the node list to score (a subset of ``positions``)."""
        ...


# ----- restored capacity -----


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


RESTORED_CAPACITY: StateKey[RestoredCapacity] = StateKey("frameworkext/RestoredCapacity")


# ----- error handling -----

ErrorHandlerFilter = Callable[[QueuedPodInfo, Status], bool]
"""``filter(queued_pod, status) -> handled``. Pre filters: the first returning True takes over the
failure and the default handler is skipped. Post filters run after the default handler."""


# ----- reservation interfaces -----


@runtime_checkable
class ReservationFilterPlugin(Protocol):
    name: str

    def filter_reservation(self, state: CycleState, pod: Pod, reservation: Any, node_info: NodeInfo) -> Status:
        """Whether ``pod`` may use ``reservation`` (a ReservationInfo) on its node, in the Filter phase."""
        ...

    def filter_nominate_reservation(self, state: CycleState, pod: Pod, reservation: Any, node_name: str) -> Status:
        ...


@runtime_checkable
class ReservationScorePlugin(Protocol):
    name: str

    def score_reservation(self, state: CycleState, pod: Pod, reservation: Any, node_name: str) -> int:
        """A score in [0, 100] for ``pod`` using ``reservation`` on ``node_name``."""
        ...


@runtime_checkable
class ReservationRestorePlugin(Protocol):
    name: str

    def pre_restore_reservation(self, state: CycleState, pod: Pod) -> Status: ...

    def restore_reservation(
        self, state: CycleState, pod: Pod, matched: list[Any], unmatched: list[Any], node_info: NodeInfo
    ) -> tuple[Any, Status]: ...


@runtime_checkable
class ReservationPreBindPlugin(Protocol):
    name: str

    async def pre_bind_reservation(self, state: CycleState, reservation: Any, node_name: str) -> Status: ...


@runtime_checkable
class ReservationNominator(Protocol):
    """Chooses which reservation on the chosen node a pod consumes (the Reservation plugin)."""

    name: str

    def nominate_reservation(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Record the nominated reservation in ``state`` for Reserve; Success with none is fine."""
        ...


@runtime_checkable
class FrameworkAware(Protocol):
    """Plugins that drive other plugins (the Reservation plugin runs the reservation filter/score
    plugins) receive the framework once it is built."""

    def bind_framework(self, framework: Framework) -> None: ...
