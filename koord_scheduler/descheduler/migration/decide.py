"""One step of a PodMigrationJob, decided from what the informers show: Koordinator's ``doMigrate``
(``pkg/descheduler/controllers/migration/controller.go``) as a pure function.

Koordinator's reconcile may write several times in one pass; here each call returns one :class:`Step` (at
most one API action, then at most one status write, then its Events) and the controller calls again at
once when the step changed something. The order of checks, the phases, conditions, reasons, messages and
Events are Koordinator's:

1. paused, finished or deleted jobs are left alone;
2. older than ``ttl``: delete the Reservation, ``Failed``/``Timeout``;
3. ``Pending``: an empty podRef fails (``InvalidPodRef``), a missing pod fails (``MissingPod``); else the
   pod's UID is recorded in ``spec.podRef``; arbitration (:mod:`.arbitration`, decided by the controller
   into ``forbidden``/``held``) fails the job (``ForbiddenMigratePod``) or keeps it Pending; else the job
   becomes ``Running``;
4. ``EvictDirectly``: evict, wait for the pod to go, ``Succeeded``;
5. ``ReservationFirst``: create the Reservation (:mod:`.reservation_template`) and set
   ``reservationOptions.reservationRef``; condition ``ReservationCreated``; a missing Reservation fails
   (``MissingReservation``);
6. the Reservation's ``Unschedulable`` message is copied into condition ``ReservationScheduled=False``
   (Event ``Unschedulable``); while it is Pending the job waits; expired fails (``ReservationExpired``);
   failed otherwise fails (``Unschedulable``, with the scheduler's message); on the pod's own node
   fails (``ForbiddenMigratePod``); else ``ReservationScheduled=True`` and ``status.nodeName``;
7. label the Reservation ``reservation-order`` (now, in ms) unless it has one, evict the pod (condition
   ``Eviction=False/Evicting``), wait until it is gone (``EvictComplete``); a Reservation already consumed
   by another pod fails the job before eviction (``ForbiddenMigratePod``);
8. wait for the replacement to bind into the Reservation (``PodBoundReservation=False/
   WaitForPodBindReservation``), record it (``ReservationBound``, ``status.podRef``), wait until it is
   Ready (``BoundPodReady``), then ``Succeeded``/``Complete``.

Deliberate differences (docs/descheduling.md): a job that fails after its Reservation was created by it
deletes that Reservation at once (Koordinator leaves it to expire or to the scavenger), a job for a
pod without a controller fails before anything is created (``ForbiddenMigratePod``) instead of failing to
create an owner-less Reservation, and the Reservation gets its ``reservation-order`` label just before the
eviction, not when it is created (:mod:`.reservation_template`). Migrating a *pending* pod (a Reservation
owned by the pod itself) and preemption for the Reservation are not implemented.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from apis.core.types import Pod
from apis.scheduling.constants import (
    CONDITION_READY,
    CONDITION_SCHEDULED,
    LABEL_RESERVATION_ORDER,
    PHASE_FAILED,
    PHASE_PENDING,
    PHASE_SUCCEEDED,
    REASON_EXPIRED,
    REASON_SCHEDULED,
)
from apis.scheduling.constants import REASON_UNSCHEDULABLE as RESERVATION_UNSCHEDULABLE
from apis.scheduling.migration import (
    CONDITION_BOUND_POD_READY,
    CONDITION_EVICTION,
    CONDITION_POD_BOUND_RESERVATION,
    CONDITION_RESERVATION_BOUND,
    CONDITION_RESERVATION_CREATED,
    CONDITION_RESERVATION_SCHEDULED,
    MODE_EVICT_DIRECTLY,
    MODE_RESERVATION_FIRST,
    PHASE_RUNNING,
    REASON_EVICT_COMPLETE,
    REASON_EVICTING,
    REASON_FORBIDDEN_MIGRATE_POD,
    REASON_INVALID_POD_REF,
    REASON_MISSING_POD,
    REASON_MISSING_RESERVATION,
    REASON_RESERVATION_EXPIRED,
    REASON_TIMEOUT,
    REASON_UNSCHEDULABLE,
    REASON_WAIT_FOR_BOUND_POD_READY,
    REASON_WAIT_FOR_POD_BIND_RESERVATION,
    STATUS_FALSE,
    STATUS_TRUE,
    JobCondition,
    PodMigrationJobRecord,
)
from apis.scheduling.record import ReservationRecord
from koord_scheduler.descheduler.migration.reservation_template import CREATOR, LABEL_CREATED_BY

REQUEUE_SECONDS: Final = 3.0
"""Koordinator's ``defaultRequeueAfter``: how soon a waiting job is looked at again without an event."""
ANNOTATION_EVICT_REASON: Final = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER: Final = "koordinator.sh/evict-trigger"
NORMAL: Final = "Normal"
WARNING: Final = "Warning"


