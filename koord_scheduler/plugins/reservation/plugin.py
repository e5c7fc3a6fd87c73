"""The Reservation plugin (Koordinator ``pkg/scheduler/plugins/reservation``), vectorised.

- **Reservations as reserve pods.** Reservation objects arrive through ``handle.watch``. A pending one goes
  through the normal queue as its reserve pod (:mod:`.reserve_pod`); its Bind writes the status
  (``Available``, nodeName, allocatable, conditions); a failure writes ``Scheduled=False/Unschedulable``
  and the default handler requeues it with backoff. An Available one holds its unallocated remainder
  (and host ports) on its node through ``handle.account_pod``.
- **Owner pods.** PreFilter matches the pod against the owner index (a pod that matches nothing costs a
  few dictionary probes and the plugin skips Filter and Score). BeforeFilter decides, per node, which
  matched reservation the pod would use (Aligned/Restricted fit, then order label, then tightest fit) and
  writes that reservation's remainder as :data:`RESTORED_CAPACITY`, which NodeResourcesFit adds to the
  node's free capacity. Score prefers the node of the reservation with the lowest ``reservation-order``
  and else the tightest fit, as Koordinator does (:func:`.policy.node_scores`; the profile weights it, 5000
  in Koordinator's chart). Nomination picks the node's winner; Reserve assumes the pod into it; PreBind writes the
  ``reservation-allocated`` annotation; Unreserve undoes both.

Layout: this module holds the extension points; :mod:`.accounting` the informer handlers and what each
reservation holds, :mod:`.writes` the status, event and annotation writes, :mod:`.cache` the rows,
:mod:`.matching` and :mod:`.policy` the rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apis.config.reservation_args import ReservationArgs
from apis.core.types import Pod
from apis.scheduling import ANNOTATION_RESERVATION_AFFINITY, ReservationRecord
from apis.scheduling.annotations import allocated_annotation
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    BindPlugin,
    EnqueueExtensions,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
)
from koord_scheduler.framework.koordinator_stages import FilterTransformer, ReservationNominator
from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity, RestoredReservation
from koord_scheduler.framework.services import ApiRoute, APIServiceProvider
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Status, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    NodeFilterResult,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.kinds import RESERVATION_KIND
from koord_scheduler.plugins.reservation import policy, service
from koord_scheduler.plugins.reservation import preallocation as prealloc
from koord_scheduler.plugins.reservation.accounting import ReservationAccounting
from koord_scheduler.plugins.reservation.cache import ReservationCache, ReservationEntry, Rows
from koord_scheduler.plugins.reservation.matching import (
    PodReservationIntent,
    affinity_allows,
    exact_match,
    pod_intent,
)
from koord_scheduler.plugins.reservation.metrics import ReservationMetrics
from koord_scheduler.plugins.reservation.postfilter import affinity_failure_summary, post_filter_with_preemption
from koord_scheduler.plugins.reservation.preemption import ReservationPreemption
from koord_scheduler.plugins.reservation.report import simulation_rows
from koord_scheduler.plugins.reservation.reserve_pod import is_reserve_pod, pinned_node, reservation_name_of
from koord_scheduler.plugins.reservation.selector_index import IndexedNarrowing
from koord_scheduler.plugins.reservation.writes import ReservationWriter

NAME = names.RESERVATION
ARGS = ReservationArgs

ERR_AFFINITY_NO_MATCH = "node(s) no reservations match reservation affinity"
ERR_AFFINITY_NO_FIT = "node(s) didn't fit any reservation matching reservation affinity"
ERR_PINNED_NODE = "node(s) didn't match the nodeName specified by reservation"


@dataclass(slots=True)
class MatchState:
    """What PreFilter/BeforeFilter found for an owner pod."""

    intent: PodReservationIntent
    rows: Rows
    """Matched, matchable, allowed reservation rows."""
    chosen_positions: Positions = field(default_factory=lambda: np.empty(0, dtype=np.intp))
    chosen_rows: Rows = field(default_factory=lambda: np.empty(0, dtype=np.intp))
    """Per node (sorted positions), the reservation the pod would use there."""
    chosen_scores: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    chosen_orders: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    """Per chosen node, that reservation's score (:func:`.policy.most_allocated_scores`) and order label."""

    def chosen_at(self, position: int) -> int:
        i = int(np.searchsorted(self.chosen_positions, position))
        if i < len(self.chosen_positions) and int(self.chosen_positions[i]) == position:
            return int(self.chosen_rows[i])
        return -1


