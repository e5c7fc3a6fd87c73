"""How the ``migration`` controller carries out a decided step (:class:`StepExecution`): the API action
(the pod's UID, the Reservation and its order label, the eviction through the evictor
:func:`.evictors.eviction_policy` picks, behind the object limiters and ``evictQPS``), then the status
write, then the Events; and the ``passed-arbitration`` mark of a job let through."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from apis.core.types import Pod
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
from apis.scheduling.record import parse_reservation
from koord_scheduler.controllers.containment import Containment, permanent
from koord_scheduler.descheduler.migration.api import MigrationApi
from koord_scheduler.descheduler.migration.arbitration import ANNOTATION_PASSED_ARBITRATION, Arbitrator, is_active
from koord_scheduler.descheduler.migration.decide import (
    NORMAL,
    REQUEUE_SECONDS,
    WARNING,
    CreateReservation,
    DeleteReservation,
    EvictPod,
    JobEvent,
    JobStatus,
    LabelReservationOrder,
    RecordPodUid,
    Step,
    update_condition,
)
from koord_scheduler.descheduler.migration.evictors import (
    ANNOTATION_SOFT_EVICTION,
    POLICY_DELETE,
    POLICY_SOFT_EVICTION,
    eviction_policy,
    soft_eviction_spec,
)
from koord_scheduler.descheduler.migration.informer_index import JobIndexing, pod_key
from koord_scheduler.descheduler.migration.reservation_template import TemplateError, reservation_for_job
from koord_scheduler.framework.errors import ClusterError

log = logging.getLogger(__name__)


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


class StepExecution(JobIndexing):
    """The controller's writes (see the module docstring); the settings below are the controller's."""

    api: MigrationApi
    clock: Callable[[], float]
    contained: Containment
    retry_seconds: float
    evictions: int
    evict_limiter: EvictLimiter | None
    eviction_policy: str
    arbitrator: Arbitrator | None

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
        key = pod_key(action.namespace, action.name)
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
            message = f'Abort job caused by missing Pod "{pod_key(job.pod_namespace, job.pod_name)}"'
            status = dataclasses.replace(
                JobStatus.of(job), phase=PHASE_FAILED, reason=REASON_MISSING_POD, message=message
            )
            await self._patch(job, {"status": status.to_wire()}, status=True)
            self.api.event(job, JobEvent(WARNING, REASON_MISSING_POD, message))
            return True
        try:
            body = reservation_for_job(job, raw)
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
