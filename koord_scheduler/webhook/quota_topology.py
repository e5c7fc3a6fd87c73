"""Koordinator's ElasticQuota webhook checks, ported rule for rule with their messages. Pure.

Models Koordinator v1.8 ``pkg/webhook/elasticquota/quota_topology.go`` (``ValidAddQuota``,
``ValidUpdateQuota``, ``ValidDeleteQuota``, ``fillQuotaDefaultInformation``) and
``quota_topology_check.go``. The topology is the quotas the server watches, by name
(Koordinator's ``quotaInfoMap``); a quota's children are the quotas whose parent label names it
(``quotaHierarchyInfo``). Maps Go iterates in random order are taken in name order here, so the message is
always the one for the first resource or child by name.

Rules, in Koordinator's order:

- the quota itself (:func:`self_item_problem`): no negative quantity in ``max``, then ``min``; the
  ``shared-weight`` annotation a JSON ResourceList with no negative value; every resource of ``min`` in
  ``max`` and not above it; for each resource of the ``max-strict-check-resource-keys`` annotation that
  ``status.used`` has, ``max`` has it and is not below it;
- its place in the tree (:func:`topology_problem`): ``is-parent`` does not turn false while the quota has
  children, nor true while pods are bound to it; ``tree-id`` does not change, equals the parent's (below
  the root) and every child's; then, unless the quota is at the root and not a parent: the parent exists
  and is a parent; max keys equal the parent's and every child's (with ``ElasticQuotaEnableUpdateResourceKey``:
  included in the parent's, and every child's in its own) and min keys are included likewise; unless
  labelled ``allow-force-update: "true"`` or ``is-root: "true"``: the siblings' min plus its own is at most the
  parent's min, and its children's min at most its own; with ``ElasticQuotaGuaranteeUsage`` (and a
  ``tree-id``): a min above the ``guaranteed`` annotation must be guaranteed by an ancestor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.colocation import canonical_quantity
from apis.core.errors import QuantityError
from apis.core.quantity import quantity_nanos
from apis.scheduling.elasticquota import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    DEFAULT_QUOTA,
    LABEL_IS_PARENT,
    LABEL_IS_ROOT,
    LABEL_PARENT,
    LABEL_TREE_ID,
    PREFIX,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    QuotaRecord,
)

Json = dict[str, Any]

LABEL_ALLOW_FORCE_UPDATE = PREFIX + "allow-force-update"
ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS = PREFIX + "max-strict-check-resource-keys"
ANNOTATION_GUARANTEED = PREFIX + "guaranteed"


def map_of(obj: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    """``obj[key]`` when it is an object, else an empty one."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


# ----- the quota as Koordinator's QuotaInfo sees it -----


@dataclass(frozen=True, slots=True)
class QuotaInfo:
    """Koordinator's ``QuotaInfo``: what the topology checks read of one quota (amounts are the
    scheduler's: cpu in millicores)."""

    name: str
    parent: str
    is_parent: bool = False
    tree_id: str = ""
    is_tree_root: bool = False
    allow_force_update: bool = False
    min: Mapping[str, int] = field(default_factory=dict)
    max: Mapping[str, int] = field(default_factory=dict)
    guaranteed: Mapping[str, int] = field(default_factory=dict)


def info_of(record: QuotaRecord) -> QuotaInfo:
    labels = record.meta.labels
    return QuotaInfo(
        name=record.name,
        parent=record.parent,
        is_parent=record.is_parent,
        tree_id=record.tree_id,
        is_tree_root=labels.get(LABEL_IS_ROOT) == "true",
        allow_force_update=labels.get(LABEL_ALLOW_FORCE_UPDATE) == "true",
        min=record.min,
        max=record.max,
        guaranteed=_json_resources(record.meta.annotations.get(ANNOTATION_GUARANTEED)),
    )


