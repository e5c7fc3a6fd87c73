"""InterPodAffinity (kube-scheduler ``interpodaffinity``, v1.35 semantics).

- PreFilter: counts, per (topology key, value), the existing pods matching the incoming pod's required
  affinity terms (pods matching *all* of them) and required anti-affinity terms, and the existing pods
  whose required anti-affinity terms match the incoming pod. Skip when the pod has no required terms
  and no existing pod's anti-affinity matches it.
- Filter, in upstream order: UnschedulableAndUnresolvable ``"node(s) didn't match pod affinity rules"``;
  Unschedulable ``"node(s) didn't match pod anti-affinity rules"``; Unschedulable
  ``"node(s) didn't satisfy existing pods anti-affinity rules"``.
- PreScore/Score/NormalizeScore: see :mod:`.scoring`. ``ignorePreferredTermsOfExistingPods`` makes
  PreScore Skip when the incoming pod has no preferred terms (upstream's only use of it: when the pod
  has preferred terms, existing pods' terms still count).
- PreFilterExtensions add_pod/remove_pod update a cloned PreFilter state.
- EventsToRegister: Pod and Node events with upstream's queueing hints (:mod:`.hints`).

Namespaces: the plugin watches Namespace objects through the handle (:mod:`.namespaces`; the API
server's, or a ``simulate`` file's Namespace documents), kube-scheduler's namespace lister. A term's
non-empty namespaceSelector matches the pods of the namespaces whose labels it selects (an unknown
namespace matches none), an empty one (``{}``) matches all. Existing pods' namespaceSelectors are
evaluated against the incoming pod's namespace labels (unknown -> empty labels), as upstream does. Counts
cached per term are dropped whenever some namespace's labels change.

matchLabelKeys / mismatchLabelKeys are merged into the selectors here as the API server does at pod
creation (idempotent for pods it already merged), so cluster files given to ``simulate`` behave alike.

Counting uses a :class:`~koord_scheduler.plugins.topology_index.TopologyIndex`: existing pods' terms are
grouped by identical term, so a pod costs O(nodes + distinct terms), not O(running pods).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.config.plugin_args import InterPodAffinityArgs
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.fast_paths import WarmUpPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
)
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Status, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    NodeFilterResult,
    PreFilterResult,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.interpodaffinity import hints
from koord_scheduler.plugins.interpodaffinity.namespaces import NAMESPACE_KIND, NamespaceStore
from koord_scheduler.plugins.interpodaffinity.policy import (
    IncomingTerms,
    TopologyCounts,
    existing_anti_affinity_failures,
    incoming_terms,
    matches_all,
    pod_affinity_failures,
    pod_anti_affinity_failures,
    update_with_affinity_terms,
    update_with_anti_affinity_terms,
)
from koord_scheduler.plugins.interpodaffinity.scoring import normalize_min_max
from koord_scheduler.plugins.topology_index import (
    AllOf,
    DomainCache,
    NamespaceLabels,
    TermKind,
    TopologyDomains,
    TopologyIndex,
    as_upstream_pod_change,
    no_namespace_labels,
    pod_term_groups,
)

NAME = names.INTER_POD_AFFINITY
ARGS = InterPodAffinityArgs

ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"

_FILTER_STATUSES = (
    unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH),
    unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH),
    unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH),
    unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH),
)
"""Indexed by reason id; 0 (pass) is unused."""


@dataclass(slots=True)
class PreFilterState:
    pod: Pod
    terms: IncomingTerms
    namespace_labels: dict[str, str] | None
    existing_anti_affinity: TopologyCounts
    affinity: TopologyCounts
    anti_affinity: TopologyCounts

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.pod,
            self.terms,
            self.namespace_labels,
            self.existing_anti_affinity.clone(),
            self.affinity.clone(),
            self.anti_affinity.clone(),
        )


@dataclass(slots=True)
class PreScoreState:
    topology_score: TopologyCounts


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)


def has_pod_affinity(pod: Pod) -> bool:
    affinity = pod.affinity
    return affinity is not None and (affinity.pod_affinity is not None or affinity.pod_anti_affinity is not None)


class InterPodAffinity:
    name = NAME

    def __init__(
        self,
        hard_pod_affinity_weight: int = 1,
        *,
        ignore_preferred_terms_of_existing_pods: bool = False,
        namespace_labels: NamespaceLabels = no_namespace_labels,
        snapshot: ClusterSnapshot | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._hard_weight = hard_pod_affinity_weight
        self._ignore_existing_preferred = ignore_preferred_terms_of_existing_pods
        self._namespace_labels = namespace_labels
        self._index = TopologyIndex()
        self._domains = DomainCache()
        self._namespace_version = getattr(namespace_labels, "version", 0)

    def warm_up(self) -> None:
        """The index's first sync (every bound pod read once) at start rather than in the first cycle:
        its cost grows with the bound pods (about 0.5 s at 150,000), later syncs only with the changes."""
        if self._snapshot is not None:
            self._synced_index(self._snapshot)

    def _synced_index(self, snapshot: ClusterSnapshot) -> TopologyIndex:
        """The index after ``sync``; its per-term counts are dropped when namespace labels changed (a
        term's namespaceSelector may now select other namespaces)."""
        version = getattr(self._namespace_labels, "version", 0)
        if version != self._namespace_version:
            self._index.drop_counters()
            self._namespace_version = version
        self._index.sync(snapshot)
        return self._index

    def _ns_labels(self, pod: Pod) -> dict[str, str] | None:
        labels = self._namespace_labels(pod.namespace)
        return dict(labels) if labels is not None else None

    # ----- Filter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        index = self._synced_index(snapshot)
        has_terms = has_pod_affinity(pod)
        if not has_terms and index.required_anti_affinity_pods == 0:
            return None, skip()
        terms = incoming_terms(pod, self._namespace_labels)
        ns_labels = self._ns_labels(pod)
        live = snapshot.valid[: snapshot.capacity]

        def lookup(key: str) -> TopologyDomains:
            return self._domains.get(snapshot, key)

        existing = TopologyCounts(lookup)
        if index.required_anti_affinity_pods:
            for group, node_counts in index.term_groups.items():
                if group.kind == TermKind.REQUIRED_ANTI_AFFINITY and group.term.matches(pod, ns_labels):
                    existing.add_node_counts(group.term.topology_key, node_counts, live)
        if not terms.required_affinity and not terms.required_anti_affinity and existing.is_empty:
            return None, skip()
        affinity = TopologyCounts(lookup)
        if terms.required_affinity:
            node_counts = index.pod_counts(AllOf(terms.required_affinity))
            for t in terms.required_affinity:
                affinity.add_node_counts(t.term.topology_key, node_counts, live)
        anti = TopologyCounts(lookup)
        for t in terms.required_anti_affinity:
            anti.add_node_counts(t.term.topology_key, index.pod_counts(t), live)
        state.write(PRE_FILTER_KEY, PreFilterState(pod, terms, ns_labels, existing, affinity, anti))
        return None, success()

    def pre_filter_extensions(self) -> InterPodAffinity:
        return self

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None:
            return NodeFilterResult.all_pass(len(positions))
        terms = pre.terms
        reason = np.zeros(len(positions), dtype=np.int8)
        self_match = matches_all(terms.required_affinity, pod)
        affinity_fails = pod_affinity_failures(terms.required_affinity, pre.affinity, self_match, positions)
        reason[affinity_fails] = 1
        anti_fails = pod_anti_affinity_failures(terms.required_anti_affinity, pre.anti_affinity, positions)
        reason[(reason == 0) & anti_fails] = 2
        existing_fails = existing_anti_affinity_failures(pre.existing_anti_affinity, positions)
        reason[(reason == 0) & existing_fails] = 3
        return NodeFilterResult(reason == 0, reason, _FILTER_STATUSES)

    # ----- PreFilterExtensions -----

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        self._update_with_pod(state, pod_to_add, node_info, 1)
        return success()

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        self._update_with_pod(state, pod_to_remove, node_info, -1)
        return success()

    @staticmethod
    def _update_with_pod(state: CycleState, updated: Pod, node_info: NodeInfo, delta: int) -> None:
        """``preFilterState.updateWithPod``."""
        pre = state.get(PRE_FILTER_KEY)
        node = node_info.node
        if pre is None or node is None:
            return
        required_anti = [g.term for g in pod_term_groups(updated) if g.kind == TermKind.REQUIRED_ANTI_AFFINITY]
        update_with_anti_affinity_terms(
            pre.existing_anti_affinity, required_anti, pre.pod, pre.namespace_labels, node, delta=delta
        )
        update_with_affinity_terms(pre.affinity, pre.terms.required_affinity, updated, node, delta)
        update_with_anti_affinity_terms(
            pre.anti_affinity, pre.terms.required_anti_affinity, updated, None, node, delta=delta
        )

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        affinity = pod.affinity
        has_constraints = affinity is not None and (
            (affinity.pod_affinity is not None and bool(affinity.pod_affinity.preferred))
            or (affinity.pod_anti_affinity is not None and bool(affinity.pod_anti_affinity.preferred))
        )
        if self._ignore_existing_preferred and not has_constraints:
            return skip()
        index = self._synced_index(snapshot)
        if not has_constraints and not index.term_groups:
            return skip()
        live = snapshot.valid[: snapshot.capacity]
        score = TopologyCounts(lambda key: self._domains.get(snapshot, key))
        touched = False
        if has_constraints:
            terms = incoming_terms(pod, self._namespace_labels)
            for w in terms.preferred_affinity:
                touched |= score.add_node_counts(w.term.term.topology_key, index.pod_counts(w.term), live, w.weight)
            for w in terms.preferred_anti_affinity:
                touched |= score.add_node_counts(w.term.term.topology_key, index.pod_counts(w.term), live, -w.weight)
        ns_labels = self._ns_labels(pod)
        for group, node_counts in index.term_groups.items():
            kind = group.kind
            if kind == TermKind.REQUIRED_ANTI_AFFINITY:
                continue
            if kind == TermKind.REQUIRED_AFFINITY:
                if self._hard_weight <= 0:
                    continue
                factor = self._hard_weight
            else:
                factor = group.weight if kind == TermKind.PREFERRED_AFFINITY else -group.weight
            if group.term.matches(pod, ns_labels):
                touched |= score.add_node_counts(group.term.topology_key, node_counts, live, factor)
        if not touched:
            return skip()
        state.write(PRE_SCORE_KEY, PreScoreState(score))
        return success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        pre = state.read(PRE_SCORE_KEY)
        total = np.zeros(len(positions), dtype=np.int64)
        for key in pre.topology_score.active_keys():
            _, values = pre.topology_score.at(key, positions)
            total += values
        return total

    def score_extensions(self) -> InterPodAffinity:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        if state.get(PRE_SCORE_KEY) is not None:
            normalize_min_max(scores)
        return success()

    # ----- queueing -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """Upstream's events and hints (:mod:`.hints`). Pods register for every action: the scheduler
        reports an assigned pod's update as one generic ``UPDATE``, and the hint queues only for the
        label changes upstream's ``UpdatePodLabel`` registration lets through."""
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.ALL), self.hint_after_pod_change),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self.hint_after_node_change,
            ),
        )

    @staticmethod
    def hint_after_pod_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        change = as_upstream_pod_change(old, new)
        if change is None:
            return QueueingHint.QUEUE
        return hints.after_pod_change(pod, *change)

    @staticmethod
    def hint_after_node_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        if not isinstance(old, Node | None) or not isinstance(new, Node | None):
            return QueueingHint.QUEUE
        return hints.after_node_change(pod, old, new)


def new(args: InterPodAffinityArgs | None, handle: Handle) -> InterPodAffinity:
    """The plugin, watching Namespaces for namespace selectors."""
    args = args or InterPodAffinityArgs()
    store = NamespaceStore()
    handle.watch(NAMESPACE_KIND, store.on_event)
    return InterPodAffinity(
        args.hard_pod_affinity_weight,
        ignore_preferred_terms_of_existing_pods=args.ignore_preferred_terms_of_existing_pods,
        namespace_labels=store,
        snapshot=handle.snapshot,
    )


def declared_capabilities(
    plugin: InterPodAffinity,
) -> tuple[
    PreFilterExtensions,
    PreFilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    BatchScorePlugin,
    EnqueueExtensions,
    WarmUpPlugin,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin
