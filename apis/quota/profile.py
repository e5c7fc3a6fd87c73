"""``ElasticQuotaProfile`` (``quota.koordinator.sh/v1alpha1``, namespaced, short name ``eqp``),
wire-compatible with Koordinator's ``apis/quota/v1alpha1/elastic_quota_profile_types.go``.

A profile asks for one ElasticQuota, ``spec.quotaName`` in the profile's namespace, whose min is the total
allocatable of the nodes ``spec.nodeSelector`` selects (times ``spec.resourceRatio``): the root of a quota
tree per node pool. :class:`ElasticQuotaProfile` is the pydantic model the CRD manifest is generated from;
:class:`QuotaProfileRecord` is the lean view the controller keeps, parsed once per watch event by
:func:`parse_quota_profile`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import Field

from apis.colocation import ProfileLabelSelector
from apis.core.errors import ParseError
from apis.core.parse import parse_label_selector, parse_object_meta
from apis.core.types import LabelSelector, ObjectMeta
from apis.scheduling.reservation import ObjectMeta as WireObjectMeta
from apis.slo.common import WireModel

GROUP: Final = "quota.koordinator.sh"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "ElasticQuotaProfile"
PLURAL: Final = "elasticquotaprofiles"

ANNOTATION_RESOURCE_KEYS: Final = "quota.scheduling.koordinator.sh/resource-keys"
"""On a profile: a JSON list of the resources the quota's min and max name (default ``["cpu","memory"]``)."""


class ElasticQuotaProfileSpec(WireModel):
    quota_name: str
    """The ElasticQuota this profile keeps, in the profile's namespace."""
    quota_labels: dict[str, str] | None = None
    """Labels set on the quota."""
    resource_ratio: str | None = None
    """A number in (0, 1] the nodes' total is multiplied by (``"0.9"``: 90% of it); anything else is 1."""
    node_selector: ProfileLabelSelector = Field(json_schema_extra={"x-kubernetes-map-type": "atomic"})
    """The nodes whose allocatable resources make the quota."""


class ElasticQuotaProfileStatus(WireModel):
    pass


class ElasticQuotaProfile(WireModel):
    api_version: str | None = API_VERSION
    kind: str | None = KIND
    metadata: WireObjectMeta = Field(default_factory=WireObjectMeta)
    spec: ElasticQuotaProfileSpec | None = None
    status: ElasticQuotaProfileStatus | None = None


@dataclass(frozen=True, slots=True)
class QuotaProfileRecord:
    """One ElasticQuotaProfile as the ``quotaprofile`` controller reads it."""

    meta: ObjectMeta
    quota_name: str
    node_selector: LabelSelector
    quota_labels: Mapping[str, str]
    resource_ratio: str | None
    resource_keys: tuple[str, ...] | None
    """The ``resource-keys`` annotation; None when absent or unreadable (Koordinator then uses cpu and
    memory, and logs the unreadable one)."""

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace


def parse_quota_profile(obj: Mapping[str, Any]) -> QuotaProfileRecord:
    """Parse a raw ElasticQuotaProfile; a malformed one raises :class:`ParseError` naming it and the field."""
    meta = parse_object_meta(obj, KIND, default_namespace="default")
    display = f"{meta.namespace}/{meta.name}"
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ParseError(KIND, display, field="spec", message="expected an object")
    quota_name = spec.get("quotaName")
    if not isinstance(quota_name, str) or not quota_name:
        raise ParseError(KIND, display, field="spec.quotaName", message="required: the name of the quota to keep")
    try:
        selector = parse_label_selector(spec.get("nodeSelector"))
    except ParseError as err:
        raise ParseError(
            KIND, display, field=f"spec.nodeSelector.{err.field}".rstrip("."), message=err.message
        ) from None
    if selector is None:
        raise ParseError(KIND, display, field="spec.nodeSelector", message="required: the nodes of the pool")
    labels = spec.get("quotaLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise ParseError(KIND, display, field="spec.quotaLabels", message="expected an object of strings")
    ratio = spec.get("resourceRatio")
    if ratio is not None and not isinstance(ratio, str):
        raise ParseError(KIND, display, field="spec.resourceRatio", message='expected a string such as "0.9"')
    return QuotaProfileRecord(
        meta=meta,
        quota_name=quota_name,
        node_selector=selector,
        quota_labels=dict(labels),
        resource_ratio=ratio,
        resource_keys=_resource_keys(meta.annotations.get(ANNOTATION_RESOURCE_KEYS)),
    )


def _resource_keys(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(value)
