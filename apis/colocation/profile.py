"""``ClusterColocationProfile`` (``config.koordinator.sh/v1alpha1``), as Koordinator's
``apis/config/v1alpha1/cluster_colocation_profile_types.go`` defines it.

A cluster-scoped object whose spec says which pods (``namespaceSelector`` and ``selector``) get which
QoS class, priority class, Koordinator priority, scheduler, labels and annotations when they are created;
the pod mutating webhook applies it. ``status`` is empty.

:class:`ClusterColocationProfile` is the wire model (the CRD is generated from it). The webhook works on
:class:`ResolvedProfile`, built by :func:`resolve_profile`, which checks what the schema cannot
(selectors that do not parse, probabilities out of range) and names the field at fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError

from apis.core import boundedjson
from apis.core.frozendict import FrozenDict
from apis.core.types import LabelSelector, Operator, SelectorRequirement
from apis.slo.common import ObjectMeta, WireModel
from apis.slo.quantity import IntOrString

GROUP = "config.koordinator.sh"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ClusterColocationProfile"

ANNOTATION_SKIP_UPDATE_RESOURCES = "config.koordinator.sh/skip-update-resources"
"""On a profile (any value): pods it matches keep their cpu/memory resource names."""
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
"""On a pod: its containers' batch-cpu / batch-memory requests and limits, as JSON, for the koordlet."""

QoSClassName = Literal["LSE", "LSR", "LS", "BE", "SYSTEM"]
OperatorName = Literal["In", "NotIn", "Exists", "DoesNotExist"]

_PROBABILITY_RULE = "type(self) == int ? (self >= 0 && self <= 100) : self.matches('^(100|[1-9]?[0-9])%$')"
_PERCENT = re.compile(r"(100|[1-9]?[0-9])%")


class ProfileSelectorRequirement(WireModel):
    key: str
    operator: OperatorName
    values: list[str] | None = None


# metav1.LabelSelector. Koordinator's schema leaves ``operator`` free; ours lists the four a label
# selector allows, so a typo is refused when the profile is written instead of matching nothing.
class ProfileLabelSelector(WireModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[ProfileSelectorRequirement] | None = None


class ClusterColocationProfileSpec(WireModel):
    namespace_selector: ProfileLabelSelector | None = None
    """Pods in namespaces whose labels match; absent or empty: every namespace."""
    selector: ProfileLabelSelector | None = None
    """Pods whose labels match; absent or empty: every pod."""
    probability: IntOrString | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": _PROBABILITY_RULE, "message": "probability must be 0-100 or a percentage 0%-100%"}
            ]
        },
    )
    """Percent of matching pods the profile is applied to: ``50`` or ``"50%"``; absent: 100."""
    qos_class: QoSClassName | None = Field(default=None, alias="qosClass")
    """Written to the pod label ``koordinator.sh/qosClass``."""
    priority_class_name: str | None = None
    """A PriorityClass: the pod gets its name, value and preemption policy."""
    koordinator_priority: int | None = Field(default=None, json_schema_extra={"format": "int32"})
    """Written to the pod label ``koordinator.sh/priority``."""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    label_keys_mapping: dict[str, str] | None = None
    """``pod.labels[new] = pod.labels[old]`` for each ``old: new`` (a missing ``old`` gives ``""``)."""
    annotation_keys_mapping: dict[str, str] | None = None
    label_suffixes: dict[str, str] | None = None
    """Appended to the value of each label the pod already has."""
    scheduler_name: str | None = None
    patch: Any = Field(default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})
    """A strategic merge patch over the whole Pod, applied last."""


class ClusterColocationProfile(WireModel):
    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterColocationProfileSpec = Field(default_factory=ClusterColocationProfileSpec)
    status: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ResolvedProfile:
    """A profile checked and ready for the webhook: selectors parsed, probability as a percent."""

    name: str
    spec: ClusterColocationProfileSpec
    namespace_selector: LabelSelector | None
    """None: every namespace (also for an empty selector, so no namespace lookup is needed)."""
    selector: LabelSelector | None
    """None: every pod."""
    percent: int
    skip_update_resources: bool
    uid: str = ""