def _json_resources(raw: str | None) -> dict[str, int]:
    """A JSON ResourceList annotation as amounts; unreadable is empty (Koordinator ignores the error)."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
        if not isinstance(value, dict):
            return {}
        from apis.core.parse import parse_resource_list

        return dict(parse_resource_list(value))
    except (ValueError, TypeError):
        return {}


def children_of(name: str, quotas: Mapping[str, QuotaRecord]) -> list[str]:
    """``quotaHierarchyInfo[name]`` in name order."""
    return sorted(r.name for r in quotas.values() if r.parent == name and r.name != name)


def _go_list(names: Iterable[str]) -> str:
    """Go's ``%v`` of a ``[]ResourceName``: ``[cpu memory]``."""
    return "[" + " ".join(names) + "]"


# ----- validateQuotaSelfItem -----


def _quantities(obj: Mapping[str, Any], *path: str) -> dict[str, Any]:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return dict(node) if isinstance(node, Mapping) else {}


def unreadable_quantity(obj: Mapping[str, Any]) -> str:
    """``<field>: <why>`` for the first quantity of spec.min, spec.max or status.used that is not a
    Kubernetes quantity (Koordinator's decoder refuses the object then), else ``""``."""
    for path in (("spec", "max"), ("spec", "min"), ("status", "used")):
        for key, value in sorted(_quantities(obj, *path).items()):
            try:
                quantity_nanos(value)
            except QuantityError as exc:
                return f"{'.'.join(path)}.{key}: {exc}"
    return ""


def _negative(resources: Mapping[str, Any]) -> list[str]:
    return sorted(k for k, v in resources.items() if quantity_nanos(v) < 0)


def self_item_problem(obj: Mapping[str, Any]) -> str:
    """``validateQuotaSelfItem`` on the raw object (every quantity readable: see :func:`unreadable_quantity`)."""
    meta = map_of(obj, "metadata")
    name = str(meta.get("name", ""))
    annotations = map_of(meta, "annotations")
    max_ = _quantities(obj, "spec", "max")
    min_ = _quantities(obj, "spec", "min")
    used = _quantities(obj, "status", "used")
    negative = _negative(max_)
    if negative:
        return f"{name} quota.Spec.Max's value < 0, in dimensions :{_go_list(negative)}"
    negative = _negative(min_)
    if negative:
        return f"{name} quota.Spec.Min's value < 0, in dimensions :{_go_list(negative)}"
    raw_weight = annotations.get(ANNOTATION_SHARED_WEIGHT, "")
    if raw_weight:
        weight, problem = _resource_list_json(raw_weight)
        if problem:
            return problem
        negative = _negative(weight)
        if negative:
            return (
                f"{name} quota.Annotation[{ANNOTATION_SHARED_WEIGHT}]'s value < 0, in dimension :{_go_list(negative)}"
            )
    for key in sorted(min_):
        if key not in max_:
            return f"resourceKey {key} of quota {name} is included in min, which is not included in max"
        if quantity_nanos(max_[key]) < quantity_nanos(min_[key]):
            return (
                f"resourceKey {key} of quota {name} min {canonical_quantity(min_[key])} > max "
                f"{canonical_quantity(max_[key])}"
            )
    keys, problem = max_strict_check_keys(annotations.get(ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS, ""))
    if problem:
        return f"{name} quota.Annotation[{ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS}]'s value is invalid: {problem}"
    for key in keys:
        if key not in used:
            continue  # never counted yet: nothing to compare
        if key not in max_:
            return (
                f"resourceKey {key} of quota {name} is included in used, which is not included in max but should "
                f"check max >= used"
            )
        if quantity_nanos(max_[key]) < quantity_nanos(used[key]):
            return (
                f"resourceKey {key} of quota {name} max {canonical_quantity(max_[key])} < used "
                f"{canonical_quantity(used[key])}"
            )
    return ""


