"""Parsing of label selectors, node selector terms and affinity (``spec.affinity``) from raw JSON.

Used by :mod:`apis.core.parse`; each ``*_fragment`` function takes the fragment as an already
type-checked object and raises ``ParseError`` with paths relative to it.
"""

from __future__ import annotations

from apis.core.errors import ParseError, quote
from apis.core.jsonfields import (
    Json,
    JsonList,
    as_map,
    check_item,
    get_int,
    get_list,
    get_map,
    get_required_str,
    get_str,
    get_str_list,
    get_str_map,
    invalid,
)
from apis.core.types import (
    Affinity,
    LabelSelector,
    NodeAffinity,
    NodeSelectorTerm,
    Operator,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    SelectorRequirement,
    WeightedPodAffinityTerm,
)

_OPERATORS = {o.value: o for o in Operator}
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _requirements(raw: JsonList, field: str) -> tuple[SelectorRequirement, ...]:
    out = []
    for i, item in enumerate(raw):
        r = check_item(item, field, i)
        try:
            operator_name = get_required_str(r, "operator")
            operator = _OPERATORS.get(operator_name)
            if operator is None:
                raise invalid("operator", f"unknown operator {quote(operator_name)}")
            out.append(SelectorRequirement(get_required_str(r, "key"), operator, get_str_list(r, "values")))
        except ParseError as err:
            raise err.under(f"{field}[{i}]") from None
    return tuple(out)


def parse_label_selector_fragment(raw: Json) -> LabelSelector:
    """A ``metav1.LabelSelector`` object."""
    return LabelSelector(
        match_labels=get_str_map(raw, "matchLabels"),
        match_expressions=_requirements(get_list(raw, "matchExpressions"), "matchExpressions"),
    )


def _optional_selector(raw: Json, key: str) -> LabelSelector | None:
    value = raw.get(key)
    if value is None:
        return None
    try:
        return parse_label_selector_fragment(as_map(value, ""))
    except ParseError as err:
        raise err.under(key) from None


def parse_node_selector_term_fragment(raw: Json) -> NodeSelectorTerm:
    """A ``NodeSelectorTerm`` object."""
    return NodeSelectorTerm(
        match_expressions=_requirements(get_list(raw, "matchExpressions"), "matchExpressions"),
        match_fields=_requirements(get_list(raw, "matchFields"), "matchFields"),
    )


def _node_affinity(raw: Json) -> NodeAffinity:
    required = None
    required_raw = raw.get(_REQUIRED)
    if required_raw is not None:
        terms = []
        try:
            for i, item in enumerate(get_list(as_map(required_raw, ""), "nodeSelectorTerms")):
                term = check_item(item, "nodeSelectorTerms", i)
                try:
                    terms.append(parse_node_selector_term_fragment(term))
                except ParseError as err:
                    raise err.under(f"nodeSelectorTerms[{i}]") from None
        except ParseError as err:
            raise err.under(_REQUIRED) from None
        required = tuple(terms)
    preferred = []
    for i, item in enumerate(get_list(raw, _PREFERRED)):
        p = check_item(item, _PREFERRED, i)
        try:
            try:
                preference = parse_node_selector_term_fragment(get_map(p, "preference"))
            except ParseError as err:
                raise err.under("preference") from None
            preferred.append(PreferredSchedulingTerm(weight=get_int(p, "weight"), preference=preference))
        except ParseError as err:
            raise err.under(f"{_PREFERRED}[{i}]") from None
    return NodeAffinity(required=required, preferred=tuple(preferred))


def _pod_affinity_term(raw: Json) -> PodAffinityTerm:
    return PodAffinityTerm(
        topology_key=get_str(raw, "topologyKey"),
        label_selector=_optional_selector(raw, "labelSelector"),
        namespaces=get_str_list(raw, "namespaces"),
        namespace_selector=_optional_selector(raw, "namespaceSelector"),
        match_label_keys=get_str_list(raw, "matchLabelKeys"),
        mismatch_label_keys=get_str_list(raw, "mismatchLabelKeys"),
    )


def _pod_affinity(raw: Json) -> PodAffinity:
    required = []
    for i, item in enumerate(get_list(raw, _REQUIRED)):
        term = check_item(item, _REQUIRED, i)
        try:
            required.append(_pod_affinity_term(term))
        except ParseError as err:
            raise err.under(f"{_REQUIRED}[{i}]") from None
    preferred = []
    for i, item in enumerate(get_list(raw, _PREFERRED)):
        w = check_item(item, _PREFERRED, i)
        try:
            try:
                weighted_term = _pod_affinity_term(get_map(w, "podAffinityTerm"))
            except ParseError as err:
                raise err.under("podAffinityTerm") from None
            preferred.append(WeightedPodAffinityTerm(weight=get_int(w, "weight"), term=weighted_term))
        except ParseError as err:
            raise err.under(f"{_PREFERRED}[{i}]") from None
    return PodAffinity(required=tuple(required), preferred=tuple(preferred))


def parse_affinity_fragment(raw: Json) -> Affinity:
    """A pod's ``spec.affinity`` object."""
    node = raw.get("nodeAffinity")
    pod = raw.get("podAffinity")
    anti = raw.get("podAntiAffinity")
    try:
        node_affinity = None if node is None else _node_affinity(as_map(node, ""))
    except ParseError as err:
        raise err.under("nodeAffinity") from None
    try:
        pod_affinity = None if pod is None else _pod_affinity(as_map(pod, ""))
    except ParseError as err:
        raise err.under("podAffinity") from None
    try:
        pod_anti_affinity = None if anti is None else _pod_affinity(as_map(anti, ""))
    except ParseError as err:
        raise err.under("podAntiAffinity") from None
    return Affinity(node_affinity=node_affinity, pod_affinity=pod_affinity, pod_anti_affinity=pod_anti_affinity)
