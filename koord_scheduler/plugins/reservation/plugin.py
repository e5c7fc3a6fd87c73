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
  node's free capacity. Score gives 100 to those nodes (the profile weights it, 5000 in Koordinator's
  chart). Nomination picks the node's winner; Reserve assumes the pod into it; PreBind writes the
  ``reservation-allocated`` annotation; Unreserve undoes both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from apis.config.reservation_args import ReservationArgs
from apis.core.frozendict import FrozenDict
from apis.core.quantity import format_quantity
from apis.core.types import Pod
from apis.scheduling import (
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_ALLOCATED,
    CONDITION_READY,
    CONDITION_SCHEDULED,
    GROUP,
    PHASE_AVAILABLE,
    REASON_AVAILABLE,
    REASON_SCHEDULED,
    REASON_UNSCHEDULABLE,
    VERSION,
    ReservationRecord,
    parse_reservation,
)
from apis.scheduling.annotations import allocated_annotation, parse_allocated_annotation
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.handle import ExtendedHandle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterTransformer,
    FrameworkAware,
    FrameworkRunner,
    PostFilterPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservationNominator,
    ReservePlugin,
)
from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Status, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    EventType,
    NodeFilterResult,
    ObjectKind,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.reservation import policy
from koord_scheduler.plugins.reservation.cache import ReservationCache, ReservationEntry, Rows
from koord_scheduler.plugins.reservation.matching import (
    PodReservationIntent,
    affinity_allows,
    pod_intent,
)
from koord_scheduler.plugins.reservation.metrics import ReservationMetrics
from koord_scheduler.plugins.reservation.postfilter import reservation_post_filter
from koord_scheduler.plugins.reservation.reserve_pod import (
    is_reserve_pod,
    new_reserve_pod,
    pinned_node,
    reservation_name_of,
)

log = logging.getLogger(__name__)

NAME = names.RESERVATION
ARGS = ReservationArgs

