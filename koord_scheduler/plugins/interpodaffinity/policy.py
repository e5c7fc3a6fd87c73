"""InterPodAffinity terms and Filter maths (``interpodaffinity/filtering.go``). Pure apart from reading
the (immutable) topology domains handed in.

:class:`TopologyCounts` is upstream's ``topologyToMatchedTermCount`` (a map from (topology key, value)
to a count) as one count array per topology key, indexed by the key's value ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from apis.core.types import Node, Pod
from koord_scheduler.framework.snapshot import BoolArray, IntArray, Positions
from koord_scheduler.plugins.topology_index import (
    AffinityTerm,
    IncomingTerm,
    NamespaceLabels,
    TopologyDomains,
    resolve_term,
)

DomainLookup = Callable[[str], TopologyDomains]


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: IncomingTerm


@dataclass(frozen=True, slots=True)
class IncomingTerms:
    """The incoming pod's terms (``framework.PodInfo``), namespaces resolved for matching existing pods."""

    required_affinity: tuple[IncomingTerm, ...]
    required_anti_affinity: tuple[IncomingTerm, ...]
    preferred_affinity: tuple[WeightedTerm, ...]
    preferred_anti_affinity: tuple[WeightedTerm, ...]


def incoming_terms(pod: Pod, namespace_labels: NamespaceLabels) -> IncomingTerms:
    affinity = pod.affinity
    pa = affinity.pod_affinity if affinity is not None else None
    paa = affinity.pod_anti_affinity if affinity is not None else None

    def req(spec: object) -> tuple[IncomingTerm, ...]:
        if spec is None:
            return ()
        return tuple(IncomingTerm(resolve_term(pod, t), namespace_labels) for t in spec.required)  # type: ignore[attr-defined]

    def pref(spec: object) -> tuple[WeightedTerm, ...]:
        if spec is None:
            return ()
        return tuple(
            WeightedTerm(w.weight, IncomingTerm(resolve_term(pod, w.term), namespace_labels))
            for w in spec.preferred  # type: ignore[attr-defined]
        )

    return IncomingTerms(req(pa), req(paa), pref(pa), pref(paa))


def matches_all(terms: Iterable[IncomingTerm], pod: Pod) -> bool:
    """``podMatchesAllAffinityTerms``: False for no terms."""
    terms = tuple(terms)
    return bool(terms) and all(t.matches(pod) for t in terms)


class TopologyCounts:
    """``topologyToMatchedTermCount``: per topology key, a count per value id of that key."""

    __slots__ = ("_by_key", "_lookup")

    def __init__(self, lookup: DomainLookup) -> None:
        self._lookup = lookup
        self._by_key: dict[str, tuple[TopologyDomains, IntArray]] = {}

    def clone(self) -> TopologyCounts:
        other = TopologyCounts(self._lookup)
        other._by_key = {k: (d, c.copy()) for k, (d, c) in self._by_key.items()}
        return other

    def _entry(self, key: str) -> tuple[TopologyDomains, IntArray]:
        entry = self._by_key.get(key)
        if entry is None:
            domains = self._lookup(key)
            entry = self._by_key[key] = (domains, np.zeros(len(domains.values), dtype=np.int64))
        return entry

    def add_node_counts(self, key: str, node_counts: IntArray, live: BoolArray, factor: int = 1) -> bool:
        """Add ``factor * node_counts[pos]`` to the value of ``key`` of every live node carrying it;
        returns whether any node with the key had a non-zero count (a pair was touched)."""
        domains, counts = self._entry(key)
        mask = live & (domains.value_ids >= 0) & (node_counts != 0)
        if not mask.any():
            return False
        counts += factor * np.bincount(
            domains.value_ids[mask], weights=node_counts[mask], minlength=len(counts)
        ).astype(np.int64)
        return True

    def update(self, node: Node, key: str, delta: int) -> None:
        """``topologyToMatchedTermCount.update``: ``m[(key, node's value)] += delta`` if the node has it."""
        value = node.labels.get(key)
        if value is None:
            return
        domains, counts = self._entry(key)
        value_id = domains.value_id(value)
        if value_id >= 0:
            counts[value_id] += delta

    @property
    def is_empty(self) -> bool:
        """``len(m) == 0`` (upstream deletes pairs that drop to zero)."""
        return not any(counts.any() for _, counts in self._by_key.values())

    def at(self, key: str, positions: Positions) -> tuple[BoolArray, IntArray]:
        """For each position: whether the node carries ``key``, and the count of its value (0 if not)."""
        domains, counts = self._entry(key)
        value_ids = domains.value_ids.take(positions)
        has = value_ids >= 0
        if len(counts) == 0:
            return has, np.zeros(len(positions), dtype=np.int64)
        return has, np.where(has, counts.take(np.where(has, value_ids, 0)), 0)

    def active_keys(self) -> list[str]:
        return [k for k, (_, counts) in self._by_key.items() if counts.any()]

    def as_pairs(self) -> dict[tuple[str, str], int]:
        """The non-zero pairs, as upstream's map (for tests and debugging)."""
        out: dict[tuple[str, str], int] = {}
        for key, (domains, counts) in self._by_key.items():
            for value_id in np.flatnonzero(counts).tolist():
                out[(key, domains.values[value_id])] = int(counts[value_id])
        return out


