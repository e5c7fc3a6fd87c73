"""The ``migration`` controller: runs PodMigrationJobs (Koordinator's MigrationController), on the leader.

It reads the scheduler's Pod watch plus PodMigrationJobs and Reservations (its own watches when the
scheduler does not keep them). An event marks the jobs it concerns dirty; :meth:`run` decides each dirty
job's next step (:func:`.decide.decide`, pure) and carries it out (:class:`.api.MigrationApi`): the API
action, then the status write, then the Events. A job that waits is looked at again after
``REQUEUE_SECONDS`` even without an event; a failed call after ``retry_seconds``. With an
:class:`.arbitration.Arbitrator`, a Pending job is arbitrated against the other Running jobs and its pod's
workload before it starts: every ``arbitration_interval`` seconds together with the other waiting jobs
(:meth:`MigrationController.arbitrate`), or alone as it is reconciled when that is None. Every eviction
waits for the object limiters and is counted by them, and goes through the evictor
:func:`.evictors.eviction_policy` picks (Eviction API, DELETE, or the soft-eviction annotation). A job
whose decision raises costs that job only (reported as the object's error).

Every ``gc_interval`` seconds the scavenger deletes jobs older than their ``ttl`` plus five minutes (30
minutes without a ttl) and the Reservation each one names, as Koordinator's ``doScavenge`` does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

from apis.core.types import Node, Pod
from apis.scheduling.constants import LABEL_RESERVATION_ORDER
from apis.scheduling.migration import (
    CONDITION_RESERVATION_CREATED,
    KIND,
    PHASE_FAILED,
    REASON_FAILED_CREATE_RESERVATION,
    REASON_MISSING_POD,
    STATUS_FALSE,
    JobCondition,
    PodMigrationJobRecord,
    parse_pod_migration_job,
)
from apis.scheduling.record import ReservationRecord, parse_reservation
from koord_scheduler.controllers.containment import Containment, permanent
from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.descheduler.migration.api import MigrationApi
from koord_scheduler.descheduler.migration.arbitration import (
    ANNOTATION_PASSED_ARBITRATION,
    Arbitrator,
    MigratingIndex,
    controller_uid,
    is_active,
)
from koord_scheduler.descheduler.migration.arbitration_order import arbitration_order, batch_job_owner
from koord_scheduler.descheduler.migration.decide import (
    MODE_RESERVATION_FIRST,
    NORMAL,
    REQUEUE_SECONDS,
    WARNING,
    CreateReservation,
    DeleteReservation,
    EvictPod,
    JobEvent,
    JobStatus,
    LabelReservationOrder,
    MigrationView,
    RecordPodUid,
    Step,
    decide,
    update_condition,
)
from koord_scheduler.descheduler.migration.evictors import (
    ANNOTATION_SOFT_EVICTION,
    POLICY_DELETE,
    POLICY_EVICTION,
    POLICY_SOFT_EVICTION,
    eviction_policy,
    soft_eviction_spec,
)
from koord_scheduler.descheduler.migration.reservation_template import TemplateError, reservation_for_job
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.object_errors import ObjectErrors

log = logging.getLogger(__name__)

CONTROLLER: Final = "migration"
RESERVATION_KIND: Final = "Reservation"
MAX_STEPS: Final = 32
"""Steps one job may take in one pass (a job needs about ten from Pending to Succeeded)."""
GC_GRACE_SECONDS: Final = 5 * 60.0
GC_DEFAULT_AGE_SECONDS: Final = 30 * 60.0


def gc_due(job: PodMigrationJobRecord, now: float) -> bool:
    """Koordinator's scavenger rule: the job is older than its ttl plus 5 minutes (30 minutes without one)."""
    if job.creation_timestamp is None:
        return False
    limit = job.ttl_seconds + GC_GRACE_SECONDS if job.ttl_seconds else GC_DEFAULT_AGE_SECONDS
    return now - job.creation_timestamp >= limit