RESERVATION_KIND = ObjectKind(
    kind="Reservation",
    group=GROUP,
    version=VERSION,
    plural="reservations",
    namespaced=False,
    parse=parse_reservation,
)

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

    def __init__(self, args: ReservationArgs, handle: ExtendedHandle) -> None:
        self.args = args
        self.handle = handle
        self.cache = ReservationCache(handle.snapshot)
        self.metrics = ReservationMetrics(handle.metrics_registry)
        self._framework: FrameworkRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reported_invalid: dict[str, str] = {}
        self._queued: dict[str, Pod] = {}
        """Reservation uid -> reserve pod put in the queue."""

    # ----- wiring -----

    def bind_framework(self, framework: FrameworkRunner) -> None:
        self._framework = framework

    def start(self) -> None:
        handle = self.handle
        handle.watch(RESERVATION_KIND, self.on_reservation)
        handle.watch_pods(self.on_pod)
        handle.register_error_handler_filters(self._on_scheduling_failure, None)
        handle.register_forget_pod_handler(self._on_forget_pod)
        handle.add_simulation_report(self.simulation_report)

    # ----- reservation events -----

    def on_reservation(self, event: EventType, old: ReservationRecord | None, new: ReservationRecord | None) -> None:
        if event == EventType.DELETED or new is None:
            gone = old or new
            if gone is not None:
                self._forget(gone.uid or gone.name)
                self.metrics.remove(gone.name)
            return
        uid = new.uid or new.name
        if not new.is_valid:
            self._forget(uid)
            self._report_invalid(new)
            self.metrics.set_phase(new.name, new.phase)
            return
        if new.is_terminated:
            self._forget(uid)
            self.metrics.set_phase(new.name, new.phase)
            return
        try:
            reserve_pod = new_reserve_pod(new)
        except ValueError as exc:
            self._forget(uid)
            self._report_invalid(new, f"invalid Reservation template: {exc}")
            return
        entry = self.cache.get(uid)
        before = entry.holding if entry is not None else None
        entry = self.cache.upsert(new, reserve_pod)
        if new.is_available:
            queued = self._queued.pop(uid, None)
            if queued is not None:
                self.handle.dequeue_pod(queued)
            self._apply_holding(before, entry)
        else:
            if before is not None:
                self.handle.unaccount_pod(before)
            if self._queued.get(uid) != reserve_pod:
                self._queued[uid] = reserve_pod
                self.handle.enqueue_pod(reserve_pod)
        self.metrics.update(entry)

    # ----- owner pod events -----

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        """Keep each reservation's allocated amount and held remainder true as its owner pods come and go
        (bound into it, deleted, finished, moved to another reservation), without waiting for the
        controller to rewrite the status. Pods without the annotation cost one dictionary probe."""
        before = self._owner_of(old)
        after = None if event == EventType.DELETED else self._owner_of(new)
        if before == after and (before is None or old is None or new is None or old.requests == new.requests):
            return
        touched: list[ReservationEntry | None] = []
        if before is not None and old is not None:
            touched.append(self.cache.owner_left(before, old))
        if after is not None and new is not None:
            touched.append(self.cache.owner_bound(after, new))
        for entry in touched:
            if entry is not None:
                held = entry.holding
                self.cache.refresh(entry)
                self._apply_holding(held, entry)
                self.metrics.update(entry)

    def _owner_of(self, pod: Pod | None) -> str | None:
        """uid of the reservation ``pod`` holds: bound, not finished, annotated with it."""
        if pod is None or ANNOTATION_RESERVATION_ALLOCATED not in pod.annotations:
            return None
        if not pod.node_name or pod.is_terminal:
            return None
        ref = parse_allocated_annotation(pod.annotations)
        if ref is None:
            return None
        name, uid = ref
        return uid or self.cache.by_name.get(name)

    def _forget(self, uid: str) -> None:
        entry = self.cache.remove(uid)
        if entry is not None and entry.holding is not None:
            self.handle.unaccount_pod(entry.holding)
        queued = self._queued.pop(uid, None)
        if queued is not None:
            self.handle.dequeue_pod(queued)

    def _apply_holding(self, before: Pod | None, entry: ReservationEntry) -> None:
        after = entry.holding
        if before is not None and (after is None or after.key != before.key or after.node_name != before.node_name):
            self.handle.unaccount_pod(before)
        if after is not None and after != before:
            self.handle.account_pod(after)

    def _report_invalid(self, record: ReservationRecord, message: str = "") -> None:
        message = message or record.invalid
        if self._reported_invalid.get(record.name) == message:
            return
        self._reported_invalid[record.name] = message
        log.warning("reservation %s is invalid: %s", record.name, message)
        cond = record.condition(CONDITION_SCHEDULED)
        patch = None
        if cond is None or cond[3] != message:
            patch = {
                "status": {"conditions": [_condition(CONDITION_SCHEDULED, "False", REASON_UNSCHEDULABLE, message)]}
            }
        self._spawn(self._write_invalid(record.name, message, patch))

    async def _write_invalid(self, name: str, message: str, patch: Mapping[str, Any] | None) -> None:
        cluster = self.handle.cluster
        await cluster.record_event(RESERVATION_KIND, name, type="Warning", reason="InvalidReservation", message=message)
        if patch is not None:
            await cluster.patch_object_status(RESERVATION_KIND, name, patch)

    # ----- PreFilter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if is_reserve_pod(pod):
            node = pinned_node(pod)
            if node:
                if node not in snapshot.positions:
                    return None, unresolvable(ERR_PINNED_NODE)
                return PreFilterResult(frozenset({node})), success()
            return None, skip()
        cache = self.cache
        if cache.num_available == 0:
            if pod.annotations.get(ANNOTATION_RESERVATION_AFFINITY) is not None:
                return None, unresolvable(ERR_AFFINITY_NO_MATCH)
            return None, skip()
        intent = pod_intent(pod)
        if intent.affinity_error:
            return None, unresolvable(intent.affinity_error)
        if intent.ignored:
            state.write(MATCH_KEY, MatchState(intent, np.empty(0, dtype=np.intp)))
            return None, success()
        rows = cache.match(pod)
        if len(rows) and (intent.affinity is not None or cache.needs_check[rows].any()):
            rows = self._check_affinity(intent, rows, snapshot)
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

    def pre_filter_extensions(self) -> None:
        return None

    # ----- BeforeFilter: which reservation per node, and the capacity it gives back -----

    def before_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> tuple[Pod | None, Status]:
        match = state.get(MATCH_KEY)
        if match is None:
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
        fwk = self._framework
        if fwk is not None and fwk.reservation_filter_plugins and len(rows):
            rows, row_pos, scores = self._run_reservation_filters(
                fwk, state, pod=pod, snapshot=snapshot, rows=rows, row_pos=row_pos, scores=scores
            )
        winners = policy.nominate_per_node(row_pos, cache.order[rows], scores)
        match.chosen_positions = row_pos[winners]
        match.chosen_rows = rows[winners]
        chosen_rows, chosen_pos = match.chosen_rows, match.chosen_positions
        restored = RestoredCapacity(
            chosen_pos,
            cache.remainder[chosen_rows],
            pod_slots=cache.pod_slots[chosen_rows],
            ports=cache.ports_at(chosen_rows, chosen_pos),
        )
        state.write(RESTORED_CAPACITY, restored)
        return None, success()

    def _run_reservation_filters(
        self,
        fwk: FrameworkRunner,
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
        if match is None or match.intent.affinity is None:
            return NodeFilterResult.all_pass(len(positions))
        passed = np.isin(positions, match.chosen_positions)
        return NodeFilterResult.from_mask(passed, unschedulable(ERR_AFFINITY_NO_FIT))

    # ----- PostFilter -----

    def post_filter(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        return None, reservation_post_filter(self.cache, pod, self.handle.snapshot, diagnosis)

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
        scores: IntArray = np.where(np.isin(positions, match.chosen_positions), policy.MAX_RESERVATION_SCORE, 0)
        return scores.astype(np.int64)

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
        before = entry.holding
        self.cache.assume(reserve.nominated, pod)
        self._apply_holding(before, entry)
        reserve.assumed = reserve.nominated
        self.metrics.update(entry)
        return success()

    def _assume_reservation(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Koordinator's ``assumeReservation``: the reservation is Available on ``node_name`` from now on
        for owner pods, before its status is written (binding is asynchronous)."""
        entry = self.cache.get_by_name(reservation_name_of(pod))
        if entry is None or entry.record.is_available:
            return success()
        pending = entry.record
        allocatable = FrozenDict({k: v for k, v in pod.requests.items() if k != "pods"})
        assumed = replace(pending, phase=PHASE_AVAILABLE, node_name=node_name, allocatable=allocatable)
        self.cache.upsert(assumed, entry.reserve_pod)
        self._apply_holding(None, entry)
        state.write(ASSUMED_RESERVATION_KEY, pending)
        return success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        pending = state.get(ASSUMED_RESERVATION_KEY)
        if pending is not None:
            state.delete(ASSUMED_RESERVATION_KEY)
            entry = self.cache.get(pending.uid or pending.name)
            if entry is not None and entry.record.resource_version == pending.resource_version:
                before = entry.holding
                self.cache.upsert(pending, entry.reserve_pod)
                if before is not None:
                    self.handle.unaccount_pod(before)
            return
        reserve = state.get(RESERVE_KEY)
        if reserve is None or not reserve.assumed:
            return
        self._unassume(reserve.assumed, pod.key)
        if reserve.annotated:
            self._spawn(
                self.handle.cluster.patch_pod_metadata(pod, annotations={ANNOTATION_RESERVATION_ALLOCATED: None})
            )
        reserve.assumed = ""
        reserve.annotated = False

    def _unassume(self, uid: str, pod_key: str) -> None:
        entry = self.cache.get(uid)
        if entry is None:
            return
        before = entry.holding
        if self.cache.unassume(uid, pod_key) is not None:
            self._apply_holding(before, entry)
            self.metrics.update(entry)

    def _on_forget_pod(self, pod: Pod) -> None:
        for entry in self.cache:
            if pod.key in entry.assumed:
                self._unassume(entry.uid, pod.key)

    # ----- PreBind / Bind -----

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if is_reserve_pod(pod):
            entry = self.cache.get_by_name(reservation_name_of(pod))
            if self._framework is not None and entry is not None:
                return await self._framework.run_pre_bind_reservation(state, entry, node_name)
            return success()
        reserve = state.get(RESERVE_KEY)
        if reserve is None or not reserve.assumed:
            return success()
        entry = self.cache.get(reserve.assumed)
        if entry is None:
            return success()
        annotation = allocated_annotation(entry.record.name, entry.uid)
        await self.handle.cluster.patch_pod_metadata(pod, annotations={ANNOTATION_RESERVATION_ALLOCATED: annotation})
        reserve.annotated = True
        return success()

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if not is_reserve_pod(pod):
            return skip()
        name = reservation_name_of(pod)
        allocatable = {k: format_quantity(k, v) for k, v in sorted(pod.requests.items()) if k != "pods"}
        body = {
            "status": {
                "phase": PHASE_AVAILABLE,
                "nodeName": node_name,
                "allocatable": allocatable,
                "conditions": [
                    _condition(CONDITION_SCHEDULED, "True", REASON_SCHEDULED, "Reservation is scheduled"),
                    _condition(CONDITION_READY, "True", REASON_AVAILABLE, "Reservation is available"),
                ],
            }
        }
        await self.handle.cluster.patch_object_status(RESERVATION_KIND, name, body)
        self._spawn(
            self.handle.cluster.record_event(
                RESERVATION_KIND,
                name,
                type="Normal",
                reason="Scheduled",
                message=f"Successfully assigned reservation {name} to {node_name}",
            )
        )
        return success()

    # ----- failures of reserve pods -----

    def _on_scheduling_failure(self, qpi: QueuedPodInfo, status: Status) -> bool:
        """Pre error-handler filter: write the reserve pod's failure into its Reservation; the default
        handler still requeues it with backoff (returns False)."""
        pod = qpi.pod
        if not is_reserve_pod(pod):
            if ANNOTATION_RESERVATION_AFFINITY in pod.annotations:
                message = self.affinity_failure_summary(pod)
                self._spawn(
                    self.handle.cluster.record_event(
                        None,
                        pod.name,
                        namespace=pod.namespace,
                        type="Warning",
                        reason="FailedScheduling",
                        message=message,
                    )
                )
            return False
        name = reservation_name_of(pod)
        entry = self.cache.get_by_name(name)
        message = status.message
        if entry is not None:
            cond = entry.record.condition(CONDITION_SCHEDULED)
            if cond is not None and cond[1:] == ("False", REASON_UNSCHEDULABLE, message):
                return False
        patch = {"status": {"conditions": [_condition(CONDITION_SCHEDULED, "False", REASON_UNSCHEDULABLE, message)]}}
        self._spawn(self._write_failure(name, message, patch))
        return False

    def affinity_failure_summary(self, pod: Pod) -> str:
        """Why none of the Available reservations took ``pod`` (which has reservation affinity), counted
        per reason: owner, allocated once, affinity/taints, else it did not fit."""
        cache = self.cache
        intent = pod_intent(pod)
        owned = cache.owner_index.match(pod)
        snapshot = self.handle.snapshot
        reasons: dict[str, int] = {}
        total = 0
        for entry in cache:
            if entry.row < 0:
                continue
            total += 1
            if entry.uid not in owned:
                reason = "didn't match owner"
            elif entry.exhausted:
                reason = "is allocated"
            else:
                info = snapshot.node_info(entry.record.node_name)
                labels = info.node.labels if info is not None and info.node is not None else {}
                reason = affinity_allows(intent.affinity, entry.record, labels) or "didn't fit the pod"
            reasons[reason] = reasons.get(reason, 0) + 1
        return policy.reservations_summary(total, reasons)

    async def _write_failure(self, name: str, message: str, patch: Mapping[str, Any]) -> None:
        cluster = self.handle.cluster
        await cluster.record_event(RESERVATION_KIND, name, type="Warning", reason="FailedScheduling", message=message)
        await cluster.patch_object_status(RESERVATION_KIND, name, patch)

    # ----- queueing hints -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.RESERVATION, ActionType.ADD | ActionType.UPDATE)),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)),
        )

    # ----- reporting -----

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        rows = []
        for entry in sorted(self.cache, key=lambda e: e.record.name):
            rec = entry.record
            rows.append(
                {
                    "reservation": rec.name,
                    "node": rec.node_name or None,
                    "phase": "Succeeded" if entry.exhausted else rec.phase,
                    "owners": entry.owners(),
                    "allocatable": _fmt(entry.allocatable),
                    "allocated": _fmt(entry.allocated()),
                }
            )
        for name, message in sorted(self._reported_invalid.items()):
            if self.cache.get_by_name(name) is None:
                rows.append(
                    {
                        "reservation": name,
                        "node": None,
                        "phase": "Invalid",
                        "owners": [],
                        "allocatable": message,
                        "allocated": "",
                    }
                )
        return "Reservations", rows

    # ----- helpers -----

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            return
        task = loop.create_task(_logged(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for in-flight status writes (tests and simulate)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


async def _logged(coro: Coroutine[Any, Any, Any]) -> None:
    try:
        await coro
    except Exception as exc:
        log.warning("reservation write failed: %s", exc)


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def _fmt(amounts: Mapping[str, int]) -> str:
    return ",".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(amounts.items()) if v)


def new(args: ReservationArgs | None, handle: ExtendedHandle) -> Reservation:
    """Factory: the plugin starts watching Reservations and pods through ``handle``."""
    args = args if args is not None else ReservationArgs()
    plugin = Reservation(args, handle)
    plugin.start()
    return plugin


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = Reservation
    _before_filter: type[FilterTransformer] = Reservation
    _filter: type[BatchFilterPlugin] = Reservation
    _post_filter: type[PostFilterPlugin] = Reservation
    _pre_score: type[PreScorePlugin] = Reservation
    _score: type[BatchScorePlugin] = Reservation
    _reserve: type[ReservePlugin] = Reservation
    _pre_bind: type[PreBindPlugin] = Reservation
    _nominator: type[ReservationNominator] = Reservation
    _framework_aware: type[FrameworkAware] = Reservation
    _enqueue: type[EnqueueExtensions] = Reservation
