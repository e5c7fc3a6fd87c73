"""``PodMigrationJob`` (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped), wire-compatible with
Koordinator's ``apis/scheduling/v1alpha1/pod_migration_job_types.go`` (v1.8).

:class:`PodMigrationJob` is the pydantic model (what the API server stores and what the CRD manifest is
generated from); :class:`PodMigrationJobRecord` is the lean, immutable view the migration controller reads,
parsed once per watch event by :func:`parse_pod_migration_job`, which raises ``ValueError`` naming the field
for an object it cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from apis.config.duration import parse_go_duration
from apis.core import boundedjson
from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_timestamp
from apis.scheduling.constants import API_VERSION
from apis.scheduling.record import TEMPLATE_MAX_DEPTH
from apis.scheduling.reservation import ObjectMeta, ObjectReference
from apis.slo.common import WireModel

KIND: Final = "PodMigrationJob"
PLURAL: Final = "podmigrationjobs"

MODE_RESERVATION_FIRST: Final = "ReservationFirst"
MODE_EVICT_DIRECTLY: Final = "EvictDirectly"

PHASE_PENDING: Final = "Pending"
PHASE_RUNNING: Final = "Running"
PHASE_SUCCEEDED: Final = "Succeeded"
PHASE_FAILED: Final = "Failed"
PHASE_ABORTED: Final = "Aborted"
FINISHED_PHASES: Final = frozenset({PHASE_SUCCEEDED, PHASE_FAILED, PHASE_ABORTED})

CONDITION_RESERVATION_CREATED: Final = "ReservationCreated"
CONDITION_RESERVATION_SCHEDULED: Final = "ReservationScheduled"
CONDITION_PREEMPTION: Final = "Preemption"
CONDITION_EVICTION: Final = "Eviction"
CONDITION_POD_SCHEDULED: Final = "PodScheduled"
CONDITION_POD_BOUND_RESERVATION: Final = "PodBoundReservation"
CONDITION_BOUND_POD_READY: Final = "BoundPodReady"
CONDITION_RESERVATION_BOUND: Final = "ReservationBound"

REASON_TIMEOUT: Final = "Timeout"
REASON_FAILED_CREATE_RESERVATION: Final = "FailedCreateReservation"
REASON_RESERVATION_EXPIRED: Final = "ReservationExpired"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_FORBIDDEN_MIGRATE_POD: Final = "ForbiddenMigratePod"
REASON_MISSING_POD: Final = "MissingPod"
REASON_MISSING_RESERVATION: Final = "MissingReservation"
REASON_INVALID_POD_REF: Final = "InvalidPodRef"
REASON_EVICTING: Final = "Evicting"
REASON_FAILED_EVICT: Final = "FailedEvict"
REASON_EVICT_COMPLETE: Final = "EvictComplete"
REASON_WAIT_FOR_POD_BIND_RESERVATION: Final = "WaitForPodBindReservation"
REASON_WAIT_FOR_BOUND_POD_READY: Final = "WaitForBoundPodReady"

STATUS_TRUE: Final = "True"
STATUS_FALSE: Final = "False"

_ATOMIC: JsonDict = {"x-kubernetes-map-type": "atomic"}
_DATE_TIME: JsonDict = {"format": "date-time"}
_LIST_ATOMIC: JsonDict = {"x-kubernetes-list-type": "atomic"}
_SCHEMALESS: JsonDict = {"x-kubernetes-preserve-unknown-fields": True}


class Preconditions(WireModel):
    resource_version: str | None = None
    uid: str | None = Field(default=None, alias="uid")


class DeleteOptions(WireModel):
    """``metav1.DeleteOptions``, passed to the eviction (``DeleteOptions`` of the Eviction body)."""

    api_version: str | None = None
    kind: str | None = None
    dry_run: list[str] | None = Field(default=None, json_schema_extra=_LIST_ATOMIC)
    grace_period_seconds: int | None = None
    ignore_store_read_error_with_cluster_breaking_potential: bool | None = None
    orphan_dependents: bool | None = None
    preconditions: Preconditions | None = None
    propagation_policy: str | None = None


class PreemptionOptions(WireModel):
    """Empty in Koordinator v1.8 (preemption for a migration is not implemented there either)."""


class ReservationOptions(WireModel):
    reservation_ref: ObjectReference | None = None
    """An existing Reservation to migrate into; when absent the controller creates one from ``template``
    (or from the pod) and sets this reference."""
    template: Any = Field(default=None, json_schema_extra=_SCHEMALESS)
    """A ``ReservationTemplateSpec`` (``metadata`` and a Reservation ``spec``), kept as raw JSON."""
    preemption_options: PreemptionOptions | None = None


class PodMigrationJobSpec(WireModel):
    paused: bool | None = None
    ttl: str | None = None
    """A Go duration; the job fails with ``Timeout`` once it is older."""
    mode: str | None = None
    """``ReservationFirst`` (the default) or ``EvictDirectly``."""
    pod_ref: ObjectReference
    reservation_options: ReservationOptions | None = None
    delete_options: DeleteOptions | None = None


class PodMigrationJobCondition(WireModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    type: str
    status: str
    last_probe_time: str | None = Field(default=None, json_schema_extra=_DATE_TIME)
    last_transition_time: str | None = Field(default=None, json_schema_extra=_DATE_TIME)
    reason: str | None = None
    message: str | None = None


class PreemptedReservation(WireModel):
    namespace: str | None = None
    name: str | None = None
    node_name: str | None = None
    phase: str | None = None
    preempted_pod_ref: ObjectReference | None = None
    pods_ref: list[ObjectReference] | None = None


class PodMigrationJobStatus(WireModel):
    phase: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    conditions: list[PodMigrationJobCondition] | None = None
    node_name: str | None = None
    pod_ref: ObjectReference | None = None
    preempted_pods_ref: list[ObjectReference] | None = None
    preempted_pods_reservation: list[PreemptedReservation] | None = None


class PodMigrationJob(WireModel):
    api_version: str | None = API_VERSION
    kind: str | None = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodMigrationJobSpec
    status: PodMigrationJobStatus | None = None


# ----- the lean record the controller reads -----


@dataclass(frozen=True, slots=True)
class JobCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""


@dataclass(frozen=True, slots=True)
class PodMigrationJobRecord:
    """What the migration controller needs of a job; ``raw`` keeps the whole object for status writes."""

    name: str
    uid: str = ""
    resource_version: str = ""
    creation_timestamp: float | None = None
    deletion_timestamp: float | None = None
    annotations: Mapping[str, str] = field(default_factory=FrozenDict)
    labels: Mapping[str, str] = field(default_factory=FrozenDict)
    paused: bool = False
    ttl_seconds: float | None = None
    ttl_text: str = ""
    """``spec.ttl`` as written (copied into the Reservation the job creates)."""
    mode: str = ""
    pod_namespace: str = ""
    pod_name: str = ""
    pod_uid: str = ""
    reservation_name: str = ""
    """``spec.reservationOptions.reservationRef.name`` (empty until a Reservation is created or named)."""
    template: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    delete_options: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    phase: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    node_name: str = ""
    conditions: tuple[JobCondition, ...] = ()
    new_pod: tuple[str, str, str] | None = None
    """``status.podRef`` as (namespace, name, uid): the pod that took the job's Reservation."""

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES

    def condition(self, type_: str) -> JobCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


