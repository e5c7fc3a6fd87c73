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

Layout: this module decides (the view of a job, the arbitration, the loop, the scavenger);
:mod:`.informer_index` keeps what the informers show and which jobs it concerns; :mod:`.carry_out` carries
a decided step out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Final

from apis.core.types import Pod
from apis.scheduling.migration import KIND, PodMigrationJobRecord
from koord_scheduler.controllers.containment import Containment
from koord_scheduler.controllers.loop import ReconcileLoop
from koord_scheduler.descheduler.migration.api import MigrationApi
from koord_scheduler.descheduler.migration.arbitration import is_active
from koord_scheduler.descheduler.migration.arbitration_order import arbitration_order, batch_job_owner
from koord_scheduler.descheduler.migration.carry_out import EvictLimiter, StepExecution
from koord_scheduler.descheduler.migration.decide import MODE_RESERVATION_FIRST, MigrationView, decide
from koord_scheduler.descheduler.migration.evictors import POLICY_EVICTION
from koord_scheduler.descheduler.migration.informer_index import RESERVATION_KIND, pod_key
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.scheduler.object_errors import ObjectErrors

log = logging.getLogger(__name__)

CONTROLLER: Final = "migration"
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


class MigrationController(StepExecution):
    """See the module docstring. Event methods (:class:`~.informer_index.JobIndexing`) run on the
    event-loop thread (the informers' handlers)."""

    def __init__(
        self,
        api: MigrationApi,
        *,
        ready: Callable[[], bool] = lambda: True,
        default_mode: str = MODE_RESERVATION_FIRST,
        clock: Callable[[], float] = time.time,
        object_errors: ObjectErrors | None = None,
    ) -> None:
        super().__init__()
        self.api = api
        self.ready = ready
        """Pods, jobs and Reservations have been listed; nothing is decided before."""
        self.default_mode = default_mode
        self.clock = clock
        self.contained = Containment(CONTROLLER, object_errors)
        self.retry_seconds = 5.0
        self.gc_interval = 60.0
        self.loop = ReconcileLoop(CONTROLLER, waiting_for="PodMigrationJobs and Reservations")
        self._next_gc: float | None = None
        """When the scavenger runs next, on ``loop.clock`` (None: at the next pass)."""
        self._next_arbitration: float | None = None
        """When the waiting jobs are arbitrated next (None: at the next pass)."""
        self.evictions = 0
        self.evict_limiter = None
        """``evictQPS``/``evictBurst``; None: no limit."""
        self.eviction_policy = POLICY_EVICTION
        """``evictionPolicy``: the evictor a job uses unless its pod or itself names another."""
        self.arbitrator = None
        """The arbitration limits, eviction gates and object limiters; None: every job runs."""
        self.arbitration_interval: float | None = None
        """``arbitrationArgs``: None arbitrates each Pending job as it is reconciled; a number of seconds
        arbitrates the waiting jobs together, in Koordinator's order, that often (:meth:`arbitrate`)."""

    # ----- deciding -----

    def view(self, job: PodMigrationJobRecord) -> MigrationView:
        r = self.reservations.get(job.reservation_name) if job.reservation_name else None
        bound = None
        owner = (r.current_owners[0] if r is not None and r.current_owners else None) or job.new_pod
        if owner is not None:
            bound = self.pods.get(pod_key(owner[0], owner[1]))
            if bound is not None and owner[2] and bound.uid != owner[2]:
                bound = None
        pod = self.pods.get(pod_key(job.pod_namespace, job.pod_name))
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

    def arbitrate(self) -> int:
        """One arbitration pass (Koordinator's ``doOnceArbitrate``): the Pending jobs not yet arbitrated,
        whose pods exist, in :func:`.arbitration_order.arbitration_order`; each is refused (it then fails),
        let through (its pod counts as migrating for the next ones) or left waiting. The number decided."""
        if self.arbitrator is None:
            return 0
        waiting = [
            (job, self.pods.get(pod_key(job.pod_namespace, job.pod_name)))
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


__all__ = ["CONTROLLER", "RESERVATION_KIND", "EvictLimiter", "MigrationController", "gc_due"]
