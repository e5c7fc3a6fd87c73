"""The lean, immutable view of a Reservation the scheduler reads (parsed once per watch event).

:func:`parse_reservation` never rejects a Reservation it can name: a semantically invalid one (no owners,
no template, neither ``ttl`` nor ``expires``, an unparsable field) comes back with ``invalid`` set to the
reason, so the scheduler can report it in an Event and the object's status instead of dropping it.
Only an object without a name raises ``ValueError``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.core import boundedjson
from apis.core.errors import ParseError, join_path, quote
from apis.core.frozendict import FrozenDict
from apis.core.jsonfields import invalid, type_name
from apis.core.parse import (
    parse_label_selector,
    parse_node_selector_term,
    parse_pod,
    parse_resource_list,
    parse_taints,
    parse_timestamp,
    parse_tolerations,
)
from apis.core.types import LabelSelector, NodeSelectorTerm, Taint, Toleration
from apis.scheduling.constants import PHASE_PENDING
from apis.slo.common import parse_go_duration

DEFAULT_TTL_SECONDS = 24 * 3600.0
"""The CRD's ``ttl`` default (``24h``), applied when ``ttl`` is absent from the object altogether (the API
server would have defaulted it; simulate files may leave it out). An explicit ``ttl: null`` with no
``expires`` is invalid, as in Koordinator."""

ALIGNED = "Aligned"
RESTRICTED = "Restricted"


@dataclass(frozen=True, slots=True)
class OwnerTerm:
    """One owner of ``spec.owners``: every part that is set must match (DNF term).

    ``object_*`` / ``controller_*`` empty strings mean "any"; ``has_object`` / ``has_controller`` say
    whether the part was given at all.
    """

    has_object: bool = False
    object_uid: str = ""
    object_name: str = ""
    object_namespace: str = ""
    has_controller: bool = False
    controller_uid: str = ""
    controller_name: str = ""
    controller_kind: str = ""
    controller_api_version: str = ""
    controller_namespace: str = ""
    controller_only: bool = False
    """``controller: true`` in the reference: only the pod's controller ownerReference may match."""
    label_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class ReservationRecord:
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=FrozenDict)
    annotations: Mapping[str, str] = field(default_factory=FrozenDict)
    creation_timestamp: float | None = None
    deletion_timestamp: float | None = None
    template: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    """The raw ``spec.template`` (a PodTemplateSpec)."""
    template_json: str = ""
    """``template`` serialised with sorted keys, for cheap equality."""
    owners: tuple[OwnerTerm, ...] = ()
    ttl_seconds: float | None = None
    """``None`` when ``ttl`` is absent; 0 means never expires."""
    expires: float | None = None
    allocate_once: bool = True
    allocate_policy: str = ALIGNED
    pre_allocation: bool = False
    """``spec.preAllocation``: the reservation may adopt running pods when it is scheduled."""
    pre_allocation_mode: str = "Default"
    """``spec.preAllocationPolicy.mode``: ``Default`` (owner pods) or ``Cluster`` (labelled pods)."""
    pre_allocation_multiple: bool = False
    """``spec.preAllocationPolicy.enableMultiple``: several pods may be adopted."""
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    phase: str = PHASE_PENDING
    node_name: str = ""
    allocatable: Mapping[str, int] = field(default_factory=FrozenDict)
    allocated: Mapping[str, int] = field(default_factory=FrozenDict)
    current_owners: tuple[tuple[str, str, str], ...] = ()
    """(namespace, name, uid) of each pod whose ``reservation-allocated`` annotation names this one."""
    conditions: tuple[tuple[str, str, str, str], ...] = ()
    """(type, status, reason, message)."""
    invalid: str = ""
    malformed: bool = False
    """``invalid`` is a field that cannot be read at all (a ttl that is no duration, a quantity out of
    range, a template that is no object), not just a required part missing: the controller marks such a
    Reservation Failed, since no later event can make it expire or fit."""
    raw: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    """The JSON object this was parsed from: the lifecycle controller decides on it and writes its status
    back whole (conditions with their times, which the record does not keep)."""

    @property
    def is_valid(self) -> bool:
        return not self.invalid

    @property
    def is_available(self) -> bool:
        return self.phase == "Available" and bool(self.node_name)

    @property
    def is_terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed") or self.deletion_timestamp is not None

    @property
    def is_pending(self) -> bool:
        return self.phase in ("", "Pending") and not self.node_name and self.deletion_timestamp is None

    def condition(self, type_: str) -> tuple[str, str, str, str] | None:
        return next((c for c in self.conditions if c[0] == type_), None)