@dataclass(frozen=True, slots=True)
class JobStatus:
    """The job's whole ``status`` as the controller writes it."""

    phase: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    node_name: str = ""
    conditions: tuple[JobCondition, ...] = ()
    pod_ref: tuple[str, str, str] | None = None
    """(namespace, name, uid) of the pod bound into the Reservation."""

    @classmethod
    def of(cls, job: PodMigrationJobRecord) -> JobStatus:
        return cls(job.phase, job.status, job.reason, job.message, job.node_name, job.conditions, job.new_pod)

    def condition(self, type_: str) -> JobCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def to_wire(self) -> dict[str, object]:
        """The status for a merge PATCH: empty fields as ``None`` (removed), as Go's ``omitempty``."""
        conditions = [
            {
                k: v
                for k, v in (
                    ("type", c.type),
                    ("status", c.status),
                    ("reason", c.reason),
                    ("message", c.message),
                    ("lastTransitionTime", c.last_transition_time),
                )
                if v
            }
            for c in self.conditions
        ]
        pod_ref = None
        if self.pod_ref is not None:
            pod_ref = {k: v for k, v in zip(("namespace", "name", "uid"), self.pod_ref, strict=True) if v}
        return {
            "phase": self.phase or None,
            "status": self.status or None,
            "reason": self.reason or None,
            "message": self.message or None,
            "nodeName": self.node_name or None,
            "conditions": conditions or None,
            "podRef": pod_ref,
        }


@dataclass(frozen=True, slots=True)
class CreateReservation:
    """Create the job's Reservation from its pod and set ``spec.reservationOptions.reservationRef``."""


@dataclass(frozen=True, slots=True)
class DeleteReservation:
    name: str


@dataclass(frozen=True, slots=True)
class LabelReservationOrder:
    """Add ``reservation-order`` (now, in ms) to the job's Reservation, just before the eviction."""

    name: str


@dataclass(frozen=True, slots=True)
class RecordPodUid:
    """Write the pod's UID into ``spec.podRef.uid`` (so a new pod with the same name is not evicted)."""

    uid: str


@dataclass(frozen=True, slots=True)
class EvictPod:
    namespace: str
    name: str
    uid: str
    reason: str
    """The job's evict reason (its annotations), for the log and the Eviction's audit."""


Action = CreateReservation | DeleteReservation | LabelReservationOrder | RecordPodUid | EvictPod


@dataclass(frozen=True, slots=True)
class JobEvent:
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Step:
    """What to do now: ``action`` first; ``status`` is written only if it succeeded, then ``events``.
    ``requeue``: look again after that many seconds even without an event (None: only on an event)."""

    action: Action | None = None
    status: JobStatus | None = None
    events: tuple[JobEvent, ...] = ()
    requeue: float | None = None

    @property
    def idle(self) -> bool:
        return self.action is None and self.status is None


IDLE: Final = Step()
WAIT: Final = Step(requeue=REQUEUE_SECONDS)


@dataclass(frozen=True, slots=True)
class MigrationView:
    """What the informers show about one job."""

    job: PodMigrationJobRecord
    pod: Pod | None
    """The pod ``spec.podRef`` names (by namespace and name), if the Pod informer has it."""
    reservation: ReservationRecord | None
    """The Reservation ``reservationRef`` names, if any and if the informer has it."""
    bound_pod: Pod | None = None
    """The first of the Reservation's ``currentOwners``, if the Pod informer has it."""
    now: float = 0.0
    default_mode: str = MODE_RESERVATION_FIRST
    forbidden: str = ""
    """Why arbitration refuses the Pending job's pod (the job fails, ``ForbiddenMigratePod``)."""
    held: str = ""
    """Why arbitration keeps the Pending job waiting (a limit is reached)."""


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def update_condition(status: JobStatus, condition: JobCondition, *, now: float) -> tuple[JobStatus, bool]:
    """Koordinator's ``updateCondition``: set ``condition`` (its transition time kept while its status
    stays), and make it the job's ``status``/``reason``/``message``; whether anything changed."""
    old = status.condition(condition.type)
    stamp = old.last_transition_time if old is not None and old.status == condition.status else rfc3339(now)
    new = dataclasses.replace(condition, last_transition_time=stamp)
    if old is not None and old == new:
        return status, False
    conditions = (
        tuple(new if c.type == new.type else c for c in status.conditions)
        if old is not None
        else (*status.conditions, new)
    )
    return dataclasses.replace(
        status, conditions=conditions, status=new.type, reason=new.reason, message=new.message
    ), True