@dataclass(slots=True)
class ReserveState:
    nominated: str = ""
    """uid of the reservation nominated on the chosen node."""
    assumed: str = ""
    annotated: bool = False


MATCH_KEY: StateKey[MatchState] = StateKey("Reservation/match")
RESERVE_KEY: StateKey[ReserveState] = StateKey("Reservation/reserve")
ASSUMED_RESERVATION_KEY: StateKey[ReservationRecord] = StateKey("Reservation/assumed-reservation")
"""For a reserve pod: its reservation as it was before Reserve assumed it Available (for Unreserve)."""


class Reservation:
    """See the module docstring."""

    name = NAME

    def __init__(self, args: ReservationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.cache = ReservationCache(handle.snapshot)
        self.metrics = ReservationMetrics(handle.metrics_registry)
        self.writer = ReservationWriter(handle)
        self.accounting = ReservationAccounting(self.cache, handle, metrics=self.metrics, writer=self.writer)
        self.preemption = ReservationPreemption(args, handle) if args.enable_preemption else None
        self._ignored_resources = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        self._index = IndexedNarrowing.from_args(args.reservation_selector_index, handle.metrics_registry)

    # ----- wiring -----

    def start(self) -> None:
        handle = self.handle
        accounting = self.accounting
        handle.watch(RESERVATION_KIND, accounting.on_reservation)
        handle.watch_pods(accounting.on_pod)
        handle.register_error_handler_filters(self._on_scheduling_failure, None)
        handle.register_forget_pod_handler(accounting.on_forget_pod)
        handle.add_simulation_report(self.simulation_report)

    # ----- PreFilter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if is_reserve_pod(pod):
            node = pinned_node(pod)
            if node and node not in snapshot.positions:
                return None, unresolvable(ERR_PINNED_NODE)
            entry = self.cache.get_by_name(reservation_name_of(pod))
            if entry is not None and entry.record.pre_allocation:
                config = self.args.pre_allocation_config
                return prealloc.pre_filter(
                    state, record=entry.record, reserve_pod=pod, snapshot=snapshot, config=config, pinned=node
                )
            return (PreFilterResult(frozenset({node})), success()) if node else (None, skip())
        cache = self.cache
        if cache.num_available == 0:
            if pod.annotations.get(ANNOTATION_RESERVATION_AFFINITY) is not None:
                return None, unresolvable(ERR_AFFINITY_NO_MATCH)
            return None, skip()
        intent = pod_intent(pod)
        if intent.error:
            return None, unresolvable(intent.error)
        if intent.ignored:
            state.write(MATCH_KEY, MatchState(intent, np.empty(0, dtype=np.intp)))
            return None, success()
        rows = cache.match(pod)
        if len(rows) and self._index is not None:
            rows = self._index.narrow(intent, cache, rows)
        if len(rows) and (intent.affinity is not None or cache.needs_check[rows].any()):
            rows = self._check_affinity(intent, rows, snapshot)
        if len(rows) and intent.exact_names:
            rows = self._check_exact(intent, pod, rows)
        if len(rows) == 0:
            if intent.affinity is not None:
                return None, unresolvable(ERR_AFFINITY_NO_MATCH)
            return None, skip()
        state.write(MATCH_KEY, MatchState(intent, rows))
        if intent.affinity is not None:
            nodes = frozenset(cache.row_node[r] for r in rows.tolist())
            return PreFilterResult(nodes), success()
        return None, success()

    def _check_affinity(self, intent: PodReservationIntent, rows: Rows, snapshot: ClusterSnapshot) -> Rows:
        keep = []
        for row in rows.tolist():
            entry = self.cache.get(self.cache.row_uid[row])
            if entry is None:
                continue
            info = snapshot.node_info(entry.record.node_name)
            labels = info.node.labels if info is not None and info.node is not None else {}
            if not affinity_allows(intent.affinity, entry.record, labels):
                keep.append(row)
        return np.asarray(keep, dtype=np.intp)

    def _check_exact(self, intent: PodReservationIntent, pod: Pod, rows: Rows) -> Rows:
        keep = []
        for row in rows.tolist():
            entry = self.cache.get(self.cache.row_uid[row])
            if entry is not None and exact_match(pod.requests, entry.record.allocatable, intent.exact_names):
                keep.append(row)
        return np.asarray(keep, dtype=np.intp)

    def pre_filter_extensions(self) -> None:
        return None

    # ----- BeforeFilter: which reservation per node, and the capacity it gives back -----

    def before_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> tuple[Pod | None, Status]:
        match = state.get(MATCH_KEY)
        if match is None:
            pre = state.get(prealloc.PRE_ALLOCATION_KEY)
            entry = self.cache.get_by_name(reservation_name_of(pod)) if pre is not None else None
            if pre is not None and entry is not None:
                config = self.args.pre_allocation_config
                prealloc.before_filter(
                    state,
                    pre=pre,
                    record=entry.record,
                    reserve_pod=pod,
                    snapshot=snapshot,
                    config=config,
                    positions=positions,
                )
            return None, success()
        cache = self.cache
        if match.intent.ignored:
            pos, amounts, slots, ports = cache.node_remainders()
            state.write(RESTORED_CAPACITY, RestoredCapacity(pos, amounts, pod_slots=slots, ports=ports))
            return None, success()
        rows = match.rows
        row_pos = cache.positions()[rows]
        live = row_pos >= 0
        rows, row_pos = rows[live], row_pos[live]
        width = cache.width()
        request = snapshot.request_vector(pod)
        if len(request) < width:
            request = np.pad(request, (0, width - len(request)))
        cols = np.flatnonzero(request[:width] > 0)
        if self._ignored_resources or self._ignored_groups:
            names = snapshot.resource_names
            keep = [not policy.is_ignored(names[c], self._ignored_resources, self._ignored_groups) for c in cols]
            cols = cols[np.asarray(keep, dtype=np.bool_)]
        free = snapshot.allocatable[row_pos][:, cols] - snapshot.requested[row_pos][:, cols]
        ok = policy.usable(
            request[cols],
            free,
            cache.remainder[rows][:, cols],
            cache.allocatable[rows][:, cols],
            cache.restricted[rows],
        )
        rows, row_pos = rows[ok], row_pos[ok]
        scores = policy.most_allocated_scores(request[:width], cache.remainder[rows], cache.allocatable[rows])
        fwk = self.handle
        if fwk.reservation_filter_plugins and len(rows):
            rows, row_pos, scores = self._run_reservation_filters(
                fwk, state, pod=pod, snapshot=snapshot, rows=rows, row_pos=row_pos, scores=scores
            )
        winners = policy.nominate_per_node(row_pos, cache.order[rows], scores)
        match.chosen_positions = row_pos[winners]
        match.chosen_rows = rows[winners]
        match.chosen_scores = scores[winners]
        match.chosen_orders = cache.order[match.chosen_rows]
        chosen_rows, chosen_pos = match.chosen_rows, match.chosen_positions
        restored = RestoredCapacity(
            chosen_pos,
            cache.remainder[chosen_rows],
            pod_slots=cache.pod_slots[chosen_rows],
            ports=cache.ports_at(chosen_rows, chosen_pos),
            owners={
                pos: RestoredReservation(cache.row_uid[row], bool(cache.restricted[row]))
                for pos, row in zip(chosen_pos.tolist(), chosen_rows.tolist(), strict=True)
            },
        )
        state.write(RESTORED_CAPACITY, restored)
        return None, success()

    def _run_reservation_filters(
        self,
        fwk: Handle,
        state: CycleState,
        *,
        pod: Pod,
        snapshot: ClusterSnapshot,
        rows: Rows,
        row_pos: Positions,
        scores: IntArray,
    ) -> tuple[Rows, Positions, IntArray]:
        keep = np.ones(len(rows), dtype=np.bool_)
        for i, (row, pos) in enumerate(zip(rows.tolist(), row_pos.tolist(), strict=True)):
            entry = self.cache.get(self.cache.row_uid[row])
            if (
                entry is None
                or not fwk.run_reservation_filter_plugins(state, pod, entry, snapshot.info(pos)).is_success
            ):
                keep[i] = False
        return rows[keep], row_pos[keep], scores[keep]

    # ----- Filter -----

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        match = state.get(MATCH_KEY)
        pre = state.get(prealloc.PRE_ALLOCATION_KEY)
        if pre is not None:
            return prealloc.filter_nodes(pre, positions)
        if match is None or match.intent.affinity is None:
            return NodeFilterResult.all_pass(len(positions))
        passed = np.isin(positions, match.chosen_positions)
        return NodeFilterResult.from_mask(passed, unschedulable(ERR_AFFINITY_NO_FIT))

    # ----- PostFilter -----

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        return post_filter_with_preemption(
            self.preemption, self.cache, state, pod, snapshot=self.handle.snapshot, diagnosis=diagnosis
        )

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        match = state.get(MATCH_KEY)
        if match is None or len(match.chosen_positions) == 0:
            return skip()
        return success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        match = state.get(MATCH_KEY)
        if match is None or len(match.chosen_positions) == 0:
            return np.zeros(len(positions), dtype=np.int64)
        return policy.node_scores(
            positions,
            match.chosen_positions,
            chosen_orders=match.chosen_orders,
            chosen_scores=match.chosen_scores,
        )

    def score_extensions(self) -> None:
        return None

    # ----- reservation score (ReservationScorePlugin) -----

    def score_reservation(self, state: CycleState, pod: Pod, reservation: Any, node_name: str) -> int:
        if not isinstance(reservation, ReservationEntry) or reservation.row < 0:
            return 0
        cache = self.cache
        request = cache.vector({k: v for k, v in pod.requests.items() if k != "pods"})
        row = reservation.row
        return int(
            policy.most_allocated_scores(request, cache.remainder[row : row + 1], cache.allocatable[row : row + 1])[0]
        )

    # ----- nomination -----

    def nominate_reservation(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        match = state.get(MATCH_KEY)
        if match is None or match.intent.ignored or is_reserve_pod(pod):
            return success()
        pos = self.handle.snapshot.positions.get(node_name)
        row = -1 if pos is None else match.chosen_at(pos)
        if row < 0:
            if match.intent.affinity is not None:
                return unschedulable(ERR_AFFINITY_NO_FIT)
            return success()
        state.write(RESERVE_KEY, ReserveState(nominated=self.cache.row_uid[row]))
        return success()

    # ----- Reserve / Unreserve -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if is_reserve_pod(pod):
            return self._assume_reservation(state, pod, node_name)
        reserve = state.get(RESERVE_KEY)
        if reserve is None or not reserve.nominated:
            return success()
        entry = self.cache.get(reserve.nominated)
        if entry is None or not entry.record.is_available or entry.exhausted or entry.record.node_name != node_name:
            return unschedulable("reservation nominated for the pod is no longer available")
        self.accounting.assume_owner(entry, pod)
        reserve.assumed = reserve.nominated
        return success()

    def _assume_reservation(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Koordinator's ``assumeReservation`` (:meth:`.ReservationAccounting.assume_reservation`)."""
        pending = self.accounting.assume_reservation(pod, node_name)
        if pending is not None:
            state.write(ASSUMED_RESERVATION_KEY, pending)
        entry = self.cache.get_by_name(reservation_name_of(pod))
        if entry is not None:
            prealloc.adopt(state, self.accounting, entry, self.handle.snapshot.positions.get(node_name))
        return success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        prealloc.release(state, self.accounting)
        pending = state.get(ASSUMED_RESERVATION_KEY)
        if pending is not None:
            state.delete(ASSUMED_RESERVATION_KEY)
            self.accounting.restore_pending(pending)
            return
        reserve = state.get(RESERVE_KEY)
        if reserve is None or not reserve.assumed:
            return
        self.accounting.unassume(reserve.assumed, pod.key)
        if reserve.annotated:
            self.writer.remove_allocated(pod)
        reserve.assumed = ""
        reserve.annotated = False

    # ----- PreBind / Bind -----

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if is_reserve_pod(pod):
            entry = self.cache.get_by_name(reservation_name_of(pod))
            pre = state.get(prealloc.PRE_ALLOCATION_KEY)
            if pre is not None and entry is not None and pre.adopted:
                await self.writer.annotate_adopted(pre.adopted, allocated_annotation(entry.record.name, entry.uid))
            if entry is not None:
                return await self.handle.run_pre_bind_reservation(state, entry, node_name)
            return success()
        reserve = state.get(RESERVE_KEY)
        if reserve is None or not reserve.assumed:
            return success()
        entry = self.cache.get(reserve.assumed)
        if entry is None:
            return success()
        await self.writer.annotate_allocated(state, pod, allocated_annotation(entry.record.name, entry.uid))
        reserve.annotated = True
        return success()

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if not is_reserve_pod(pod):
            return skip()
        await self.writer.write_available(reservation_name_of(pod), node_name, pod.requests)
        return success()

    # ----- failures of reserve pods -----

    def _on_scheduling_failure(self, qpi: QueuedPodInfo, status: Status) -> bool:
        """Pre error-handler filter: write the reserve pod's failure into its Reservation; the default
        handler still requeues it with backoff (returns False)."""
        pod = qpi.pod
        if not is_reserve_pod(pod):
            if ANNOTATION_RESERVATION_AFFINITY in pod.annotations:
                summary = affinity_failure_summary(self.cache, pod, self.handle.snapshot)
                self.writer.report_owner_unschedulable(pod, summary)
            return False
        name = reservation_name_of(pod)
        entry = self.cache.get_by_name(name)
        self.writer.report_unschedulable(entry.record if entry is not None else None, name, status.message)
        return False

    # ----- queueing hints -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.RESERVATION, ActionType.ADD | ActionType.UPDATE)),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)),
        )

    # ----- reporting -----

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        return "Reservations", simulation_rows(self.cache, self.writer.reported_invalid)

    @property
    def selector_index(self) -> IndexedNarrowing | None:
        """``reservationSelectorIndex`` when enabled."""
        return self._index

    def api_routes(self) -> Sequence[ApiRoute]:
        """``/apis/v1/plugins/Reservation/nodeReservations/:nodeName`` and ``/reservationSelectorIndex``
        (:mod:`.service`)."""
        return service.routes(self)

    async def drain(self) -> None:
        """Wait for in-flight status writes (tests and simulate)."""
        await self.writer.drain()
        if self.preemption is not None:
            await self.preemption.drain()


def new(args: ReservationArgs | None, handle: Handle) -> Reservation:
    """Factory: the plugin starts watching Reservations and pods through ``handle``."""
    args = args if args is not None else ReservationArgs()
    plugin = Reservation(args, handle)
    plugin.start()
    return plugin


def declared_capabilities(
    plugin: Reservation,
) -> tuple[
    PreFilterPlugin,
    BatchFilterPlugin,
    PostFilterPlugin,
    PreScorePlugin,
    BatchScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    BindPlugin,
    EnqueueExtensions,
    FilterTransformer,
    ReservationNominator,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin


_services: type[APIServiceProvider] = Reservation
"""The ``/apis/v1`` routes (not one of the framework's extension points, so not in the list above)."""
