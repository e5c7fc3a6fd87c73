"""``ElasticQuota`` (``scheduling.sigs.k8s.io/v1alpha1``, namespaced), wire-compatible with the copy of
scheduler-plugins' types that Koordinator reads, plus Koordinator's quota-tree labels and annotations
(Koordinator apis/extension/elastic_quota.go).

:class:`ElasticQuota` is the pydantic model the CRD manifest is generated from; :class:`QuotaRecord` is the
lean view the scheduler keeps, parsed once per watch event by :func:`parse_elastic_quota`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import Field

from apis.core import boundedjson
from apis.core.errors import ParseError
from apis.core.parse import parse_object_meta, parse_resource_list
from apis.core.types import EMPTY_RESOURCES, ObjectMeta, ResourceList
from apis.scheduling.reservation import ObjectMeta as WireObjectMeta
from apis.slo.common import WireModel
from apis.slo.quantity import Quantity

GROUP: Final = "scheduling.sigs.k8s.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "ElasticQuota"
PLURAL: Final = "elasticquotas"

PREFIX: Final = "quota.scheduling.koordinator.sh/"
LABEL_PARENT: Final = PREFIX + "parent"
LABEL_IS_PARENT: Final = PREFIX + "is-parent"
LABEL_ALLOW_LENT_RESOURCE: Final = PREFIX + "allow-lent-resource"
LABEL_TREE_ID: Final = PREFIX + "tree-id"
LABEL_IS_ROOT: Final = PREFIX + "is-root"
"""On the top quota of a tree other than the default one (``tree-id`` set): its ``total-resource`` is the
tree's budget."""
LABEL_IGNORE_DEFAULT_TREE: Final = PREFIX + "ignore-default-tree"
"""On a tree's root quota: ``"true"`` keeps its total from being taken off the default tree's budget."""
ANNOTATION_TOTAL_RESOURCE: Final = PREFIX + "total-resource"
LABEL_QUOTA_NAME: Final = PREFIX + "name"
"""On a pod: the quota it belongs to."""
LABEL_PREEMPTIBLE: Final = PREFIX + "preemptible"
"""On a pod: ``"false"`` makes it non-preemptible (limited to min, never a victim)."""
ANNOTATION_SHARED_WEIGHT: Final = PREFIX + "shared-weight"
ANNOTATION_NAMESPACES: Final = PREFIX + "namespaces"
ANNOTATION_RUNTIME: Final = PREFIX + "runtime"
ANNOTATION_REQUEST: Final = PREFIX + "request"
ANNOTATION_CHILD_REQUEST: Final = PREFIX + "child-request"
ANNOTATION_NON_PREEMPTIBLE_USED: Final = PREFIX + "non-preemptible-used"

ROOT_QUOTA: Final = "koordinator-root-quota"
SYSTEM_QUOTA: Final = "koordinator-system-quota"
DEFAULT_QUOTA: Final = "koordinator-default-quota"
BUILTIN_QUOTAS: Final = frozenset({ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA})


class ElasticQuotaSpec(WireModel):
    min: dict[str, Quantity] | None = None
    """Guaranteed resources (may be lent to siblings when unused and the quota allows lending)."""
    max: dict[str, Quantity] | None = None
    """Upper bound; resources not named here are not limited by this quota."""


class ElasticQuotaStatus(WireModel):
    used: dict[str, Quantity] | None = None
    """Requests of the pods assigned to the quota (and, for a parent, to its descendants)."""


class ElasticQuota(WireModel):
    api_version: str | None = API_VERSION
    kind: str | None = KIND
    metadata: WireObjectMeta = Field(default_factory=WireObjectMeta)
    spec: ElasticQuotaSpec | None = None
    status: ElasticQuotaStatus | None = None


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    """One ElasticQuota as the scheduler reads it. Amounts are scheduler amounts (cpu in millicores)."""

    meta: ObjectMeta
    min: ResourceList = EMPTY_RESOURCES
    max: ResourceList = EMPTY_RESOURCES
    parent: str = ROOT_QUOTA
    is_parent: bool = False
    allow_lent: bool = True
    shared_weight: ResourceList = EMPTY_RESOURCES
    """Defaults to ``max`` when the annotation is missing, invalid or all zero."""
    namespaces: tuple[str, ...] = ()
    tree_id: str = ""
    is_root: bool = False
    total_resource: ResourceList | None = None
    """A tree root's ``total-resource`` annotation (None: absent or not a valid JSON ResourceList)."""
    ignore_default_tree: bool = False
    used: ResourceList = field(default=EMPTY_RESOURCES)
    annotations_written: Mapping[str, str] = field(default_factory=dict)
    """The scheduler-written annotations as last seen (so the status controller writes only changes)."""

    @property
    def name(self) -> str:
        return self.meta.name

    def tree_key(self) -> tuple[object, ...]:
        """What the quota tree and pod mapping depend on: equal keys mean an update (status, the
        scheduler's own annotations) changes nothing in the tree."""
        return (
            self.meta.namespace,
            self.name,
            tuple(sorted(self.min.items())),
            tuple(sorted(self.max.items())),
            self.parent,
            self.is_parent,
            self.allow_lent,
            tuple(sorted(self.shared_weight.items())),
            self.namespaces,
            self.tree_id,
            self.is_root,
            tuple(sorted(self.total_resource.items())) if self.total_resource is not None else None,
            self.ignore_default_tree,
        )