def _set_condition(status: JobStatus, condition: JobCondition, *, now: float) -> tuple[JobStatus, bool]:
    """Koordinator's ``util.UpdateCondition`` alone: the condition, not the job's status/reason/message."""
    old = status.condition(condition.type)
    stamp = old.last_transition_time if old is not None and old.status == condition.status else rfc3339(now)
    new = dataclasses.replace(condition, last_transition_time=stamp)
    if old is not None and old == new:
        return status, False
    conditions = (
        tuple(new if c.type == new.type else c for c in status.conditions)
        if old is not None
        else (*status.conditions, new)
    )
    return dataclasses.replace(status, conditions=conditions), True


def _fail(view: MigrationView, reason: str, message: str, *, event: bool = True, delete: str = "") -> Step:
    status = dataclasses.replace(JobStatus.of(view.job), phase=PHASE_FAILED, reason=reason, message=message)
    action = DeleteReservation(delete) if delete else None
    return Step(action=action, status=status, events=(JobEvent(WARNING, reason, message),) if event else ())


def _condition_step(
    view: MigrationView, condition: JobCondition, event: JobEvent | None = None, *, requeue: float | None = None
) -> Step | None:
    status, changed = update_condition(JobStatus.of(view.job), condition, now=view.now)
    if not changed:
        return None
    return Step(status=status, events=(event,) if event is not None else (), requeue=requeue)


def _pod_key(job: PodMigrationJobRecord) -> str:
    return f"{job.pod_namespace}/{job.pod_name}"


def _own_reservation(view: MigrationView) -> str:
    """The Reservation to delete when the job fails: the one it created (labelled by this controller)."""
    r = view.reservation
    if r is not None and r.labels.get(LABEL_CREATED_BY) == CREATOR and r.deletion_timestamp is None:
        return r.name
    return ""


def evict_reason(annotations: Mapping[str, str]) -> str:
    """Koordinator's ``GetEvictionTriggerAndReason``: the reason annotation, else the trigger."""
    return annotations.get(ANNOTATION_EVICT_REASON) or annotations.get(ANNOTATION_EVICT_TRIGGER) or ""


def decide(view: MigrationView) -> Step:
    """The next step of ``view.job`` (see the module docstring)."""
    job = view.job
    if job.paused or job.finished or job.deletion_timestamp is not None:
        return IDLE
    if job.ttl_seconds and job.creation_timestamp is not None and view.now - job.creation_timestamp >= job.ttl_seconds:
        return _fail(view, REASON_TIMEOUT, "Abort job caused by timeout", delete=job.reservation_name)
    if job.phase in ("", "Pending"):
        if not job.pod_namespace or not job.pod_name:
            return _fail(view, REASON_INVALID_POD_REF, "Abort job caused by invalid PodRef")
        if view.pod is None:
            return _fail(view, REASON_MISSING_POD, f'Abort job caused by missing Pod "{_pod_key(job)}"')
        if job.pod_uid != view.pod.uid:
            return Step(action=RecordPodUid(view.pod.uid))
        if view.forbidden:
            message = (
                f'Pod "{_pod_key(job)}" is forbidden to migrate because it does not meet the requirements: '
                f"{view.forbidden}"
            )
            return _fail(view, REASON_FORBIDDEN_MIGRATE_POD, message)
        if view.held:
            return WAIT
        return Step(status=dataclasses.replace(JobStatus.of(job), phase=PHASE_RUNNING))
    mode = job.mode or view.default_mode
    if mode == MODE_EVICT_DIRECTLY:
        return _evict_directly(view)
    return _through_reservation(view)


def _evict_directly(view: MigrationView) -> Step:
    step = _evict(view)
    if step is not None:
        return step
    status = dataclasses.replace(
        JobStatus.of(view.job),
        phase=PHASE_SUCCEEDED,
        status="Complete",
        reason="",
        message=f'Pod "{_pod_key(view.job)}" has been evicted',
    )
    return Step(status=status)