class EvictLimiter:
    """``evictQPS``/``evictBurst``: a token bucket over evictions (Koordinator's evict rate limiter)."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float]) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self.clock = clock
        self.tokens = float(self.burst)
        self.stamp = clock()

    def wait(self) -> float:
        """Take a token and return 0, or return the seconds until one is available (nothing taken)."""
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.qps)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.qps


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


class MigrationController:
    """See the module docstring. Event methods run on the event-loop thread (the informers' handlers)."""

    def __init__(
        self,
        api: MigrationApi,
        *,
        ready: Callable[[], bool] = lambda: True,
        default_mode: str = MODE_RESERVATION_FIRST,
        clock: Callable[[], float] = time.time,
        object_errors: ObjectErrors | None = None,
    ) -> None:
        self.api = api
        self.ready = ready
        """Pods, jobs and Reservations have been listed; nothing is decided before."""
        self.default_mode = default_mode
        self.clock = clock
        self.contained = Containment(CONTROLLER, object_errors)
        self.retry_seconds = 5.0
        self.gc_interval = 60.0
        self.jobs: dict[str, PodMigrationJobRecord] = {}
        self.pods: dict[str, Pod] = {}
        self.reservations: dict[str, ReservationRecord] = {}
        self.dirty: set[str] = set()
        self._by_pod: dict[str, set[str]] = {}
        self._by_reservation: dict[str, set[str]] = {}
        self._watched: dict[str, tuple[set[str], str]] = {}
        """job -> (pod keys, reservation name) it is indexed under."""
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.loop = ReconcileLoop(CONTROLLER, waiting_for="PodMigrationJobs and Reservations")
        self._next_gc: float | None = None
        """When the scavenger runs next, on ``loop.clock`` (None: at the next pass)."""
        self._next_arbitration: float | None = None
        """When the waiting jobs are arbitrated next (None: at the next pass)."""
        self.evictions = 0
        self.evict_limiter: EvictLimiter | None = None
        """``evictQPS``/``evictBurst``; None: no limit."""
        self.eviction_policy = POLICY_EVICTION
        """``evictionPolicy``: the evictor a job uses unless its pod or itself names another."""
        self.arbitrator: Arbitrator | None = None
        """The arbitration limits, eviction gates and object limiters; None: every job runs."""
        self.arbitration_interval: float | None = None
        """``arbitrationArgs``: None arbitrates each Pending job as it is reconciled; a number of seconds
        arbitrates the waiting jobs together, in Koordinator's order, that often (:meth:`arbitrate`)."""
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
        keys = {_key(job.pod_namespace, job.pod_name)}
        if job.new_pod is not None:
            keys.add(_key(job.new_pod[0], job.new_pod[1]))
        r = self.reservations.get(job.reservation_name) if job.reservation_name else None
        if r is not None:
            keys.update(_key(ns, name) for ns, name, _ in r.current_owners)
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

    # ----- deciding -----

    def view(self, job: PodMigrationJobRecord) -> MigrationView:
        r = self.reservations.get(job.reservation_name) if job.reservation_name else None
        bound = None
        owner = (r.current_owners[0] if r is not None and r.current_owners else None) or job.new_pod
        if owner is not None:
            bound = self.pods.get(_key(owner[0], owner[1]))
            if bound is not None and owner[2] and bound.uid != owner[2]:
                bound = None
        pod = self.pods.get(_key(job.pod_namespace, job.pod_name))
        pending = job.phase in ("", "Pending") and not job.finished
        forbidden, held = self._arbitration(job, pod) if pod is not None and pending else ("", "")
        return MigrationView(
            job,
            pod,
            r,
            bound,
            now=self.clock(),
            default_mode=self.default_mode,
            forbidden=forbidden,
            held=held,
        )

    def _arbitration(self, job: PodMigrationJobRecord, pod: Pod) -> tuple[str, str]:
        """(why the Pending ``job`` must fail, why it waits), both empty when it may go on. A job let
        through (by this leader's pass or, per its annotation, an earlier leader's) only waits for the
        object limiters; with ``arbitration_interval`` the others wait for the pass, else each is
        arbitrated here alone."""
        if self.arbitrator is None:
            return "", ""
        if self.arbitration_interval is not None and job.name in self._refused:
            return self._refused[job.name], ""
        if job.name in self._passed:
            replicas = sum(1 for p in self.workload_pods(pod) if is_active(p))
            kind = self.arbitrator.limiters.exceeded(pod, replicas=replicas, now=self.clock())
            return "", f"the {kind} object limiter has no token" if kind else ""
        if self.arbitration_interval is not None:
            return "", "waiting for arbitration"
        verdict = self.arbitrator.verdict(
            pod, migrating=self.migrating, workload=self.workload_pods(pod), now=self.clock()
        )
        if verdict.wait:
            log.debug("migration: job %s waits: %s", job.name, verdict.wait)
        return verdict.fail, verdict.wait

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
            pod = self.pods.get(_key(job.pod_namespace, job.pod_name))
        self.migrating.put(name, pod)

    def arbitrate(self) -> int:
        """One arbitration pass (Koordinator's ``doOnceArbitrate``): the Pending jobs not yet arbitrated,
        whose pods exist, in :func:`.arbitration_order.arbitration_order`; each is refused (it then fails),
        let through (its pod counts as migrating for the next ones) or left waiting. The number decided."""
        if self.arbitrator is None:
            return 0
        waiting = [
            (job, self.pods.get(_key(job.pod_namespace, job.pod_name)))
            for job in self.jobs.values()
            if job.phase in ("", "Pending")
            and not job.finished
            and not job.paused
            and job.deletion_timestamp is None
            and job.name not in self._passed
            and job.name not in self._refused
        ]
        waiting = [(job, pod) for job, pod in waiting if pod is not None]
        if not waiting:
            return 0
        decided = 0
        now = self.clock()
        per_batch_job = Counter(batch_job_owner(pod) for pod in self.migrating.pods.values())
        for job, pod in arbitration_order(waiting, migrating_of=lambda owner: per_batch_job[owner]):
            assert pod is not None
            verdict = self.arbitrator.verdict(pod, migrating=self.migrating, workload=self.workload_pods(pod), now=now)
            if verdict.fail:
                self._refused[job.name] = verdict.fail
            elif verdict.wait:
                log.debug("migration: job %s waits: %s", job.name, verdict.wait)
                continue
            else:
                self._passed.add(job.name)
                self._unmarked.add(job.name)
                self._refresh_migrating(job.name)
            decided += 1
            self._mark(job.name)
        return decided

    async def reconcile(self) -> int:
        """Advance every dirty job as far as it goes now; the number of steps carried out."""
        names, self.dirty = self.dirty, set()
        done = 0
        for name in sorted(names):
            done += await self._advance(name)
        return done

    async def _advance(self, name: str) -> int:
        done = 0
        for _ in range(MAX_STEPS):
            job = self.jobs.get(name)
            if job is None:
                return done
            if name in self._unmarked:
                if not await self._mark_passed(job):
                    return done
                job = self.jobs[name]
            step = self.contained.call(KIND, name, lambda job=job: decide(self.view(job)))  # type: ignore[misc]
            if step is None:
                return done
            if step.idle:
                if step.requeue is not None:
                    self._mark_later(name, step.requeue)
                return done
            if not await self._carry_out(job, step):
                return done
            done += 1
            if step.requeue is not None:
                self._mark_later(name, step.requeue)
        log.warning("migration: job %s did not settle within %d steps", name, MAX_STEPS)
        return done

    async def _mark_passed(self, job: PodMigrationJobRecord) -> bool:
        """Write the ``passed-arbitration`` annotation of a job this leader let through, before it goes on
        (Koordinator's job goes on at the update event of that write); False when the write failed."""
        try:
            await self._patch(job, {"metadata": {"annotations": {ANNOTATION_PASSED_ARBITRATION: "true"}}}, status=False)
        except Exception as exc:
            self._failed(job, exc)
            return False
        self._unmarked.discard(job.name)
        return True

    async def _carry_out(self, job: PodMigrationJobRecord, step: Step) -> bool:
        """The step's action, then its status, then its Events; False when something failed (the job is
        looked at again later)."""
        action = step.action
        try:
            if isinstance(action, CreateReservation):
                return await self._create_reservation(job)
            if isinstance(action, RecordPodUid):
                await self._patch(job, {"spec": {"podRef": {"uid": action.uid}}}, status=False)
            elif isinstance(action, DeleteReservation):
                await self.api.delete_reservation(action.name)
            elif isinstance(action, LabelReservationOrder):
                out = await self.api.label_reservation(action.name, {LABEL_RESERVATION_ORDER: str(self._now_ms())})
                self.reservations[action.name] = parse_reservation(out)
            elif isinstance(action, EvictPod) and not await self._evict(job, action):
                return False
            if step.status is not None:
                await self._patch(job, {"status": step.status.to_wire()}, status=True)
        except Exception as exc:
            self._failed(job, exc)
            return False
        self.contained.clear(KIND, job.name)
        for event in step.events:
            self.api.event(self.jobs.get(job.name, job), event)
        if step.status is not None and step.status.phase != job.phase:
            log.info(
                "migration: job %s (pod %s/%s): %s %s",
                job.name,
                job.pod_namespace,
                job.pod_name,
                step.status.phase,
                step.status.message or step.status.reason,
            )
        return True

    def _failed(self, job: PodMigrationJobRecord, exc: Exception) -> None:
        if isinstance(exc, ClusterError) and not permanent(exc):
            log.warning("migration: job %s: %s; retrying in %.0fs", job.name, exc, self.retry_seconds)
        else:
            self.contained.report(KIND, job.name, exc)
        self._mark_later(job.name, self.retry_seconds)

    async def _patch(self, job: PodMigrationJobRecord, body: dict[str, Any], *, status: bool) -> None:
        out = await self.api.patch_job(job, body, status=status)
        self._set_job(parse_pod_migration_job(out))

    async def _evict(self, job: PodMigrationJobRecord, action: EvictPod) -> bool:
        key = _key(action.namespace, action.name)
        pod = self.pods.get(key)
        replicas = sum(1 for p in self.workload_pods(pod) if is_active(p)) if pod is not None else 0
        if self.arbitrator is not None and pod is not None:
            held = self.arbitrator.limiters.exceeded(pod, replicas=replicas, now=self.clock())
            if held:
                log.debug("migration: job %s: the %s object limiter holds the eviction of %s", job.name, held, key)
                self._mark_later(job.name, REQUEUE_SECONDS)
                return False
        wait = self.evict_limiter.wait() if self.evict_limiter is not None else 0.0
        if wait > 0:
            self._mark_later(job.name, wait)
            return False
        try:
            policy = await self._evict_with_policy(job, action, pod)
        except ClusterError as exc:
            self.api.event(job, JobEvent(WARNING, "Evicting", f'Failed evict Pod "{key}" caused by {exc}'))
            log.info(
                "migration: job %s: evicting %s refused: %s; retrying in %.0fs", job.name, key, exc, self.retry_seconds
            )
            self._mark_later(job.name, self.retry_seconds)
            return False
        self.evictions += 1
        if self.arbitrator is not None and pod is not None:
            self.arbitrator.limiters.track(pod, replicas=replicas, now=self.clock())
        log.info("migration: job %s: evicted %s (%s, %s)", job.name, key, policy, action.reason or "no reason given")
        return True

    async def _evict_with_policy(self, job: PodMigrationJobRecord, action: EvictPod, pod: Pod | None) -> str:
        """Evict through the evictor :func:`.evictors.eviction_policy` picks; its name."""
        policy = eviction_policy(pod.labels if pod is not None else {}, job.labels, default=self.eviction_policy)
        if policy == POLICY_DELETE:
            await self.api.delete_pod(action.namespace, action.name, uid=action.uid, delete_options=job.delete_options)
        elif policy == POLICY_SOFT_EVICTION:
            value = soft_eviction_spec(job.annotations, job.delete_options, now=self.clock())
            await self.api.annotate_pod(
                action.namespace, action.name, uid=action.uid, annotations={ANNOTATION_SOFT_EVICTION: value}
            )
        else:
            await self.api.evict(action.namespace, action.name, uid=action.uid, delete_options=job.delete_options)
        return policy

    async def _create_reservation(self, job: PodMigrationJobRecord) -> bool:
        raw = await self.api.get_pod(job.pod_namespace, job.pod_name)
        if raw is None:
            message = f'Abort job caused by missing Pod "{_key(job.pod_namespace, job.pod_name)}"'
            status = dataclasses.replace(
                JobStatus.of(job), phase=PHASE_FAILED, reason=REASON_MISSING_POD, message=message
            )
            await self._patch(job, {"status": status.to_wire()}, status=True)
            self.api.event(job, JobEvent(WARNING, REASON_MISSING_POD, message))
            return True
        try:
            body = reservation_for_job(job, raw, now_ms=self._now_ms())
            created = await self.api.create_reservation(body)
        except (TemplateError, ClusterError) as exc:
            final = isinstance(exc, TemplateError) or permanent(exc)
            message = f"Failed to create Reservation caused by {exc}"
            status, _ = update_condition(
                JobStatus.of(job),
                JobCondition(CONDITION_RESERVATION_CREATED, STATUS_FALSE, REASON_FAILED_CREATE_RESERVATION, message),
                now=self.clock(),
            )
            if final:
                status = dataclasses.replace(status, phase=PHASE_FAILED)
            await self._patch(job, {"status": status.to_wire()}, status=True)
            self.api.event(job, JobEvent(WARNING, REASON_FAILED_CREATE_RESERVATION, message))
            if not final:
                self._mark_later(job.name, self.retry_seconds)
            return final
        reservation = parse_reservation(created)
        self.reservations[reservation.name] = reservation
        ref = {"kind": "Reservation", "apiVersion": "v1alpha1", "name": reservation.name, "uid": reservation.uid}
        await self._patch(job, {"spec": {"reservationOptions": {"reservationRef": ref}}}, status=False)
        self.api.event(
            self.jobs.get(job.name, job),
            JobEvent(NORMAL, CONDITION_RESERVATION_CREATED, f'Successfully create Reservation "{reservation.name}"'),
        )
        return True

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ----- garbage collection -----

    async def scavenge(self) -> int:
        """Delete the jobs :func:`gc_due` names, each after its Reservation; the number deleted."""
        now = self.clock()
        deleted = 0
        for job in sorted((j for j in self.jobs.values() if gc_due(j, now)), key=lambda j: j.name):
            try:
                if job.reservation_name:
                    await self.api.delete_reservation(job.reservation_name)
                await self.api.delete_job(job.name)
            except ClusterError as exc:
                log.warning("migration: deleting finished job %s failed: %s", job.name, exc)
                break
            log.info("migration: deleted job %s (%s)", job.name, job.phase or "not started")
            self._forget_job(job.name)
            deleted += 1
        return deleted

    # ----- running -----

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until ``stop`` is set; call only while holding the leader Lease. On the hosted
        controllers' :class:`~koord_scheduler.controllers.loop.ReconcileLoop`: nothing before ``ready()``;
        every job at the first pass, then the dirty ones as soon as an event or a job's timer marks them;
        the scavenger every ``gc_interval`` and the arbitration every ``arbitration_interval`` seconds
        (:meth:`due`). A pass that raises is logged and counted by the loop, and the controller goes on."""
        self._next_gc = self._next_arbitration = None
        try:
            await self.loop.run(
                stop, ready=self.ready, reconcile=self._pass, pending=lambda: bool(self.dirty), due=self.due
            )
        finally:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()

    def due(self) -> float | None:
        """When (on the loop's clock) the scavenger or the arbitration runs next; None before the first pass."""
        arbitration = self._next_arbitration if self.arbitration_interval is not None else None
        times = [t for t in (self._next_gc, arbitration) if t is not None]
        return min(times) if times else None

    async def _pass(self, full: bool) -> None:
        """The periodic work that is due, then the dirty jobs (every job on the first, ``full`` pass)."""
        if full:
            self.dirty.update(self.jobs)
        clock = self.loop.clock
        # Each timer moves on before its work runs: work that raises is tried again at its next time, not
        # at once in a loop.
        if self._next_gc is None or clock() >= self._next_gc:
            self._next_gc = clock() + self.gc_interval
            await self.scavenge()
        if self.arbitration_interval is not None and (
            self._next_arbitration is None or clock() >= self._next_arbitration
        ):
            self._next_arbitration = clock() + self.arbitration_interval
            self.arbitrate()
        if self.dirty:
            await self.reconcile()
