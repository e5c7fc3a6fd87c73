"""``Reservation`` (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped), wire-compatible with
Koordinator's ``apis/scheduling/v1alpha1/reservation_types.go``.

Unset fields stay ``None`` so an object read from the API server writes back unchanged (``to_wire``).
Server-side defaults (``ttl: 24h``, ``allocateOnce: true``, ``phase: Pending``) are applied by the
readers (:mod:`apis.scheduling.record`), not by the model: the generated CRD carries no defaults.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from apis.scheduling.constants import API_VERSION
from apis.slo.common import WireModel
from apis.slo.quantity import Quantity

_ATOMIC: JsonDict = {"x-kubernetes-map-type": "atomic"}
_DATE_TIME: JsonDict = {"format": "date-time"}
_LIST_ATOMIC: JsonDict = {"x-kubernetes-list-type": "atomic"}


class ObjectMeta(WireModel):
    """The parts of ``metav1.ObjectMeta`` we read; everything else is kept (``extra="allow"``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    name: str | None = None
    uid: str | None = Field(default=None, alias="uid")
    resource_version: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None


class ObjectReference(WireModel):
    """``corev1.ObjectReference``; owner matching reads uid, name and namespace (empty = any)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", json_schema_extra=_ATOMIC
    )

    api_version: str | None = None
    field_path: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    resource_version: str | None = None
    uid: str | None = Field(default=None, alias="uid")


class ReservationControllerReference(WireModel):
    """``metav1.OwnerReference`` plus an optional namespace: matches a pod's controller."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", json_schema_extra=_ATOMIC
    )

    api_version: str
    kind: str
    name: str
    uid: str = Field(alias="uid")
    block_owner_deletion: bool | None = None
    controller: bool | None = None
    namespace: str | None = None


class LabelSelectorRequirement(WireModel):
    key: str
    operator: str
    values: list[str] | None = Field(default=None, json_schema_extra=_LIST_ATOMIC)


class LabelSelector(WireModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", json_schema_extra=_ATOMIC
    )

    match_expressions: list[LabelSelectorRequirement] | None = Field(default=None, json_schema_extra=_LIST_ATOMIC)
    match_labels: dict[str, str] | None = None


class ReservationOwner(WireModel):
    """One ORed owner term; the fields set inside it are ANDed."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", json_schema_extra={"minProperties": 1}
    )

    object: ObjectReference | None = None
    controller: ReservationControllerReference | None = None
    label_selector: LabelSelector | None = None


class Taint(WireModel):
    key: str
    effect: str
    value: str | None = None
    time_added: str | None = Field(default=None, json_schema_extra=_DATE_TIME)


class PreAllocationPolicy(WireModel):
    mode: Literal["Default", "Cluster"] | None = None
    enable_multiple: bool | None = None


class ReservationSpec(WireModel):
    template: dict[str, Any]
    """A ``PodTemplateSpec``, kept as raw JSON (the CRD leaves it schemaless)."""
    owners: list[ReservationOwner] = Field(min_length=1)
    ttl: str | None = None
    """A Go duration (``"24h"``, ``"30m"``); ``"0s"`` never expires. Mutually exclusive with ``expires``."""
    expires: str | None = Field(default=None, json_schema_extra=_DATE_TIME)
    pre_allocation: bool | None = None
    allocate_once: bool | None = None
    allocate_policy: Literal["Aligned", "Restricted"] | None = None
    unschedulable: bool | None = None
    taints: list[Taint] | None = None
    pre_allocation_policy: PreAllocationPolicy | None = None


class ReservationCondition(WireModel):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_probe_time: str | None = Field(default=None, json_schema_extra=_DATE_TIME)
    last_transition_time: str | None = Field(default=None, json_schema_extra=_DATE_TIME)


class ReservationStatus(WireModel):
    phase: str | None = None
    conditions: list[ReservationCondition] | None = None
    current_owners: list[ObjectReference] | None = None
    node_name: str | None = None
    allocatable: dict[str, Quantity] | None = None
    allocated: dict[str, Quantity] | None = None


class Reservation(WireModel):
    api_version: str | None = API_VERSION
    kind: str | None = "Reservation"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ReservationSpec
    status: ReservationStatus | None = None