def parse_elastic_quota(obj: Mapping[str, Any]) -> QuotaRecord:
    """Parse a raw ElasticQuota; a malformed one raises :class:`ParseError` naming it and the field."""
    meta = parse_object_meta(obj, KIND, default_namespace="default")
    display = f"{meta.namespace}/{meta.name}"
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ParseError(KIND, display, field="spec", message="expected an object")
    min_ = _resources(spec.get("min"), display, "spec.min")
    max_ = _resources(spec.get("max"), display, "spec.max")
    status = obj.get("status") or {}
    used = _resources(status.get("used") if isinstance(status, Mapping) else None, display, "status.used")
    labels = meta.labels
    annotations = meta.annotations
    parent = labels.get(LABEL_PARENT, "") or ROOT_QUOTA
    if meta.name == ROOT_QUOTA:
        parent = ""
    weight = _shared_weight(annotations.get(ANNOTATION_SHARED_WEIGHT))
    if not weight or not any(weight.values()):
        weight = max_
    return QuotaRecord(
        meta=meta,
        min=min_,
        max=max_,
        parent=parent,
        is_parent=labels.get(LABEL_IS_PARENT) == "true",
        allow_lent=labels.get(LABEL_ALLOW_LENT_RESOURCE) != "false",
        shared_weight=weight,
        namespaces=_namespaces(annotations.get(ANNOTATION_NAMESPACES), display),
        tree_id=labels.get(LABEL_TREE_ID, ""),
        is_root=labels.get(LABEL_IS_ROOT) == "true",
        total_resource=_total_resource(annotations.get(ANNOTATION_TOTAL_RESOURCE)),
        ignore_default_tree=labels.get(LABEL_IGNORE_DEFAULT_TREE) == "true",
        used=used,
        annotations_written={
            k: v
            for k, v in annotations.items()
            if k in (ANNOTATION_RUNTIME, ANNOTATION_REQUEST, ANNOTATION_CHILD_REQUEST)
        },
    )


def _resources(raw: Any, display: str, path: str) -> ResourceList:
    if raw is None:
        return EMPTY_RESOURCES
    try:
        return parse_resource_list(raw)
    except ParseError as err:
        raise ParseError(
            KIND, display, field=f"{path}{'.' if err.field else ''}{err.field}", message=err.message
        ) from None
    except ValueError as err:
        raise ParseError(KIND, display, field=path, message=str(err)) from None


def _shared_weight(raw: str | None) -> ResourceList:
    """Koordinator ignores an invalid shared-weight annotation (falls back to max), so do we."""
    if not raw:
        return EMPTY_RESOURCES
    try:
        return parse_resource_list(boundedjson.loads(raw))
    except ValueError:
        return EMPTY_RESOURCES


def _total_resource(raw: str | None) -> ResourceList | None:
    """Koordinator ignores a ``total-resource`` annotation it cannot read (the tree then keeps its total)."""
    if not raw:
        return None
    try:
        return parse_resource_list(boundedjson.loads(raw))
    except (ValueError, AttributeError, TypeError):
        return None


def _namespaces(raw: str | None, display: str) -> tuple[str, ...]:
    if not raw:
        return ()
    field = f"metadata.annotations[{ANNOTATION_NAMESPACES}]"
    try:
        value = boundedjson.loads(raw)
    except ValueError as exc:
        raise ParseError(KIND, display, field=field, message=f"not valid JSON: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        shown = raw if len(raw) <= 200 else raw[:200] + "…"
        raise ParseError(KIND, display, field=field, message=f"expected a JSON array of namespace names, got {shown!r}")
    return tuple(value)


def format_resources(resources: Mapping[str, int]) -> str:
    """Koordinator's ``cpu:4,memory:8Gi`` form (keys sorted; ``<empty>`` for none)."""
    from apis.core.quantity import format_quantity

    if not resources:
        return "<empty>"
    return ",".join(f"{k}:{format_quantity(k, v)}" for k, v in sorted(resources.items()))


def resources_to_wire(resources: Mapping[str, int]) -> dict[str, str]:
    """Scheduler amounts back to a ``ResourceList`` (``{"cpu": "500m"}``), keys sorted."""
    from apis.core.quantity import format_quantity

    return {k: format_quantity(k, v) for k, v in sorted(resources.items())}