class ProfileError(ValueError):
    """A profile the webhook cannot use; the message names the profile and the field."""


def probability_percent(value: int | str | None) -> int:
    """``spec.probability`` as a percent 0..100 (absent: 100). Raises ``ValueError`` otherwise.

    Koordinator reads it with ``intstr.GetScaledValueFromIntOrPercent(p, 100, false)``: an int as is,
    ``"N%"`` as N; a string without ``%`` is an error. Values outside 0..100 are refused here (the CRD's
    rule refuses them too) rather than silently meaning "always".
    """
    if value is None:
        return 100
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer or a percentage")
    if isinstance(value, int):
        if not 0 <= value <= 100:
            raise ValueError(f"{value} is outside 0..100")
        return value
    if _PERCENT.fullmatch(value) is None:
        raise ValueError(f"{value!r} is not a percentage between 0% and 100%")
    return int(value[:-1])


def _selector(model: ProfileLabelSelector | None, field: str) -> LabelSelector | None:
    if model is None:
        return None
    requirements = []
    for i, expr in enumerate(model.match_expressions or ()):
        values = tuple(expr.values or ())
        if expr.operator in ("In", "NotIn") and not values:
            raise ProfileError(f"spec.{field}.matchExpressions[{i}]: operator {expr.operator} needs values")
        if expr.operator in ("Exists", "DoesNotExist") and values:
            raise ProfileError(f"spec.{field}.matchExpressions[{i}]: operator {expr.operator} takes no values")
        requirements.append(SelectorRequirement(expr.key, Operator(expr.operator), values))
    selector = LabelSelector(FrozenDict(model.match_labels or {}), tuple(requirements))
    if not selector.match_labels and not selector.match_expressions:
        return None
    return selector


PATCH_MAX_DEPTH = 100
"""Nesting accepted in ``spec.patch``: a pod patch needs about 15 levels."""


def resolve_profile(raw: dict[str, Any] | ClusterColocationProfile) -> ResolvedProfile:
    """Check one profile (a wire dict or the model). Raises :class:`ProfileError` naming the field."""
    if isinstance(raw, ClusterColocationProfile):
        profile = raw
    else:
        name = str((raw.get("metadata") or {}).get("name", "")) if isinstance(raw, dict) else ""
        try:
            profile = ClusterColocationProfile.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ProfileError(f"ClusterColocationProfile {name!r}: {where}: {err['msg']}") from None
    name = profile.metadata.name or ""
    spec = profile.spec
    try:
        percent = probability_percent(spec.probability)
    except ValueError as exc:
        raise ProfileError(f"ClusterColocationProfile {name!r}: spec.probability: {exc}") from None
    try:
        namespace_selector = _selector(spec.namespace_selector, "namespaceSelector")
        selector = _selector(spec.selector, "selector")
    except ProfileError as exc:
        raise ProfileError(f"ClusterColocationProfile {name!r}: {exc}") from None
    if spec.patch is not None and not isinstance(spec.patch, dict):
        raise ProfileError(f"ClusterColocationProfile {name!r}: spec.patch: must be an object")
    if spec.patch is not None and boundedjson.exceeds_depth(spec.patch, PATCH_MAX_DEPTH):
        # Admission merges the patch into every pod it selects, recursively: bound it here, once.
        raise ProfileError(
            f"ClusterColocationProfile {name!r}: spec.patch: nested deeper than {PATCH_MAX_DEPTH} levels"
        )
    annotations = profile.metadata.annotations or {}
    return ResolvedProfile(
        name=name,
        spec=spec,
        namespace_selector=namespace_selector,
        selector=selector,
        percent=percent,
        skip_update_resources=ANNOTATION_SKIP_UPDATE_RESOURCES in annotations,
        uid=profile.metadata.uid or "",
    )
