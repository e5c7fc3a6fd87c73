"""``PodGroup`` (``scheduling.sigs.k8s.io/v1alpha1``, namespaced), wire-compatible with the copy of
kubernetes-sigs/scheduler-plugins that Koordinator vendors, plus the gang labels and annotations of
Koordinator's ``apis/extension/coscheduling.go``.

:class:`PodGroup` is the pydantic model (what the API server stores, what the status controller writes,
what the CRD is generated from). :func:`parse_pod_group` gives the lean record the scheduler keeps per
watch event; it never raises for a bad spec field, it records why in ``invalid``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from apis.core.errors import ParseError
from apis.core.frozendict import FrozenDict
from apis.slo.common import WireModel
from apis.slo.quantity import Quantity

GROUP = "scheduling.sigs.k8s.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "PodGroup"
PLURAL = "podgroups"

LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"
"""Pod label naming the PodGroup (in the pod's namespace) that defines the pod's gang."""
LABEL_LIGHTWEIGHT_NAME = "pod-group.scheduling.sigs.k8s.io/name"
"""Deprecated "lightweight coscheduling" label: the gang is defined by the pod's labels/annotations."""
LABEL_LIGHTWEIGHT_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"
KEY_LIGHTWEIGHT_MATCH_POLICY = "pod-group.scheduling.sigs.k8s.io/match-policy"

GANG_PREFIX = "gang.scheduling.koordinator.sh"
ANNOTATION_GANG_NAME = f"{GANG_PREFIX}/name"
ANNOTATION_GANG_MIN_AVAILABLE = f"{GANG_PREFIX}/min-available"
ANNOTATION_GANG_TOTAL_NUMBER = f"{GANG_PREFIX}/total-number"
ANNOTATION_GANG_MODE = f"{GANG_PREFIX}/mode"
ANNOTATION_GANG_WAITING_TIME = f"{GANG_PREFIX}/waiting-time"
ANNOTATION_GANG_GROUPS = f"{GANG_PREFIX}/groups"
ANNOTATION_GANG_MATCH_POLICY = f"{GANG_PREFIX}/match-policy"
ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC = f"{GANG_PREFIX}/network-topology-spec"

ANNOTATION_BIND_GANG_GROUP_ID = "internal.scheduling.koordinator.sh/bind-gang-group-id"
ANNOTATION_BIND_GANG_MEMBER_COUNT = "internal.scheduling.koordinator.sh/bind-gang-member-count"
DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID = "scheduling.koordinator.sh/bind-gang-group-id"
DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT = "scheduling.koordinator.sh/bind-gang-member-count"

MODE_STRICT = "Strict"
MODE_NON_STRICT = "NonStrict"
MATCH_POLICY_ONCE_SATISFIED = "once-satisfied"
MATCH_POLICY_ONLY_WAITING = "only-waiting"
MATCH_POLICY_WAITING_AND_RUNNING = "waiting-and-running"
MATCH_POLICIES = (MATCH_POLICY_ONCE_SATISFIED, MATCH_POLICY_ONLY_WAITING, MATCH_POLICY_WAITING_AND_RUNNING)

PHASE_PENDING = "Pending"
PHASE_PRE_SCHEDULING = "PreScheduling"
PHASE_SCHEDULING = "Scheduling"
PHASE_SCHEDULED = "Scheduled"
PHASE_RUNNING = "Running"
PHASE_FINISHED = "Finished"
PHASE_FAILED = "Failed"

_INT32: JsonDict = {"format": "int32"}
_DATE_TIME: JsonDict = {"format": "date-time"}


class PodGroupMeta(WireModel):
    """The parts of ``metav1.ObjectMeta`` we read; the rest is kept (``extra="allow"``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    name: str | None = None
    namespace: str | None = None
    uid: str | None = Field(default=None, alias="uid")
    resource_version: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: str | None = None


class PodGroupSpec(WireModel):
    min_member: int | None = Field(default=None, json_schema_extra=_INT32)
    """The gang runs only once this many members can be placed."""
    min_resources: dict[str, Quantity] | None = None
    """Accepted for compatibility; Koordinator does not read it, nor does pykoord."""
    schedule_timeout_seconds: int | None = Field(default=None, json_schema_extra=_INT32)
    """How long assumed members wait at Permit for the rest (> 0; else the plugin's defaultTimeout)."""


class PodGroupStatus(WireModel):
    phase: str | None = None
    occupied_by: str | None = None
    scheduled: int | None = Field(default=None, json_schema_extra=_INT32)
    running: int | None = Field(default=None, json_schema_extra=_INT32)
    succeeded: int | None = Field(default=None, json_schema_extra=_INT32)
    failed: int | None = Field(default=None, json_schema_extra=_INT32)
    schedule_start_time: str | None = Field(default=None, json_schema_extra=_DATE_TIME)


class PodGroup(WireModel):
    """PodGroup is a collection of Pod; used for batch workload."""

    api_version: str | None = API_VERSION
    kind: str | None = KIND
    metadata: PodGroupMeta = Field(default_factory=PodGroupMeta)
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus | None = None


@dataclass(frozen=True, slots=True)
class PodGroupStatusRecord:
    """``status`` as the status controller compares it (missing counts are 0, a missing phase "")."""

    phase: str = ""
    occupied_by: str = ""
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: str = ""

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase,
            "scheduled": self.scheduled,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }
        if self.occupied_by:
            out["occupiedBy"] = self.occupied_by
        if self.schedule_start_time:
            out["scheduleStartTime"] = self.schedule_start_time
        return out


@dataclass(frozen=True, slots=True)
class PodGroupRecord:
    """What the scheduler keeps of a PodGroup. ``invalid`` says why the spec cannot be used ("" if it can)."""

    namespace: str
    name: str
    uid: str = ""
    min_member: int = 0
    schedule_timeout_seconds: int = 0
    annotations: Mapping[str, str] = FrozenDict()
    creation_timestamp: str = ""
    invalid: str = ""
    status: PodGroupStatusRecord = field(default_factory=PodGroupStatusRecord)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_pod_group(raw: Mapping[str, Any]) -> PodGroupRecord:
    """A :class:`PodGroupRecord` from the raw JSON object. Raises :class:`ParseError` only when the object
    cannot be named (no ``metadata.name``); a bad spec is kept with ``invalid`` set."""
    if not isinstance(raw, Mapping):
        raise ParseError(KIND, "", field="", message=f"expected an object, got {type(raw).__name__}")
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ParseError(KIND, "<unnamed>", field="metadata.name", message="required")
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
    annotations = meta.get("annotations")
    notes: FrozenDict[str, str] = (
        FrozenDict({str(k): str(v) for k, v in annotations.items()})
        if isinstance(annotations, Mapping)
        else FrozenDict()
    )
    spec = raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    problems: list[str] = []
    min_member = _int_field(spec, "minMember", problems)
    timeout = _int_field(spec, "scheduleTimeoutSeconds", problems)
    if not problems and min_member < 0:
        problems.append(f"spec.minMember: must be non-negative, got {min_member}")
    return PodGroupRecord(
        namespace=namespace or "default",
        name=name,
        uid=str(meta.get("uid") or ""),
        min_member=min_member,
        schedule_timeout_seconds=timeout,
        annotations=notes,
        creation_timestamp=str(meta.get("creationTimestamp") or ""),
        invalid=(f"PodGroup {namespace}/{name}: " + "; ".join(problems)) if problems else "",
        status=_status(raw.get("status")),
    )


def _status(raw: Any) -> PodGroupStatusRecord:
    if not isinstance(raw, Mapping):
        return PodGroupStatusRecord()

    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def text(key: str) -> str:
        value = raw.get(key)
        return value if isinstance(value, str) else ""

    return PodGroupStatusRecord(
        text("phase"),
        text("occupiedBy"),
        count("scheduled"),
        count("running"),
        count("succeeded"),
        count("failed"),
        text("scheduleStartTime"),
    )


INT32_MAX = 2**31 - 1


def _int_field(spec: Mapping[str, Any], field: str, problems: list[str]) -> int:
    """An ``int32`` field of the spec (the CRD's format), 0 when absent or refused."""
    value = spec.get(field)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"spec.{field}: must be an integer, got {str(value)[:64]!r}")
        return 0
    if not -INT32_MAX - 1 <= value <= INT32_MAX:
        digits = str(value)
        shown = digits if len(digits) <= 24 else f"{digits[:24]}… ({len(digits)} digits)"
        problems.append(f"spec.{field}: must fit a 32-bit integer (at most {INT32_MAX}), got {shown}")
        return 0
    return value
