"""NodeAffinity's maths as pure functions of plain values.

Selector matching itself (operators, ``matchFields``, empty terms) is :mod:`apis.core.selectors`'; this
module turns it into masks over node positions, PreFilter node names and preferred-term scores. The
required-selector match (:func:`~koord_scheduler.plugins.helpers.matches_required`) is shared with
PodTopologySpread's nodeAffinityPolicy, so it lives in :mod:`koord_scheduler.plugins.helpers`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from apis.core.selectors import node_selector_term_matches
from apis.core.types import Node, NodeSelectorTerm, Operator, PreferredSchedulingTerm
from koord_scheduler.framework.snapshot import BoolArray, IntArray, Positions
from koord_scheduler.plugins.helpers import RequiredSelector, matches_required, required_mask

OBJECT_NAME_FIELD = "metadata.name"


def term_mask(term: NodeSelectorTerm, nodes: Iterable[tuple[int, Node]], capacity: int) -> BoolArray:
    """``mask[pos]``: the node at ``pos`` matches one preferred term."""
    mask = np.zeros(capacity, dtype=np.bool_)
    matching = [pos for pos, node in nodes if node_selector_term_matches(term, node.labels, node.name)]
    mask[matching] = True
    return mask


def pre_filter_node_names(terms: Sequence[NodeSelectorTerm]) -> frozenset[str] | None:
    """The nodes the required terms name through ``matchFields metadata.name In [...]``.

    Within a term such requirements are ANDed (intersection); terms are ORed (union). Any term without
    one leaves every node possible: None, as do no terms at all (Filter then rejects every node). An empty
    set means the terms contradict each other.
    """
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == OBJECT_NAME_FIELD and req.operator == Operator.IN:
                values = set(req.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return frozenset(names)


def preferred_score(weighted_masks: Sequence[tuple[int, BoolArray]], positions: Positions) -> IntArray:
    """Σ weight over the preferred terms whose mask holds at each of ``positions``."""
    total = np.zeros(len(positions), dtype=np.int64)
    for weight, mask in weighted_masks:
        total += weight * mask.take(positions)
    return total


def scoring_terms(*term_lists: Sequence[PreferredSchedulingTerm]) -> tuple[PreferredSchedulingTerm, ...]:
    """The preferred terms that count: weight-0 terms are ignored, as kube-scheduler does."""
    return tuple(t for terms in term_lists for t in terms if t.weight != 0)


__all__ = [
    "OBJECT_NAME_FIELD",
    "RequiredSelector",
    "matches_required",
    "pre_filter_node_names",
    "preferred_score",
    "required_mask",
    "scoring_terms",
    "term_mask",
]
