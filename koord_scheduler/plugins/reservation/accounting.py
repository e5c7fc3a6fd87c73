"""The Reservation plugin's informer handlers and cache accounting.

- **Reservation events** (:meth:`ReservationAccounting.on_reservation`): a pending Reservation goes into
  the scheduling queue as its reserve pod (:mod:`.reserve_pod`); an Available one holds its unallocated
  remainder (and host ports) on its node through ``handle.account_pod``; an invalid one is reported
  (:mod:`.writes`); a terminated or deleted one is forgotten.
- **Owner pod events** (:meth:`ReservationAccounting.on_pod`): each reservation's allocated amount and
  held remainder follow the pods annotated ``reservation-allocated`` with it as they are bound, deleted,
  finished or moved to another reservation, without waiting for the controller to rewrite the status.
- **Assume and forget**: Reserve assumes a pod into its nominated reservation (or, for a reserve pod,
  the reservation Available on the chosen node); Unreserve and forgotten pods undo that.

Every change of what a reservation holds goes through :meth:`ReservationAccounting.apply_holding`, so the
snapshot's accounting always equals the cache's ``holding`` pods, and through the phase/resource metrics.
"""

from __future__ import annotations

from dataclasses import replace

from apis.core.frozendict import FrozenDict
from apis.core.types import Pod
from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED, PHASE_AVAILABLE, ReservationRecord
from apis.scheduling.annotations import parse_allocated_annotation
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.reservation.cache import ReservationCache, ReservationEntry
from koord_scheduler.plugins.reservation.metrics import ReservationMetrics
from koord_scheduler.plugins.reservation.reserve_pod import new_reserve_pod, reservation_name_of
from koord_scheduler.plugins.reservation.writes import ReservationWriter


class ReservationAccounting:
    """See the module docstring."""

    def __init__(
        self,
        cache: ReservationCache,
        handle: Handle,
        *,
        metrics: ReservationMetrics,
        writer: ReservationWriter,
    ) -> None:
        self.cache = cache
        self._handle = handle
        self._metrics = metrics
        self._writer = writer
        self._queued: dict[str, Pod] = {}
        """Reservation uid -> reserve pod put in the queue."""

    # ----- reservation events -----

    def on_reservation(self, event: EventType, old: ReservationRecord | None, new: ReservationRecord | None) -> None:
        if event == EventType.DELETED or new is None:
            gone = old or new
            if gone is not None:
                self._writer.observe(gone.name, None)
                self._forget(gone.uid or gone.name)
                self._metrics.remove(gone.name)
            return
        self._writer.observe(new.name, new)
        uid = new.uid or new.name
        if not new.is_valid:
            self._forget(uid)
            self._writer.report_invalid(new)
            self._metrics.set_phase(new.name, new.phase)
            return
        if new.is_terminated:
            self._forget(uid)
            self._metrics.set_phase(new.name, new.phase)
            return
        try:
            reserve_pod = new_reserve_pod(new)
        except ValueError as exc:
            self._forget(uid)
            self._writer.report_invalid(new, f"invalid Reservation template: {exc}")
            return
        entry = self.cache.get(uid)
        before = entry.holding if entry is not None else None
        entry = self.cache.upsert(new, reserve_pod)
        if new.is_available:
            queued = self._queued.pop(uid, None)
            if queued is not None:
                self._handle.dequeue_pod(queued)
            self.apply_holding(before, entry)
        else:
            if before is not None:
                self._handle.unaccount_pod(before)
            if self._queued.get(uid) != reserve_pod:
                self._queued[uid] = reserve_pod
                self._handle.enqueue_pod(reserve_pod)
        self._metrics.update(entry)

    def _forget(self, uid: str) -> None:
        entry = self.cache.remove(uid)
        if entry is not None and entry.holding is not None:
            self._handle.unaccount_pod(entry.holding)
        queued = self._queued.pop(uid, None)
        if queued is not None:
            self._handle.dequeue_pod(queued)

    # ----- owner pod events -----

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        """Pods without the ``reservation-allocated`` annotation cost one dictionary probe."""
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
                self.apply_holding(held, entry)
                self._metrics.update(entry)

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

    # ----- assume and forget -----

    def assume_owner(self, entry: ReservationEntry, pod: Pod) -> None:
        """Reserve: ``pod`` takes its share of the reservation of ``entry``."""
        before = entry.holding
        self.cache.assume(entry.uid, pod)
        self.apply_holding(before, entry)
        self._metrics.update(entry)

    def assume_reservation(self, reserve_pod: Pod, node_name: str) -> ReservationRecord | None:
        """Reserve of a reserve pod (Koordinator's ``assumeReservation``): its reservation is Available on
        ``node_name`` from now on for owner pods, before its status is written (binding is
        asynchronous). Returns the record as it was, for :meth:`restore_pending`; None when there was
        nothing to assume (unknown, or already Available)."""
        entry = self.cache.get_by_name(reservation_name_of(reserve_pod))
        if entry is None or entry.record.is_available:
            return None
        pending = entry.record
        allocatable = FrozenDict({k: v for k, v in reserve_pod.requests.items() if k != "pods"})
        assumed = replace(pending, phase=PHASE_AVAILABLE, node_name=node_name, allocatable=allocatable)
        self.cache.upsert(assumed, entry.reserve_pod)
        self.apply_holding(None, entry)
        return pending

    def restore_pending(self, pending: ReservationRecord) -> None:
        """Unreserve of a reserve pod: its reservation is ``pending`` again, unless it changed since."""
        entry = self.cache.get(pending.uid or pending.name)
        if entry is not None and entry.record.resource_version == pending.resource_version:
            before = entry.holding
            self.cache.upsert(pending, entry.reserve_pod)
            if before is not None:
                self._handle.unaccount_pod(before)

    def unassume(self, uid: str, pod_key: str) -> None:
        """Unreserve: the pod ``pod_key`` no longer holds part of reservation ``uid``."""
        entry = self.cache.get(uid)
        if entry is None:
            return
        before = entry.holding
        if self.cache.unassume(uid, pod_key) is not None:
            self.apply_holding(before, entry)
            self._metrics.update(entry)

    def on_forget_pod(self, pod: Pod) -> None:
        """An assumed pod the scheduler dropped: out of every reservation it was assumed into."""
        for entry in self.cache:
            if pod.key in entry.assumed:
                self.unassume(entry.uid, pod.key)

    def apply_holding(self, before: Pod | None, entry: ReservationEntry) -> None:
        """Make the snapshot's accounting follow ``entry.holding`` (it held ``before`` until now)."""
        after = entry.holding
        handle = self._handle
        if before is not None and (after is None or after.key != before.key or after.node_name != before.node_name):
            handle.unaccount_pod(before)
        if after is not None and after != before:
            handle.account_pod(after)