def _evict(view: MigrationView) -> Step | None:
    """The eviction step, or None once the pod is gone (condition ``Eviction=True``)."""
    job = view.job
    cond = job.condition(CONDITION_EVICTION)
    if cond is not None and cond.status == STATUS_TRUE:
        return None
    pod = view.pod
    key = _pod_key(job)
    if pod is None or (cond is not None and job.pod_uid and pod.uid != job.pod_uid):
        if job.status != CONDITION_EVICTION:
            return _fail(
                view, REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}"', delete=_own_reservation(view)
            )
        done = JobCondition(CONDITION_EVICTION, STATUS_TRUE, REASON_EVICT_COMPLETE)
        return _condition_step(view, done, JobEvent(NORMAL, REASON_EVICT_COMPLETE, f'Pod "{key}" has been evicted'))
    if cond is not None and cond.reason == REASON_EVICTING:
        return WAIT
    r = view.reservation
    if r is not None and r.phase == PHASE_SUCCEEDED:
        return _fail(view, REASON_FORBIDDEN_MIGRATE_POD, "Reservation is already bound by another Pod")
    if r is not None and LABEL_RESERVATION_ORDER not in r.labels and not r.is_terminated:
        # Ordered only now: a replacement prefers the Reservation of a job whose pod is gone.
        return Step(action=LabelReservationOrder(r.name))
    reason = evict_reason(job.annotations)
    message = f'Pod "{key}" evicted from node "{pod.node_name}" by the reason "{reason}"'
    status, _ = update_condition(
        JobStatus.of(job), JobCondition(CONDITION_EVICTION, STATUS_FALSE, REASON_EVICTING, message), now=view.now
    )
    return Step(
        action=EvictPod(pod.namespace, pod.name, pod.uid, reason),
        status=status,
        events=(JobEvent(NORMAL, REASON_EVICTING, message),),
        requeue=REQUEUE_SECONDS,
    )


def _through_reservation(view: MigrationView) -> Step:
    job = view.job
    if not job.reservation_name:
        if view.pod is None:
            return _fail(view, REASON_MISSING_POD, f'Abort job caused by missing Pod "{_pod_key(job)}"')
        if not view.pod.meta.owner_references or not any(o.controller for o in view.pod.meta.owner_references):
            return _fail(
                view,
                REASON_FORBIDDEN_MIGRATE_POD,
                f'Pod "{_pod_key(job)}" has no controller to recreate it in a Reservation',
            )
        return Step(action=CreateReservation())
    r = view.reservation
    created = _condition_step(view, JobCondition(CONDITION_RESERVATION_CREATED, STATUS_TRUE))
    if created is not None:
        return created
    if r is None:
        return _fail(
            view, REASON_MISSING_RESERVATION, f'Abort job caused by missing Reservation "{job.reservation_name}"'
        )
    unschedulable = _reservation_condition(r, CONDITION_SCHEDULED, RESERVATION_UNSCHEDULABLE)
    scheduled_cond = job.condition(CONDITION_RESERVATION_SCHEDULED)
    if (scheduled_cond is None or scheduled_cond.status == STATUS_FALSE) and unschedulable is not None:
        failed = JobCondition(CONDITION_RESERVATION_SCHEDULED, STATUS_FALSE, REASON_UNSCHEDULABLE, unschedulable[3])
        step = _condition_step(view, failed, JobEvent(WARNING, REASON_UNSCHEDULABLE, unschedulable[3]))
        if step is not None:
            return step
    if r.phase in ("", PHASE_PENDING):
        return WAIT
    if r.phase == PHASE_FAILED and _reservation_condition(r, CONDITION_READY, REASON_EXPIRED) is not None:
        return _fail(
            view, REASON_RESERVATION_EXPIRED, "Reservation expired", event=False, delete=_own_reservation(view)
        )
    scheduled = bool(r.node_name) and _reservation_condition(r, CONDITION_SCHEDULED, REASON_SCHEDULED, True) is not None
    if not scheduled:
        message = unschedulable[3] if unschedulable is not None else ""
        return _fail(view, REASON_UNSCHEDULABLE, message, event=False, delete=_own_reservation(view))
    if not job.node_name and (scheduled_cond is None or scheduled_cond.status != STATUS_TRUE):
        if view.pod is not None and view.pod.node_name == r.node_name:
            return _fail(
                view,
                REASON_FORBIDDEN_MIGRATE_POD,
                f'Scheduler assignes the Reservation "{r.name}" on the same node as the Pod',
                delete=_own_reservation(view),
            )
        status, _ = update_condition(
            JobStatus.of(job), JobCondition(CONDITION_RESERVATION_SCHEDULED, STATUS_TRUE), now=view.now
        )
        status = dataclasses.replace(status, node_name=r.node_name)
        message = f'Assigned Reservation "{r.name}" to node "{r.node_name}"'
        return Step(status=status, events=(JobEvent(NORMAL, CONDITION_RESERVATION_SCHEDULED, message),))
    step = _evict(view)
    if step is not None:
        return step
    return _after_eviction(view, r)


