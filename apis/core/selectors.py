"""Label selector and node selector matching, exactly as Kubernetes evaluates them. Pure functions.

- :func:`label_selector_matches`: ``metav1.LabelSelectorAsSelector(sel).Matches(labels)``
  (``apimachinery/pkg/apis/meta/v1/helpers.go``, ``apimachinery/pkg/labels/selector.go``).
- :func:`node_selector_term_matches` / :func:`node_selector_matches`: the required node affinity of
  ``component-helpers/scheduling/corev1/nodeaffinity``.

Selectors Kubernetes would fail to build (``In`` / ``NotIn`` with no values, ``Exists`` with values,
``Gt`` / ``Lt`` without exactly one integer, an operator a label selector does not allow) never match
here: that is what the scheduler does with them (the term is skipped with a parse error), and the API
server rejects most of them anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from apis.core.types import LabelSelector, NodeSelectorTerm, Operator, SelectorRequirement

NODE_NAME_FIELD = "metadata.name"
"""The only field a node selector's ``matchFields`` can name."""

_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_LABEL_SELECTOR_OPERATORS = frozenset({Operator.IN, Operator.NOT_IN, Operator.EXISTS, Operator.DOES_NOT_EXIST})


def parse_go_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: optional sign, ASCII digits, in range; else ``None``.

    Stricter than ``int()``, which accepts spaces and underscores that Go rejects.
    """
    if _INT64.fullmatch(text) is None:
        return None
    number = int(text)
    if number < _INT64_MIN or number > _INT64_MAX:
        return None
    return number


def requirement_matches(requirement: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One requirement against a label set (``labels.Requirement.Matches``), for all six operators.

    ``NotIn`` and ``DoesNotExist`` match when the key is absent; ``Gt`` / ``Lt`` need the label to be
    present and both values to be integers. An invalid requirement (see the module docstring) is False.
    """
    operator = requirement.operator
    values = requirement.values
    if operator is Operator.IN:
        value = labels.get(requirement.key)
        return value is not None and value in values
    if operator is Operator.NOT_IN:
        if not values:
            return False
        value = labels.get(requirement.key)
        return value is None or value not in values
    if operator is Operator.EXISTS:
        return not values and requirement.key in labels
    if operator is Operator.DOES_NOT_EXIST:
        return not values and requirement.key not in labels
    # Gt / Lt
    value = labels.get(requirement.key)
    if value is None or len(values) != 1:
        return False
    want = parse_go_int64(values[0])
    have = parse_go_int64(value)
    if want is None or have is None:
        return False
    return have > want if operator is Operator.GT else have < want


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfies a ``metav1.LabelSelector``.

    ``None`` matches nothing (``labels.Nothing()``); an empty selector matches everything. ``Gt`` / ``Lt``
    are not label selector operators, so a selector using them matches nothing.
    """
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for requirement in selector.match_expressions:
        if requirement.operator not in _LABEL_SELECTOR_OPERATORS:
            return False
        if not requirement_matches(requirement, labels):
            return False
    return True


def _field_requirement_matches(requirement: SelectorRequirement, node_name: str) -> bool:
    """``nodeSelectorRequirementsAsFieldSelector``: In / NotIn, exactly one value, on ``metadata.name``."""
    if len(requirement.values) != 1:
        return False
    # Any other key reads as the empty string, as fields.Set.Get does for a missing field.
    field_value = node_name if requirement.key == NODE_NAME_FIELD else ""
    if requirement.operator is Operator.IN:
        return field_value == requirement.values[0]
    if requirement.operator is Operator.NOT_IN:
        return field_value != requirement.values[0]
    return False


def node_selector_term_matches(term: NodeSelectorTerm, node_labels: Mapping[str, str], node_name: str) -> bool:
    """Whether a node satisfies one ``NodeSelectorTerm`` (its requirements are ANDed).

    A term with no requirements matches nothing, as in Kubernetes.
    """
    if not term.match_expressions and not term.match_fields:
        return False
    for requirement in term.match_expressions:
        if not requirement_matches(requirement, node_labels):
            return False
    return all(_field_requirement_matches(requirement, node_name) for requirement in term.match_fields)


def node_selector_matches(terms: Iterable[NodeSelectorTerm], node_labels: Mapping[str, str], node_name: str) -> bool:
    """Whether a node satisfies a ``NodeSelector``: any one of ``terms`` (ORed). No terms match nothing."""
    return any(node_selector_term_matches(term, node_labels, node_name) for term in terms)


def node_selector_map_matches(node_selector: Mapping[str, str] | None, node_labels: Mapping[str, str]) -> bool:
    """``spec.nodeSelector``: every key must be present with the same value. ``None`` or empty matches all."""
    if not node_selector:
        return True
    return all(node_labels.get(key) == value for key, value in node_selector.items())
