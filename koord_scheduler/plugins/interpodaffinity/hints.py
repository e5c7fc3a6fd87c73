"""InterPodAffinity queueing hints (``interpodaffinity/plugin.go``, v1.35). Pure.

Both hints read only the waiting pod's *required* terms (``GetAffinityTerms`` of the required terms),
matched as upstream's hints match them: against the term's namespaces, or its namespaceSelector with no
namespace labels (upstream passes nil labels there).

- :func:`after_pod_change`: changes of unassigned pods never help. Queue when an added assigned pod
  matches all the affinity terms, when an update makes an assigned pod match all the affinity terms or
  stop matching all the anti-affinity terms, or when a deleted one matched all the anti-affinity terms.
- :func:`after_node_change`: Queue when a node with an affinity term's key is added, when an update gives
  a node an affinity term's key or moves it to another value of one, when any node is added while the
  pod has anti-affinity terms, or when an update removes an anti-affinity key from a node or changes its
  value.
"""

from __future__ import annotations

from collections.abc import Sequence

from apis.core.types import Node, Pod
from koord_scheduler.framework.types import QueueingHint
from koord_scheduler.plugins.topology_index import AffinityTerm, resolve_term

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.SKIP


def required_terms(pod: Pod) -> tuple[tuple[AffinityTerm, ...], tuple[AffinityTerm, ...]]:
    """(required affinity terms, required anti-affinity terms), resolved for ``pod``."""
    affinity = pod.affinity
    if affinity is None:
        return (), ()
    pa, paa = affinity.pod_affinity, affinity.pod_anti_affinity
    return (
        tuple(resolve_term(pod, t) for t in pa.required) if pa is not None else (),
        tuple(resolve_term(pod, t) for t in paa.required) if paa is not None else (),
    )


def matches_all_terms(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """``podMatchesAllAffinityTerms`` with nil namespace labels: False for no terms."""
    return bool(terms) and all(t.matches(pod, None) for t in terms)


def after_pod_change(waiting: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
    """``isSchedulableAfterPodChange``."""
    if (new is not None and not new.node_name) or (old is not None and not old.node_name):
        return SKIP
    terms, anti_terms = required_terms(waiting)
    if old is not None and new is not None:
        if not matches_all_terms(terms, old) and matches_all_terms(terms, new):
            return QUEUE
        if matches_all_terms(anti_terms, old) and not matches_all_terms(anti_terms, new):
            return QUEUE
        return SKIP
    if new is not None:
        return QUEUE if matches_all_terms(terms, new) else SKIP
    if old is None:
        return QUEUE
    return QUEUE if matches_all_terms(anti_terms, old) else SKIP


def after_node_change(waiting: Pod, old: Node | None, new: Node | None) -> QueueingHint:
    """``isSchedulableAfterNodeChange`` (registered for Node Add and UpdateNodeLabel)."""
    terms, anti_terms = required_terms(waiting)
    for term in terms:
        key = term.topology_key
        if old is None:
            if new is not None and key in new.labels:
                return QUEUE
            continue
        if new is None:
            continue
        if key in new.labels and (key not in old.labels or old.labels[key] != new.labels[key]):
            return QUEUE
    for term in anti_terms:
        if old is None:
            return QUEUE
        if new is None:
            continue
        key = term.topology_key
        if key in old.labels and (key not in new.labels or old.labels[key] != new.labels[key]):
            return QUEUE
    return SKIP