def _resource_list_json(raw: str) -> tuple[dict[str, Any], str]:
    """(the ResourceList, ``""``) or ({}, why it is not one)."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {}, f"invalid JSON: {exc}"
    if value is None:  # Go decodes null into an empty list
        return {}, ""
    if not isinstance(value, dict):
        return {}, f"json: cannot unmarshal {type(value).__name__} into Go value of type v1.ResourceList"
    for key, quantity in value.items():
        try:
            quantity_nanos(quantity)
        except QuantityError as exc:
            return {}, f"{key}: {exc}"
    return value, ""


def max_strict_check_keys(raw: str) -> tuple[list[str], str]:
    """``GetMaxStrictCheckResourceKeys``: (the keys, ``""``) or ([], why the annotation is unreadable)."""
    if not raw:
        return [], ""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return [], f"invalid JSON: {exc}"
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return [], "json: cannot unmarshal into Go value of type []v1.ResourceName"
    return list(value), ""


# ----- validateQuotaTopology -----


@dataclass(frozen=True, slots=True)
class TopologyOptions:
    enable_update_resource_key: bool = False
    """``ElasticQuotaEnableUpdateResourceKey``."""
    guarantee_usage: bool = False
    """``ElasticQuotaGuaranteeUsage``."""


DEFAULT_TOPOLOGY_OPTIONS = TopologyOptions()


def topology_problem(
    old: QuotaInfo | None,
    new: QuotaInfo,
    quotas: Mapping[str, QuotaRecord],
    *,
    has_pods: bool = False,
    options: TopologyOptions = DEFAULT_TOPOLOGY_OPTIONS,
) -> str:
    """``validateQuotaTopology``: ``old`` is the quota as the topology has it (None on CREATE); ``has_pods``
    answers ``hasQuotaBoundedPods`` (asked only when ``is-parent`` turns true)."""
    if new.name == ROOT_QUOTA:
        return ""
    kids = children_of(new.name, quotas)
    if old is not None and old.is_parent != new.is_parent:
        if kids and not new.is_parent:
            return f"quota has children, isParent is forbidden to modify as false, quotaName:{old.name}"
        if new.is_parent and has_pods:
            return f"quota has bound pods, isParent is forbidden to modify as true, quotaName: {old.name}"
    message = tree_id_problem(old, new, quotas, kids)
    if message:
        return message
    if new.parent == ROOT_QUOTA and not new.is_parent:
        return ""
    message = parent_problem(new.name, new.parent, quotas)
    if message:
        return message
    message = key_problem(new, quotas, kids, options.enable_update_resource_key)
    if message:
        return f"failed to check sub and parent group quotaKey, err: {message}"
    message = min_sum_problem(new, quotas, kids)
    if message:
        return message
    if options.guarantee_usage:
        message = guarantee_problem(new, quotas)
        if message:
            return f"{message} {new.name}"
    return ""


def needs_pod_check(old: QuotaInfo | None, new: QuotaInfo) -> bool:
    """Whether :func:`topology_problem` needs ``has_pods``: ``is-parent`` turning true on an UPDATE."""
    return new.name != ROOT_QUOTA and old is not None and not old.is_parent and new.is_parent


def tree_id_problem(
    old: QuotaInfo | None, new: QuotaInfo, quotas: Mapping[str, QuotaRecord], kids: Sequence[str]
) -> str:
    if old is not None and old.tree_id != new.tree_id:
        return f"{new.name} tree id changed [{old.tree_id}] vs [{new.tree_id}]"
    if new.parent != ROOT_QUOTA:
        parent = quotas.get(new.parent)
        if parent is not None and parent.tree_id != new.tree_id:
            return f"{new.name} tree id is different from parent {parent.name}, [{new.tree_id}] vs [{parent.tree_id}]"
    for kid in kids:
        child = quotas[kid]
        if child.tree_id != new.tree_id:
            return f"{new.name} tree id is different from child {kid}, [{new.tree_id}] vs [{child.tree_id}]"
    return ""


def parent_problem(name: str, parent_name: str, quotas: Mapping[str, QuotaRecord]) -> str:
    """``checkParentQuotaInfo``."""
    if parent_name == ROOT_QUOTA:
        return ""
    parent = quotas.get(parent_name)
    if parent is None:
        return f"{name} has parentName {parent_name} but not find parentInfo in quotaInfoMap"
    if not parent.is_parent:
        return f"{name} has parentName {parent_name} but the parentQuotaInfo's IsParent is false"
    return ""


def key_problem(new: QuotaInfo, quotas: Mapping[str, QuotaRecord], kids: Sequence[str], update_keys: bool) -> str:
    """``checkSubAndParentGroupQuotaKey`` (its message, without the wrapper)."""
    prefix = "checkSubAndParentGroupQuotaKey failed: "
    if new.parent != ROOT_QUOTA:
        parent = quotas[new.parent]
        if update_keys:
            if not set(new.max) <= set(parent.max):
                return f"{prefix}{new.name}'s max keys are not all included in {new.parent}'s"
        elif set(new.max) != set(parent.max):
            return f"{prefix}{new.parent}'s max keys are not the same with {new.name}'s"
        if not set(new.min) <= set(parent.min):
            return f"{prefix}{new.name}'s min keys are not all included in {new.parent}'s"
    for kid in kids:
        child = quotas[kid]
        if update_keys:
            if not set(child.max) <= set(new.max):
                return f"{prefix}{kid}'s max keys are not all included in {new.name}'s"
        elif set(child.max) != set(new.max):
            return f"{prefix}{kid}'s max keys are not the same with {new.name}'s"
        if not set(child.min) <= set(new.min):
            return f"{prefix}{kid}'s min keys are not all included in {new.name}'s"
    return ""


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for key, amount in more.items():
        total[key] = total.get(key, 0) + amount


def _within(amounts: Mapping[str, int], limit: Mapping[str, int]) -> bool:
    """``LessThanOrEqualCompletely``: every resource of ``amounts`` at most ``limit``'s (absent: 0)."""
    return all(amount <= limit.get(key, 0) for key, amount in amounts.items())