def parse_pod_migration_job(raw: Mapping[str, Any]) -> PodMigrationJobRecord:
    """The record of one PodMigrationJob as the API server serves it; ``ValueError`` names the field that
    cannot be read (the caller reports the object and skips it)."""
    job = PodMigrationJob.model_validate(raw)
    meta = job.metadata
    name = meta.name or ""
    if not name:
        raise ValueError("PodMigrationJob: metadata.name is missing")
    spec = job.spec
    ttl: float | None = None
    if spec.ttl:
        try:
            ttl = parse_go_duration(spec.ttl)
        except ValueError as exc:
            raise ValueError(f"PodMigrationJob {name}: spec.ttl: {exc}") from None
    mode = spec.mode or ""
    if mode not in ("", MODE_RESERVATION_FIRST, MODE_EVICT_DIRECTLY):
        raise ValueError(
            f"PodMigrationJob {name}: spec.mode: unknown mode {mode!r} "
            f"(want {MODE_RESERVATION_FIRST} or {MODE_EVICT_DIRECTLY})"
        )
    options = spec.reservation_options
    template = options.template if options is not None else None
    if template is not None and not isinstance(template, dict):
        raise ValueError(f"PodMigrationJob {name}: spec.reservationOptions.template: not an object")
    if template and boundedjson.exceeds_depth(template, TEMPLATE_MAX_DEPTH):
        raise ValueError(
            f"PodMigrationJob {name}: spec.reservationOptions.template: nested deeper than {TEMPLATE_MAX_DEPTH} levels"
        )
    ref = options.reservation_ref if options is not None else None
    status = job.status
    conditions = (
        tuple(
            JobCondition(c.type, c.status, c.reason or "", c.message or "", c.last_transition_time or "")
            for c in (status.conditions or [])
            if status is not None
        )
        if status is not None
        else ()
    )
    new_pod = status.pod_ref if status is not None else None
    return PodMigrationJobRecord(
        name=name,
        uid=meta.uid or "",
        resource_version=meta.resource_version or "",
        creation_timestamp=_timestamp(meta.creation_timestamp),
        deletion_timestamp=_timestamp(meta.deletion_timestamp),
        annotations=FrozenDict(meta.annotations or {}),
        labels=FrozenDict(meta.labels or {}),
        paused=bool(spec.paused),
        ttl_seconds=ttl,
        ttl_text=spec.ttl or "",
        mode=mode,
        pod_namespace=spec.pod_ref.namespace or "",
        pod_name=spec.pod_ref.name or "",
        pod_uid=spec.pod_ref.uid or "",
        reservation_name=(ref.name or "") if ref is not None else "",
        template=template,
        delete_options=spec.delete_options.to_wire() if spec.delete_options is not None else None,
        phase=(status.phase or "") if status is not None else "",
        status=(status.status or "") if status is not None else "",
        reason=(status.reason or "") if status is not None else "",
        message=(status.message or "") if status is not None else "",
        node_name=(status.node_name or "") if status is not None else "",
        conditions=conditions,
        new_pod=(new_pod.namespace or "", new_pod.name or "", new_pod.uid or "") if new_pod is not None else None,
    )


def _timestamp(text: str | None) -> float | None:
    try:
        return parse_timestamp(text)
    except ValueError:
        return None