@dataclass(frozen=True, slots=True)
class ReservationAffinity:
    """The pod annotation ``scheduling.koordinator.sh/reservation-affinity``."""

    name: str = ""
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    reservation_selector: Mapping[str, str] | None = None
    tolerations: tuple[Toleration, ...] = ()


TEMPLATE_MAX_DEPTH = 100
"""Nesting accepted in ``spec.template``: a pod template needs about 15 levels."""


def parse_reservation(raw: Mapping[str, Any]) -> ReservationRecord:
    """A :class:`ReservationRecord` from the raw JSON object (see the module docstring)."""
    if not isinstance(raw, Mapping):
        raise invalid("", f"expected an object, got {type(raw).__name__}")
    meta = raw.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise invalid("metadata.name", "required").for_object("Reservation", "<unnamed>")
    assert isinstance(meta, Mapping)
    base = _meta_fields(meta)
    try:
        return _parse(raw, name, base)
    except (ParseError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return ReservationRecord(name=name, **base, invalid=f"invalid Reservation: {exc}", malformed=True, raw=raw)


def _meta_fields(meta: Mapping[str, Any]) -> dict[str, Any]:
    def text(key: str) -> str:
        value = meta.get(key)
        return value if isinstance(value, str) else ""

    def str_map(key: str) -> FrozenDict[str, str]:
        value = meta.get(key)
        if not isinstance(value, Mapping):
            return FrozenDict()
        return FrozenDict({str(k): str(v) for k, v in value.items()})

    def timestamp(key: str) -> float | None:
        try:
            return parse_timestamp(meta.get(key))
        except ValueError:
            return None

    return {
        "uid": text("uid"),
        "resource_version": text("resourceVersion"),
        "labels": str_map("labels"),
        "annotations": str_map("annotations"),
        "creation_timestamp": timestamp("creationTimestamp"),
        "deletion_timestamp": timestamp("deletionTimestamp"),
    }


def _parse(raw: Mapping[str, Any], name: str, base: dict[str, Any]) -> ReservationRecord:
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    if not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        raise invalid("spec", "expected an object")
    problems: list[str] = []
    template = spec.get("template")
    if template is not None and not isinstance(template, Mapping):
        raise invalid("spec.template", f"expected an object, got {type_name(template)}")
    if template and boundedjson.exceeds_depth(template, TEMPLATE_MAX_DEPTH):
        # The template is kept whole and encoded (template_json): bound it before anything recurses.
        raise invalid("spec.template", f"nested deeper than {TEMPLATE_MAX_DEPTH} levels")
    if not template:
        problems.append("spec.template is required")
        template = None
    else:
        _check_template(template, name)
    owners_raw = spec.get("owners")
    if owners_raw is not None and not isinstance(owners_raw, list):
        raise invalid("spec.owners", f"expected an array, got {type_name(owners_raw)}")
    owners = tuple(_owner(o, i) for i, o in enumerate(owners_raw or ()))
    if not owners:
        problems.append("spec.owners must name at least one owner")
    ttl_raw = spec.get("ttl")
    expires_raw = spec.get("expires")
    ttl = None if ttl_raw is None else _duration(ttl_raw, "spec.ttl")
    expires = None
    if expires_raw is not None:
        try:
            expires = parse_timestamp(expires_raw)
        except ParseError as err:
            raise err.under("spec.expires") from None
    if ttl is None and expires is None:
        if "ttl" in spec:
            problems.append("one of spec.ttl and spec.expires is required")
        else:
            ttl = DEFAULT_TTL_SECONDS
    policy = spec.get("allocatePolicy") or ALIGNED
    if policy not in (ALIGNED, RESTRICTED):
        problems.append(f"spec.allocatePolicy {policy!r} must be Aligned or Restricted")
    allocate_once = spec.get("allocateOnce")
    pre_policy = spec.get("preAllocationPolicy") or {}
    if not isinstance(pre_policy, Mapping):
        raise invalid("spec.preAllocationPolicy", f"expected an object, got {type_name(pre_policy)}")
    if pre_policy.get("mode") not in (None, "", "Default", "Cluster"):
        problems.append(f"spec.preAllocationPolicy.mode {pre_policy.get('mode')!r} must be Default or Cluster")
    conditions = tuple(
        (str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason", "")), str(c.get("message", "")))
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    )
    current = tuple(
        (str(o.get("namespace", "")), str(o.get("name", "")), str(o.get("uid", "")))
        for o in status.get("currentOwners") or ()
        if isinstance(o, Mapping)
    )
    return ReservationRecord(
        name=name,
        **base,
        raw=raw,
        template=template,
        template_json=json.dumps(template, sort_keys=True) if template is not None else "",
        owners=owners,
        ttl_seconds=ttl,
        expires=expires,
        allocate_once=True if allocate_once is None else bool(allocate_once),
        allocate_policy=policy,
        pre_allocation=bool(spec.get("preAllocation")),
        pre_allocation_mode=str(pre_policy.get("mode") or "Default"),
        pre_allocation_multiple=bool(pre_policy.get("enableMultiple")),
        unschedulable=bool(spec.get("unschedulable")),
        taints=parse_taints(spec.get("taints")),
        phase=str(status.get("phase") or PHASE_PENDING),
        node_name=str(status.get("nodeName") or ""),
        allocatable=_resources(status, "allocatable"),
        allocated=_resources(status, "allocated"),
        current_owners=current,
        conditions=conditions,
        invalid="; ".join(problems),
    )


def _resources(status: Mapping[str, Any], key: str) -> FrozenDict[str, int]:
    try:
        return parse_resource_list(status.get(key) or {})
    except ParseError as err:
        raise err.under(f"status.{key}") from None


def _duration(raw: Any, path: str) -> float:
    """A ``metav1.Duration`` (a Go duration string); anything else is malformed, as Go's decoder says."""
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        seconds = parse_go_duration(text) if isinstance(raw, str) else None
    except ValueError:
        seconds = None
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise invalid(path, f'invalid duration {quote(text)}: expected a Go duration such as "24h" or "30m"')
    return seconds


def _check_template(template: Mapping[str, Any], name: str) -> None:
    """The template's pod spec must be a pod the API server would accept (quantities in range,
    requests non-negative); containers may be absent, as for Koordinator's reserve pods."""
    pod_spec = template.get("spec")
    if pod_spec is not None and not isinstance(pod_spec, Mapping):
        raise invalid("spec.template.spec", f"expected an object, got {type_name(pod_spec)}")
    try:
        parse_pod({"metadata": {"name": name}, "spec": dict(pod_spec or {})}, require_containers=False)
    except ParseError as err:
        raise invalid(join_path("spec.template", err.field), err.message) from None


def _owner(raw: Any, index: int) -> OwnerTerm:
    if not isinstance(raw, Mapping):
        raise invalid(f"spec.owners[{index}]", "expected an object")
    obj = raw.get("object")
    ctrl = raw.get("controller")
    selector_raw = raw.get("labelSelector")
    if obj is None and ctrl is None and selector_raw is None:
        raise invalid(f"spec.owners[{index}]", "an owner needs object, controller or labelSelector")
    term: dict[str, Any] = {}
    if isinstance(obj, Mapping):
        term |= {
            "has_object": True,
            "object_uid": str(obj.get("uid") or ""),
            "object_name": str(obj.get("name") or ""),
            "object_namespace": str(obj.get("namespace") or ""),
        }
    if isinstance(ctrl, Mapping):
        term |= {
            "has_controller": True,
            "controller_uid": str(ctrl.get("uid") or ""),
            "controller_name": str(ctrl.get("name") or ""),
            "controller_kind": str(ctrl.get("kind") or ""),
            "controller_api_version": str(ctrl.get("apiVersion") or ""),
            "controller_namespace": str(ctrl.get("namespace") or ""),
            "controller_only": bool(ctrl.get("controller")),
        }
    if selector_raw is not None:
        try:
            term["label_selector"] = parse_label_selector(selector_raw)
        except ParseError as err:
            raise err.under(f"spec.owners[{index}].labelSelector") from None
    return OwnerTerm(**term)


def parse_reservation_affinity(text: str) -> ReservationAffinity:
    """The ``reservation-affinity`` annotation's JSON. Raises ``ValueError`` when malformed."""
    raw = boundedjson.loads(text)
    if not isinstance(raw, Mapping):
        raise ValueError("reservation affinity must be a JSON object")
    required = raw.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if isinstance(required, Mapping):
        terms = tuple(parse_node_selector_term(t) for t in required.get("reservationSelectorTerms") or ())
    selector = raw.get("reservationSelector")
    return ReservationAffinity(
        name=str(raw.get("name") or ""),
        required_terms=terms,
        reservation_selector=FrozenDict({str(k): str(v) for k, v in selector.items()})
        if isinstance(selector, Mapping)
        else None,
        tolerations=parse_tolerations(raw.get("tolerations")),
    )