def min_sum_problem(new: QuotaInfo, quotas: Mapping[str, QuotaRecord], kids: Sequence[str]) -> str:
    """``checkMinQuotaValidate``."""
    if new.allow_force_update or new.is_tree_root:
        return ""
    if new.parent != ROOT_QUOTA:
        total = dict(new.min)
        for sibling in children_of(new.parent, quotas):
            if sibling != new.name:
                _add(total, quotas[sibling].min)
        if not _within(total, quotas[new.parent].min):
            return f"checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {new.parent}"
    if kids:
        total = {}
        for kid in kids:
            _add(total, quotas[kid].min)
        if not _within(total, new.min):
            return f"checkMinQuotaSum all children's MinQuota > current MinQuota, current: {new.name}"
    return ""


def _max_of(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {key: max(a.get(key, 0), b.get(key, 0)) for key in set(a) | set(b)}


def guarantee_problem(new: QuotaInfo, quotas: Mapping[str, QuotaRecord]) -> str:
    """``checkGuaranteedForMin`` (its message, without the quota name Koordinator appends)."""
    if new.allow_force_update or not new.tree_id or new.is_tree_root:
        return ""
    if _within(new.min, new.guaranteed):
        return ""
    wanted = _max_of(new.min, new.guaranteed)
    me, parent_name = new.name, new.parent
    while True:
        if parent_name == ROOT_QUOTA:
            return f"tree root quota {me} can't guarantee for min"
        parent_record = quotas.get(parent_name)
        if parent_record is None:
            return f"parent {parent_name} not found"
        parent = info_of(parent_record)
        total = dict(wanted)
        for sibling in children_of(parent_name, quotas):
            if sibling != me:
                _add(total, info_of(quotas[sibling]).guaranteed)
        wanted = _max_of(parent.min, total)
        if _within(wanted, parent.guaranteed):
            return ""
        me, parent_name = parent.name, parent.parent


# ----- ValidAddQuota / ValidUpdateQuota / ValidDeleteQuota -----


def add_problem(
    obj: Mapping[str, Any],
    new: QuotaRecord,
    quotas: Mapping[str, QuotaRecord],
    *,
    options: TopologyOptions = DEFAULT_TOPOLOGY_OPTIONS,
) -> str:
    """``ValidAddQuota``: ``obj`` the raw quota, ``new`` it parsed, ``quotas`` the topology."""
    if new.name in quotas:
        return f"AddQuota quota already exist:{new.name}"
    for namespace in new.namespaces:
        owner = _namespace_owner(namespace, quotas)
        if owner:
            return f"AddQuota quota {new.name}'s annotation namespace {namespace} is already bound to quota {owner}"
    return self_item_problem(obj) or topology_problem(None, info_of(new), quotas, options=options)


def fields_unchanged(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """``quotaFieldsCopy`` equal: the parent, is-parent and tree-id labels, the namespaces annotation
    and the spec (quantities by value) are the same, so the update is not checked at all."""
    return _tree_fields(old) == _tree_fields(new)


def _tree_fields(obj: Mapping[str, Any]) -> tuple[object, ...]:
    meta = map_of(obj, "metadata")
    labels = map_of(meta, "labels")
    annotations = map_of(meta, "annotations")

    def values(*path: str) -> tuple[tuple[str, object], ...] | None:
        spec = map_of(obj, "spec")
        node = spec.get(path[0]) if isinstance(spec, Mapping) else None
        if node is None:
            return None
        if not isinstance(node, Mapping):
            return (("", repr(node)),)
        out: list[tuple[str, object]] = []
        for key, value in sorted(node.items()):
            try:
                out.append((str(key), quantity_nanos(value)))
            except QuantityError:
                out.append((str(key), repr(value)))
        return tuple(out)

    return (
        labels.get(LABEL_PARENT, ""),
        labels.get(LABEL_IS_PARENT, ""),
        labels.get(LABEL_TREE_ID, ""),
        annotations.get(ANNOTATION_NAMESPACES, ""),
        values("min"),
        values("max"),
    )


def update_problem(
    obj: Mapping[str, Any],
    old_obj: Mapping[str, Any],
    new: QuotaRecord,
    quotas: Mapping[str, QuotaRecord],
    *,
    has_pods: bool = False,
    options: TopologyOptions = DEFAULT_TOPOLOGY_OPTIONS,
) -> str:
    """``ValidUpdateQuota``: ``obj`` / ``old_obj`` the raw new and old quota, ``new`` the new one parsed."""
    if fields_unchanged(old_obj, obj):
        return ""
    if new.name in (SYSTEM_QUOTA, ROOT_QUOTA):
        return f"invalid quota {new.name}"
    for namespace in new.namespaces:
        owner = _namespace_owner(namespace, quotas)
        if owner and owner != new.name:
            return (
                f"UpdadteQuota, quota {new.name} update namespaces, but namespace {namespace} is already bound to "
                f"quota {owner}"
            )
    current = quotas.get(new.name)
    if current is None:
        return f"UpdateQuota quota not exist in quotaInfoMap:{new.name}"
    return self_item_problem(obj) or topology_problem(
        info_of(current), info_of(new), quotas, has_pods=has_pods, options=options
    )


def delete_problem(name: str, quotas: Mapping[str, QuotaRecord], pods: Sequence[str] = ()) -> str:
    """``ValidDeleteQuota``; ``pods``: the names of the pods labelled with the quota."""
    if name in (SYSTEM_QUOTA, ROOT_QUOTA, DEFAULT_QUOTA):
        return f"can not delete quotaGroup :{name}"
    if name not in quotas:
        return f"not found quota:{name}"
    kids = children_of(name, quotas)
    if kids:
        return f"delete quota failed, quota {name} has {len(kids)} child quotas"
    if pods:
        shown = list(pods) if len(pods) <= 2 else [pods[0], pods[1], "..."]
        return f"delete quota failed, quota {name} has {len(pods)} child pods: {', '.join(shown)}"
    return ""


def _namespace_owner(namespace: str, quotas: Mapping[str, QuotaRecord]) -> str:
    """The quota (first by name) whose ``namespaces`` annotation binds ``namespace`` (``namespaceToQuotaMap``)."""
    return next((r.name for r in sorted(quotas.values(), key=lambda r: r.name) if namespace in r.namespaces), "")


# ----- fillQuotaDefaultInformation -----


def quota_defaults(obj: Mapping[str, Any], quotas: Mapping[str, QuotaRecord]) -> tuple[Json, str]:
    """``fillQuotaDefaultInformation``: (the quota with Koordinator's defaults, ``""``) or (``obj``, the
    reason it cannot be defaulted). A copy; ``obj`` is not changed.

    The parent label defaults to ``koordinator-root-quota``; a quota below another parent without a
    ``tree-id`` gets its parent's (a parent that does not exist is refused); the ``shared-weight``
    annotation defaults to ``spec.max`` (as Go marshals it: keys sorted, quantities canonical, ``null`` for
    no max), and an existing one gets exactly ``max``'s keys (missing ones take ``max``'s value). The root
    quota is left alone; ``is-parent`` is not written (Koordinator does not)."""
    meta = map_of(obj, "metadata")
    name = str(meta.get("name", ""))
    if name == ROOT_QUOTA:
        return dict(obj), ""
    out: Json = json.loads(json.dumps(obj))
    out_meta = out.setdefault("metadata", {})
    labels: dict[str, str] = dict(map_of(out_meta, "labels"))
    annotations: dict[str, str] = dict(map_of(out_meta, "annotations"))
    out_meta["labels"], out_meta["annotations"] = labels, annotations
    if not labels.get(LABEL_PARENT):
        labels[LABEL_PARENT] = ROOT_QUOTA
    if not labels.get(LABEL_TREE_ID) and labels[LABEL_PARENT] != ROOT_QUOTA:
        parent = quotas.get(labels[LABEL_PARENT])
        if parent is None:
            return dict(obj), f"fill quota {name} failed, parent not exist"
        if parent.tree_id:
            labels[LABEL_TREE_ID] = parent.tree_id
    spec = map_of(out, "spec")
    max_raw = spec.get("max") if isinstance(spec, Mapping) else None
    max_ = dict(max_raw) if isinstance(max_raw, Mapping) else None
    weight_raw = annotations.get(ANNOTATION_SHARED_WEIGHT, "")
    if not weight_raw:
        annotations[ANNOTATION_SHARED_WEIGHT] = go_resource_list_json(max_)
        return out, ""
    weight, problem = _resource_list_json(weight_raw)
    if problem:
        return dict(obj), f"fillDefaultQuotaInfo unmarshal sharedWeight failed:{problem}"
    fixed = False
    for key, value in (max_ or {}).items():
        if key not in weight:
            weight[key] = value
            fixed = True
    for key in [k for k in weight if k not in (max_ or {})]:
        del weight[key]
        fixed = True
    if fixed:
        annotations[ANNOTATION_SHARED_WEIGHT] = go_resource_list_json(weight)
    return out, ""


def go_resource_list_json(resources: Mapping[str, Any] | None) -> str:
    """``json.Marshal`` of a ``ResourceList``: ``null`` for none, else keys sorted and quantities in their
    canonical form (``{"cpu":"120","memory":"1Mi"}``)."""
    if resources is None:
        return "null"
    return json.dumps({k: canonical_quantity(v) for k, v in sorted(resources.items())}, separators=(",", ":"))
