"""Incremental pod counts over a :class:`ClusterSnapshot`, shared by PodTopologySpread and InterPodAffinity.

kube-scheduler's two topology plugins walk every pod on every node in each PreFilter/PreScore, so their
cost per pod grows with the number of running pods. Here one :class:`TopologyIndex` per plugin keeps:

- **counters**: for a hashable :class:`PodMatcher` (a spread selector in a namespace, an affinity term),
  ``counts[pos]`` = pods on the node at ``pos`` that match. A counter is built with one pass over the
  pods the first time it is asked for, then kept up to date from the pods that changed; a bounded LRU
  evicts counters nobody asked for lately.
- **existing-pod term groups**: every (anti-)affinity term carried by a running pod, resolved against
  its owner (namespaces, matchLabelKeys), grouped by identical term, with ``counts[pos]`` = pods on the
  node carrying it. The symmetric checks (an existing pod's required anti-affinity rejecting the incoming
  pod, existing pods' terms in scoring) then cost O(distinct terms), not O(pods).

Change detection polls ``snapshot.pods_generation``; when it moved, the nodes whose ``NodeInfo``
generation changed are diffed against the pods seen last time (pods are immutable, so identity tells
a replaced pod). The cost of a sync is O(nodes) cheap comparisons plus O(changed pods x counters).

:class:`TopologyDomains` maps a topology key to a value id per node position, cached per node generation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

import numpy as np

from apis.core.selectors import label_selector_matches
from apis.core.types import (
    LabelSelector,
    Operator,
    Pod,
    PodAffinityTerm,
    SelectorRequirement,
)
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, IntArray, NodeInfo

NamespaceLabels = Callable[[str], Mapping[str, str] | None]
"""Labels of a namespace, or None when the namespace is unknown (kube-scheduler's namespace lister).

InterPodAffinity passes its :class:`~koord_scheduler.plugins.interpodaffinity.namespaces.NamespaceStore`;
without one it knows none (:func:`no_namespace_labels`)."""


def no_namespace_labels(namespace: str) -> Mapping[str, str] | None:
    return None


EMPTY: Mapping[str, str] = {}


def as_upstream_pod_change(old: object | None, new: object | None) -> tuple[Pod | None, Pod | None] | None:
    """The (old, new) pods a queueing hint compares, as kube-scheduler's informers deliver them; None when
    the objects are not pods (the hint then answers Queue, as upstream does on a conversion error).

    A pod that goes from unassigned to assigned is an Add for kube-scheduler's assigned-pod informer, so
    ``old`` is dropped then: the hints treat an unassigned ``old`` as "not involved"."""
    if not isinstance(old, Pod | None) or not isinstance(new, Pod | None):
        return None
    if old is not None and new is not None and new.node_name and not old.node_name:
        return None, new
    return old, new


class PodMatcher(Protocol):
    """A hashable predicate over pods; equal matchers must match the same pods."""

    def __hash__(self) -> int: ...

    def matches(self, pod: Pod) -> bool: ...


def selector_is_empty(selector: LabelSelector | None) -> bool:
    """``labels.Selector.Empty()``: True for ``{}`` (matches everything); False for None (matches nothing)."""
    return selector is not None and not selector.match_labels and not selector.match_expressions


def merge_label_keys(
    selector: LabelSelector | None,
    labels: Mapping[str, str],
    match_keys: Iterable[str],
    mismatch_keys: Iterable[str] = (),
) -> LabelSelector | None:
    """``matchLabelKeys`` / ``mismatchLabelKeys``: ``key In (v)`` / ``key NotIn (v)`` for each key the
    owner pod carries, added to ``selector``. None stays None (a nil selector selects nothing, and the
    API server leaves it alone too). Adding a requirement the selector already has changes nothing, so
    this is safe on pods whose keys the API server already merged."""
    if selector is None:
        return None
    extra = [SelectorRequirement(k, Operator.IN, (labels[k],)) for k in match_keys if k in labels]
    extra += [SelectorRequirement(k, Operator.NOT_IN, (labels[k],)) for k in mismatch_keys if k in labels]
    if not extra:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + tuple(extra))


# ----- matchers -----


@dataclass(frozen=True, slots=True)
class SpreadSelector:
    """PodTopologySpread's ``countPodsMatchSelector``: same namespace, not terminating, selector matches.
    An empty or nil selector counts nothing."""

    namespace: str
    selector: LabelSelector

    def matches(self, pod: Pod) -> bool:
        return (
            pod.meta.deletion_timestamp is None
            and pod.meta.namespace == self.namespace
            and label_selector_matches(self.selector, pod.meta.labels)
        )


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """kube-scheduler's ``framework.AffinityTerm``: a pod (anti-)affinity term resolved for its owner.

    ``namespaces`` is the owner's namespace when the term names none and has no namespaceSelector.
    ``selector`` / ``namespace_selector`` None match nothing; an empty one matches everything.
    """

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None) -> bool:
        """``AffinityTerm.Matches(pod, nsLabels)`` (unknown namespace labels read as no labels)."""
        ns_ok = pod.meta.namespace in self.namespaces or (
            self.namespace_selector is not None
            and label_selector_matches(self.namespace_selector, namespace_labels or EMPTY)
        )
        return ns_ok and label_selector_matches(self.selector, pod.meta.labels)


def resolve_term(owner: Pod, term: PodAffinityTerm) -> AffinityTerm:
    """``newAffinityTerm`` plus the API server's matchLabelKeys/mismatchLabelKeys merge."""
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset((owner.meta.namespace,))
    else:
        namespaces = frozenset(term.namespaces)
    selector = merge_label_keys(term.label_selector, owner.meta.labels, term.match_label_keys, term.mismatch_label_keys)
    return AffinityTerm(term.topology_key, selector, namespaces, term.namespace_selector)


@dataclass(frozen=True, slots=True)
class IncomingTerm:
    """The incoming pod's term as PreFilter/PreScore use it (``mergeAffinityTermNamespacesIfNotEmpty``).

    A non-empty namespaceSelector is replaced by the namespaces the lister knows whose labels match;
    an empty one (``{}``) keeps matching every namespace. Here that is evaluated lazily against
    ``namespace_labels`` of each existing pod's namespace: unknown namespaces never match."""

    term: AffinityTerm
    namespace_labels: NamespaceLabels = field(compare=True)

    def matches(self, pod: Pod) -> bool:
        term = self.term
        ns = pod.meta.namespace
        if ns not in term.namespaces:
            nss = term.namespace_selector
            if nss is None:
                return False
            if not selector_is_empty(nss):
                labels = self.namespace_labels(ns)
                if labels is None or not label_selector_matches(nss, labels):
                    return False
        return label_selector_matches(term.selector, pod.meta.labels)


@dataclass(frozen=True, slots=True)
class AllOf:
    """Matches pods matching every one of ``matchers`` (``podMatchesAllAffinityTerms``); none matches nothing."""

    matchers: tuple[IncomingTerm, ...]

    def matches(self, pod: Pod) -> bool:
        return bool(self.matchers) and all(m.matches(pod) for m in self.matchers)


# ----- existing pods' terms -----


class TermKind(IntEnum):
    REQUIRED_AFFINITY = 0
    REQUIRED_ANTI_AFFINITY = 1
    PREFERRED_AFFINITY = 2
    PREFERRED_ANTI_AFFINITY = 3


@dataclass(frozen=True, slots=True)
class TermGroup:
    """One distinct term carried by running pods. ``weight`` is 0 for required terms."""

    kind: TermKind
    weight: int
    term: AffinityTerm


def pod_term_groups(pod: Pod) -> list[TermGroup]:
    """Every (anti-)affinity term of ``pod``, resolved; empty for pods without pod (anti-)affinity.

    Preferred terms keep weight 0 terms out, as they contribute nothing (API validation forbids them)."""
    affinity = pod.affinity
    if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
        return []
    out: list[TermGroup] = []
    for spec, required_kind, preferred_kind in (
        (affinity.pod_affinity, TermKind.REQUIRED_AFFINITY, TermKind.PREFERRED_AFFINITY),
        (affinity.pod_anti_affinity, TermKind.REQUIRED_ANTI_AFFINITY, TermKind.PREFERRED_ANTI_AFFINITY),
    ):
        if spec is None:
            continue
        out += [TermGroup(required_kind, 0, resolve_term(pod, t)) for t in spec.required]
        out += [TermGroup(preferred_kind, w.weight, resolve_term(pod, w.term)) for w in spec.preferred if w.weight]
    return out


# ----- the index -----


_MAX_BUCKETINGS = 4
"""Bucketings kept per counter: one per node-eligibility layout in use (they change with the nodes)."""


class TopologyIndex:
    """Per-position pod counts kept up to date incrementally; see the module docstring.

    Call :meth:`sync` with the snapshot at the start of a cycle; the arrays returned afterwards are the
    index's own (read-only for callers) and are valid until the next :meth:`sync`.
    """

    def __init__(self, *, max_counters: int = 64) -> None:
        self._max_counters = max_counters
        self._snapshot: ClusterSnapshot | None = None
        self._version = -1
        """``snapshot.version`` at the last sync; nodes whose ``row_version`` is newer are diffed."""
        self._capacity = 0
        self._seen: list[dict[str, Pod] | None] = []
        self._seen_from: list[tuple[NodeInfo, int] | None] = []
        """Per position, the NodeInfo ``_seen`` mirrors and its ``churn`` then (see :meth:`_diff_node`)."""
        """Per position, the pods as of the last sync."""
        self._counters: OrderedDict[Hashable, tuple[PodMatcher, IntArray]] = OrderedDict()
        self._bucket_sums: dict[Hashable, list[tuple[IntArray, IntArray]]] = {}
        """Per counter: (bucket id per position, its counts summed per bucket) pairs kept up to date with
        the counter (see :meth:`bucket_sums`), at most ``_MAX_BUCKETINGS`` per counter."""
        self._groups: dict[TermGroup, IntArray] = {}
        self._group_totals: dict[TermGroup, int] = {}
        self.required_anti_affinity_pods = 0
        """How many term instances of kind REQUIRED_ANTI_AFFINITY running pods carry."""

    # ----- sync -----

    def sync(self, snapshot: ClusterSnapshot) -> None:
        if snapshot is not self._snapshot:
            self._reset(snapshot)
        if snapshot.version == self._version and snapshot.capacity == self._capacity:
            return
        if snapshot.capacity != self._capacity:
            self._grow(snapshot.capacity)
        # Every pod add/remove, node change and position release bumps the node's row_version (through
        # snapshot.touch, which logs the position), so the nodes to diff are the ones the change log
        # lists since the last sync (memoised: every per-node cache asks it too), or, when the log no
        # longer reaches back, one vectorised comparison over all nodes.
        changed = snapshot.changed_since(self._version) if self._version >= 0 else None
        if changed is None:
            changed = np.flatnonzero(snapshot.row_version > self._version)
        infos = snapshot.infos
        for pos in changed.tolist():
            self._diff_node(pos, infos[pos])
        self._version = snapshot.version

    def _reset(self, snapshot: ClusterSnapshot) -> None:
        self._snapshot = snapshot
        self._version = -1
        self._capacity = 0
        self._seen = []
        self._seen_from = []
        self._counters.clear()
        self._bucket_sums.clear()
        self._groups.clear()
        self._group_totals.clear()
        self.required_anti_affinity_pods = 0

    def _grow(self, capacity: int) -> None:
        extra = capacity - self._capacity
        self._seen.extend([None] * extra)
        self._seen_from.extend([None] * extra)
        for key, (matcher, counts) in list(self._counters.items()):
            self._counters[key] = (matcher, _pad(counts, capacity))
        for group, counts in list(self._groups.items()):
            self._groups[group] = _pad(counts, capacity)
        self._bucket_sums.clear()  # bucketings are per position: they are rebuilt at the new capacity
        self._capacity = capacity

    def _diff_node(self, pos: int, info: NodeInfo | None) -> None:
        seen = self._seen[pos]
        source = self._seen_from[pos]
        if info is not None and source is not None and source[0] is info and source[1] == info.churn:
            # Since the last diff the node's pods only gained keys (its churn counts removals and
            # replacements; a bind echo swaps in an equivalent object, which changes no count): account
            # the new keys, found by a set difference in C, not by a Python walk over the node's pods.
            new = info.pods
            if len(new) != (len(seen) if seen is not None else 0):
                if seen is None:
                    seen = self._seen[pos] = {}
                for key in new.keys() - seen.keys():
                    pod = new[key]
                    self._account(pos, pod, 1)
                    seen[key] = pod
            return
        old = seen or {}
        new = info.pods if info is not None else {}
        for key, pod in old.items():
            if new.get(key) is not pod:
                self._account(pos, pod, -1)
        for key, pod in new.items():
            if old.get(key) is not pod:
                self._account(pos, pod, 1)
        self._seen[pos] = dict(new) if new else None
        self._seen_from[pos] = (info, info.churn) if info is not None else None

    def _account(self, pos: int, pod: Pod, sign: int) -> None:
        for matcher, counts in self._counters.values():
            if matcher.matches(pod):
                counts[pos] += sign
                for buckets, sums in self._bucket_sums.get(matcher, ()):
                    sums[buckets[pos]] += sign
        if pod.affinity is None:
            return
        for group in pod_term_groups(pod):
            group_counts = self._groups.get(group)
            if group_counts is None:
                group_counts = self._groups[group] = np.zeros(self._capacity, dtype=np.int64)
                self._group_totals[group] = 0
            group_counts[pos] += sign
            total = self._group_totals[group] + sign
            if total == 0:
                del self._groups[group]
                del self._group_totals[group]
            else:
                self._group_totals[group] = total
            if group.kind == TermKind.REQUIRED_ANTI_AFFINITY:
                self.required_anti_affinity_pods += sign

    def drop_counters(self) -> None:
        """Forget the per-matcher counts (rebuilt on demand): for matchers whose answer changed without a
        pod changing, e.g. a namespaceSelector after namespace labels changed."""
        self._counters.clear()
        self._bucket_sums.clear()

    # ----- reading -----

    def pod_counts(self, matcher: PodMatcher) -> IntArray:
        """``counts[pos]``: pods on the node at ``pos`` matching ``matcher`` (after :meth:`sync`)."""
        hit = self._counters.get(matcher)
        if hit is not None:
            self._counters.move_to_end(matcher)
            return hit[1]
        counts = np.zeros(self._capacity, dtype=np.int64)
        for pos, pods in enumerate(self._seen):
            if pods:
                counts[pos] = sum(1 for pod in pods.values() if matcher.matches(pod))
        self._counters[matcher] = (matcher, counts)
        if len(self._counters) > self._max_counters:
            evicted, _ = self._counters.popitem(last=False)
            self._bucket_sums.pop(evicted, None)
        return counts

    def bucket_sums(self, matcher: PodMatcher, buckets: IntArray, n_buckets: int) -> IntArray:
        """``np.bincount(buckets, weights=pod_counts(matcher), minlength=n_buckets)`` as int64 (a new
        array), kept per (matcher, ``buckets``) and updated pod by pod at sync instead of summed over
        every node per call: PodTopologySpread's matching pods per topology value.

        ``buckets`` (a bucket id per position, ``len == capacity``, all ids < ``n_buckets``) must not be
        modified while the index holds it; a different array object starts a new sum."""
        counts = self.pod_counts(matcher)
        held = self._bucket_sums.setdefault(matcher, [])
        for i, (known, sums) in enumerate(held):
            if known is buckets and len(sums) == n_buckets:
                if i:
                    held.insert(0, held.pop(i))
                return sums.copy()
        if len(buckets) != len(counts):
            raise ValueError(f"bucket_sums: {len(buckets)} bucket ids for {len(counts)} node positions")
        sums = np.bincount(buckets, weights=counts, minlength=n_buckets).astype(np.int64)
        held.insert(0, (buckets, sums))
        del held[_MAX_BUCKETINGS:]
        return sums.copy()

    @property
    def term_groups(self) -> Mapping[TermGroup, IntArray]:
        """Every distinct term running pods carry -> pods carrying it per position (after :meth:`sync`)."""
        return self._groups

    @property
    def capacity(self) -> int:
        return self._capacity


def _pad(counts: IntArray, capacity: int) -> IntArray:
    out = np.zeros(capacity, dtype=np.int64)
    out[: len(counts)] = counts
    return out


# ----- topology domains -----


@dataclass(frozen=True, slots=True)
class TopologyDomains:
    """The values of one topology key over the live nodes.

    ``value_ids[pos]`` indexes ``values`` for a live node carrying the key, and is -1 for nodes without
    it and for positions holding no live node.
    """

    key: str
    value_ids: IntArray
    values: tuple[str, ...]
    index: Mapping[str, int]

    @property
    def has_key(self) -> BoolArray:
        return self.value_ids >= 0

    def value_id(self, value: str) -> int:
        return self.index.get(value, -1)


def build_domains(snapshot: ClusterSnapshot, key: str) -> TopologyDomains:
    value_ids = np.full(snapshot.capacity, -1, dtype=np.int64)
    index: dict[str, int] = {}
    infos = snapshot.infos
    for pos in snapshot.positions.values():
        info = infos[pos]
        if info is None or info.node is None:
            continue
        value = info.node.meta.labels.get(key)
        if value is not None:
            value_ids[pos] = index.setdefault(value, len(index))
    value_ids.flags.writeable = False  # shared by every reader until the nodes change
    return TopologyDomains(key, value_ids, tuple(index), index)


class DomainCache:
    """:func:`build_domains` per topology key, valid for one (snapshot, nodes_generation, capacity)."""

    __slots__ = ("_entries", "_snapshot", "_stamp")

    def __init__(self) -> None:
        self._entries: dict[str, TopologyDomains] = {}
        self._snapshot: ClusterSnapshot | None = None
        self._stamp: tuple[int, int] = (-1, -1)

    def get(self, snapshot: ClusterSnapshot, key: str) -> TopologyDomains:
        stamp = (snapshot.nodes_generation, snapshot.capacity)
        if snapshot is not self._snapshot or stamp != self._stamp:
            self._entries.clear()
            self._snapshot = snapshot
            self._stamp = stamp
        domains = self._entries.get(key)
        if domains is None:
            domains = self._entries[key] = build_domains(snapshot, key)
        return domains