def update_with_anti_affinity_terms(
    counts: TopologyCounts,
    terms: Iterable[AffinityTerm | IncomingTerm],
    pod: Pod,
    namespace_labels: Mapping[str, str] | None,
    node: Node,
    *,
    delta: int,
) -> None:
    """``updateWithAntiAffinityTerms``: each term matching ``pod`` counts at the node's value."""
    for t in terms:
        term = t.term if isinstance(t, IncomingTerm) else t
        matched = t.matches(pod) if isinstance(t, IncomingTerm) else t.matches(pod, namespace_labels)
        if matched:
            counts.update(node, term.topology_key, delta)


def update_with_affinity_terms(
    counts: TopologyCounts, terms: tuple[IncomingTerm, ...], pod: Pod, node: Node, delta: int
) -> None:
    """``updateWithAffinityTerms``: when ``pod`` matches every term, each term counts at the node's value."""
    if matches_all(terms, pod):
        for t in terms:
            counts.update(node, t.term.topology_key, delta)


# ----- Filter maths -----


def pod_affinity_failures(
    terms: tuple[IncomingTerm, ...],
    affinity_counts: TopologyCounts,
    self_matches_all: bool,
    positions: Positions,
) -> BoolArray:
    """``!satisfyPodAffinity`` per position.

    Every term's key must be on the node, and every term's (key, value) must have a matching pod; when
    some does not, the node still passes if no pod anywhere matches (the map is empty) and the pod
    matches all its own terms (the first pod of a group with affinity to itself)."""
    n = len(positions)
    if not terms:
        return np.zeros(n, dtype=np.bool_)
    missing = np.zeros(n, dtype=np.bool_)
    exist = np.ones(n, dtype=np.bool_)
    for t in terms:
        has, count = affinity_counts.at(t.term.topology_key, positions)
        missing |= ~has
        exist &= count > 0
    if affinity_counts.is_empty and self_matches_all:
        return missing
    return missing | ~exist


def pod_anti_affinity_failures(
    terms: tuple[IncomingTerm, ...], anti_counts: TopologyCounts, positions: Positions
) -> BoolArray:
    """``!satisfyPodAntiAffinity``: some term's (key, node's value) has a matching pod."""
    fails = np.zeros(len(positions), dtype=np.bool_)
    for t in terms:
        has, count = anti_counts.at(t.term.topology_key, positions)
        fails |= has & (count > 0)
    return fails


def existing_anti_affinity_failures(existing: TopologyCounts, positions: Positions) -> BoolArray:
    """``!satisfyExistingPodsAntiAffinity``: any of the node's (key, value) pairs is counted."""
    fails = np.zeros(len(positions), dtype=np.bool_)
    for key in existing.active_keys():
        has, count = existing.at(key, positions)
        fails |= has & (count > 0)
    return fails