def _after_eviction(view: MigrationView, r: ReservationRecord) -> Step:
    job = view.job
    bound_cond = job.condition(CONDITION_POD_BOUND_RESERVATION)
    owner = r.current_owners[0] if r.current_owners else job.new_pod
    if (bound_cond is None or bound_cond.status != STATUS_TRUE) and owner is None:
        waiting = JobCondition(CONDITION_POD_BOUND_RESERVATION, STATUS_FALSE, REASON_WAIT_FOR_POD_BIND_RESERVATION)
        step = _condition_step(
            view,
            waiting,
            JobEvent(NORMAL, REASON_WAIT_FOR_POD_BIND_RESERVATION, "Waiting for Pod bind Reservation"),
            requeue=REQUEUE_SECONDS,
        )
        return step if step is not None else WAIT
    if owner is None:
        return WAIT
    status, bound_changed = _set_condition(
        JobStatus.of(job), JobCondition(CONDITION_RESERVATION_BOUND, STATUS_TRUE), now=view.now
    )
    if job.new_pod is None or bound_changed:
        status = dataclasses.replace(status, pod_ref=owner)
        message = f'Reservation bound by pod "{owner[0]}/{owner[1]}"'
        return Step(status=status, events=(JobEvent(NORMAL, "PodBoundReservation", message),))
    new_key = f"{owner[0]}/{owner[1]}"
    ready_cond = job.condition(CONDITION_BOUND_POD_READY)
    if ready_cond is None or ready_cond.status != STATUS_TRUE:
        pod = view.bound_pod
        if pod is not None and pod.conditions.get("Ready") != "True":
            waiting = JobCondition(CONDITION_BOUND_POD_READY, STATUS_FALSE, REASON_WAIT_FOR_BOUND_POD_READY)
            step = _condition_step(
                view,
                waiting,
                JobEvent(NORMAL, REASON_WAIT_FOR_BOUND_POD_READY, f"Waiting for Bound Pod {new_key} Ready"),
                requeue=REQUEUE_SECONDS,
            )
            return step if step is not None else WAIT
        status, _ = update_condition(
            JobStatus.of(job), JobCondition(CONDITION_BOUND_POD_READY, STATUS_TRUE), now=view.now
        )
        return Step(status=status, events=(JobEvent(NORMAL, "BoundPodReady", f'Bind pod "{new_key}" is ready'),))
    message = f'Bind Pod "{new_key}" in Reservation "{r.name}"'
    status = dataclasses.replace(
        JobStatus.of(job), phase=PHASE_SUCCEEDED, status="Complete", reason="", message=message, pod_ref=owner
    )
    status, _ = _set_condition(
        status, JobCondition(CONDITION_POD_BOUND_RESERVATION, STATUS_TRUE, message=message), now=view.now
    )
    return Step(status=status, events=(JobEvent(NORMAL, "Complete", message),))


def _reservation_condition(
    r: ReservationRecord, type_: str, reason: str, true_only: bool = False
) -> tuple[str, str, str, str] | None:
    for condition in r.conditions:
        if condition[0] == type_ and (not reason or condition[2] == reason):
            if true_only and condition[1] != "True":
                return None
            return condition
    return None


__all__ = [
    "IDLE",
    "MODE_RESERVATION_FIRST",
    "WAIT",
    "Action",
    "CreateReservation",
    "DeleteReservation",
    "EvictPod",
    "JobEvent",
    "JobStatus",
    "LabelReservationOrder",
    "MigrationView",
    "RecordPodUid",
    "Step",
    "decide",
    "evict_reason",
    "rfc3339",
    "update_condition",
]
