"""The informer side of the ``migration`` controller (:class:`JobIndexing`): the jobs, pods and
Reservations it has seen, which jobs each pod and Reservation concerns, the pods of the jobs that count as
migrating, and the dirty marks and timers that say which jobs to look at next. Event methods run on the
event-loop thread (the informers' handlers); nothing here talks to the API server."""

from __future__ import annotations

import asyncio
from typing import Any, Final

from apis.core.types import Node, Pod
from apis.scheduling.migration import KIND, PodMigrationJobRecord
from apis.scheduling.record import ReservationRecord
from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.descheduler.migration.arbitration import (
    ANNOTATION_PASSED_ARBITRATION,
    MigratingIndex,
    controller_uid,
)
from koord_scheduler.framework.types import EventType

RESERVATION_KIND: Final = "Reservation"


def pod_key(namespace: str, name: str) -> str:
    """``namespace/name``: how pods are keyed here (as the informers key them)."""
    return f"{namespace}/{name}"


class JobIndexing:
    """What the informers showed, indexed for the controller (:class:`~.controller.MigrationController`)."""

    loop: ReconcileLoop
    """Woken when a job is marked dirty (set by the controller)."""

    def __init__(self) -> None:
        self.jobs: dict[str, PodMigrationJobRecord] = {}
        self.pods: dict[str, Pod] = {}
        self.reservations: dict[str, ReservationRecord] = {}
        self.dirty: set[str] = set()
        self._by_pod: dict[str, set[str]] = {}
        self._by_reservation: dict[str, set[str]] = {}
        self._watched: dict[str, tuple[set[str], str]] = {}
        """job -> (pod keys, reservation name) it is indexed under."""
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._passed: set[str] = set()
        """Jobs an arbitration pass let through: by this leader, or marked so by an earlier one."""
        self._unmarked: set[str] = set()
        """Passed jobs whose ``passed-arbitration`` annotation is not written yet (written before they go on)."""
        self._refused: dict[str, str] = {}
        """Jobs an arbitration pass refused -> why."""
        self.migrating = MigratingIndex()
        """The pods of the unfinished Running jobs, kept as jobs and pods change (arbitration reads it)."""
        self._by_owner: dict[str, set[str]] = {}
        """controller UID -> keys of the pods it owns."""

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        return None

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        pod = new if new is not None else old
        if pod is None:
            return
        key = pod.key
        owner = controller_uid(pod)
        if new is None or event == EventType.DELETED:
            self.pods.pop(key, None)
            if owner and owner in self._by_owner:
                self._by_owner[owner].discard(key)
                if not self._by_owner[owner]:
                    del self._by_owner[owner]
        else:
            self.pods[key] = new
            if owner:
                self._by_owner.setdefault(owner, set()).add(key)
        for name in self._by_pod.get(key, ()):
            self._refresh_migrating(name)
            self._mark(name)

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind == KIND:
            job: PodMigrationJobRecord = new if new is not None else old
            if new is None or event == EventType.DELETED:
                self._forget_job(job.name)
            else:
                self._set_job(new)
        elif kind == RESERVATION_KIND:
            record: ReservationRecord = new if new is not None else old
            if new is None or event == EventType.DELETED:
                self.reservations.pop(record.name, None)
            else:
                self.reservations[record.name] = new
            for name in list(self._by_reservation.get(record.name, ())):
                self._index(name)
                self._mark(name)

    def _set_job(self, job: PodMigrationJobRecord) -> None:
        self.jobs[job.name] = job
        if job.annotations.get(ANNOTATION_PASSED_ARBITRATION) == "true":
            self._passed.add(job.name)
            self._unmarked.discard(job.name)
        self._index(job.name)
        self._refresh_migrating(job.name)
        self._mark(job.name)

    def _forget_job(self, name: str) -> None:
        self.jobs.pop(name, None)
        self._passed.discard(name)
        self._unmarked.discard(name)
        self._refused.pop(name, None)
        self.migrating.put(name, None)
        self._unindex(name)
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    def _pod_keys(self, job: PodMigrationJobRecord) -> set[str]:
        keys = {pod_key(job.pod_namespace, job.pod_name)}
        if job.new_pod is not None:
            keys.add(pod_key(job.new_pod[0], job.new_pod[1]))
        r = self.reservations.get(job.reservation_name) if job.reservation_name else None
        if r is not None:
            keys.update(pod_key(ns, name) for ns, name, _ in r.current_owners)
        return keys

    def _index(self, name: str) -> None:
        self._unindex(name)
        job = self.jobs.get(name)
        if job is None:
            return
        keys = self._pod_keys(job)
        for key in keys:
            self._by_pod.setdefault(key, set()).add(name)
        if job.reservation_name:
            self._by_reservation.setdefault(job.reservation_name, set()).add(name)
        self._watched[name] = (keys, job.reservation_name)

    def _unindex(self, name: str) -> None:
        keys, reservation = self._watched.pop(name, (set(), ""))
        for key in keys:
            names = self._by_pod.get(key)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._by_pod[key]
        if reservation:
            names = self._by_reservation.get(reservation)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._by_reservation[reservation]

    def _mark(self, name: str) -> None:
        self.dirty.add(name)
        self.loop.wake()

    def _mark_later(self, name: str, seconds: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        now = loop.time()
        timer = self._timers.get(name)
        if timer is not None and not timer.cancelled() and timer.when() <= now + seconds:
            return
        if timer is not None:
            timer.cancel()
        self._timers[name] = loop.call_later(seconds, self._timer_fired, name)

    def _timer_fired(self, name: str) -> None:
        self._timers.pop(name, None)
        self._mark(name)

    def workload_pods(self, pod: Pod) -> list[Pod]:
        """The pods (as the informer has them) of ``pod``'s controller; empty for a bare pod."""
        owner = controller_uid(pod)
        keys = self._by_owner.get(owner, ()) if owner else ()
        return [p for p in (self.pods.get(k) for k in keys) if p is not None]

    def _refresh_migrating(self, name: str) -> None:
        """Keep :attr:`migrating` (the pods of unfinished Running jobs) up to date for one job."""
        job = self.jobs.get(name)
        pod = None
        if job is not None and (job.phase == "Running" or name in self._passed) and not job.finished:
            pod = self.pods.get(pod_key(job.pod_namespace, job.pod_name))
        self.migrating.put(name, pod)
