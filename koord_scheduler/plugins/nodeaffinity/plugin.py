"""NodeAffinity (kube-scheduler ``nodeaffinity/node_affinity.go``).

- PreFilter: Skip when the pod has no nodeSelector and no required node affinity and the profile adds no
  required affinity. When every required term names nodes through ``matchFields metadata.name In``, the
  result narrows Filter to those nodes; contradicting terms are UnschedulableAndUnresolvable
  ``"pod affinity terms conflict"``.
- Filter (both UnschedulableAndUnresolvable): ``"node(s) didn't match scheduler-enforced node affinity"``
  for ``addedAffinity`` required terms, then ``"node(s) didn't match Pod's node affinity/selector"``.
- PreScore: Skip when there are no preferred terms (pod's or added).
- Score: Σ weights of the matching preferred terms; NormalizeScore ``DefaultNormalizeScore(100, False)``.

Each distinct selector (and preferred term) becomes a mask over positions with one pass over the nodes,
cached per ``nodes_generation`` in a bounded LRU; a pod then costs one gather over ``positions``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from apis.config.plugin_args import NodeAffinityArgs
from apis.core.parse import parse_affinity
from apis.core.types import Node, NodeSelectorTerm, Pod, PreferredSchedulingTerm
from apis.core.types import NodeAffinity as NodeAffinitySpec
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.fast_paths import ScoresOnlyNormalizer, SignedPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
)
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Status, skip, success, unresolvable
from koord_scheduler.framework.types import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    NodeFilterResult,
    PreFilterResult,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.helpers import SnapshotCache, default_normalize_score, live_nodes
from koord_scheduler.plugins.nodeaffinity.policy import (
    RequiredSelector,
    matches_required,
    pre_filter_node_names,
    preferred_score,
    required_mask,
    scoring_terms,
    term_mask,
)

NAME = names.NODE_AFFINITY
ARGS = NodeAffinityArgs

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_ENFORCED = unresolvable(ERR_REASON_ENFORCED)
_POD = unresolvable(ERR_REASON_POD)
_CONFLICT = unresolvable(ERR_REASON_CONFLICT)
_STATUSES = (_ENFORCED, _POD)

MASK_CACHE_SIZE = 256
"""Distinct selectors and preferred terms kept per node generation; real clusters have a few dozen."""


@dataclass(frozen=True, slots=True)
class PreFilterState:
    required: RequiredSelector


@dataclass(frozen=True, slots=True)
class PreScoreState:
    terms: tuple[PreferredSchedulingTerm, ...]


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)


def required_selector(pod: Pod) -> RequiredSelector:
    """``GetRequiredNodeAffinity(pod)`` as plain, hashable values."""
    affinity = pod.affinity
    terms = affinity.node_affinity.required if affinity and affinity.node_affinity else None
    return pod.node_selector, terms


def pod_preferred_terms(pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
    affinity = pod.affinity
    return affinity.node_affinity.preferred if affinity and affinity.node_affinity else ()


class NodeAffinity:
    name = NAME

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answer depends on, besides the node (see framework.node_cache)."""
        return (pod.node_selector, pod.affinity.node_affinity if pod.affinity else None)

    def __init__(self, added: NodeAffinitySpec | None = None) -> None:
        self._added_required: tuple[NodeSelectorTerm, ...] | None = added.required if added else None
        self._added_selector: RequiredSelector | None = (
            (None, self._added_required) if self._added_required is not None else None
        )
        self._added_preferred = scoring_terms(added.preferred) if added else ()
        self._masks: SnapshotCache[Hashable, BoolArray] = SnapshotCache(max_entries=MASK_CACHE_SIZE)

    # ----- Filter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        node_selector, terms = required_selector(pod)
        if terms is None and node_selector is None and self._added_selector is None:
            return None, skip()
        state.write(PRE_FILTER_KEY, PreFilterState((node_selector, terms)))
        if not terms:
            return None, success()
        node_names = pre_filter_node_names(terms)
        if node_names is None:
            return None, success()
        if not node_names:
            return None, _CONFLICT
        return PreFilterResult(node_names), success()

    def pre_filter_extensions(self) -> None:
        return None

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        pre = state.get(PRE_FILTER_KEY)
        selector = pre.required if pre is not None else required_selector(pod)
        pod_ok: BoolArray | None = None
        if selector[0] is not None or selector[1] is not None:
            pod_ok = self._required_mask(snapshot, selector).take(positions)
        if self._added_selector is None:
            if pod_ok is None:
                return NodeFilterResult.all_pass(len(positions))
            return NodeFilterResult.from_mask(pod_ok, _POD)
        enforced_ok = self._required_mask(snapshot, self._added_selector).take(positions)
        passed = enforced_ok if pod_ok is None else enforced_ok & pod_ok
        # 0: the added affinity rejected the node (checked first, as upstream); 1: the pod's own selector.
        reason_ids = np.where(enforced_ok, 1, 0).astype(np.int8)
        return NodeFilterResult(passed, reason_ids, _STATUSES)

    def _required_mask(self, snapshot: ClusterSnapshot, selector: RequiredSelector) -> BoolArray:
        return self._masks.get(
            snapshot,
            ("required", selector),
            lambda: required_mask(selector, live_nodes(snapshot), snapshot.capacity),
        )

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        terms = scoring_terms(pod_preferred_terms(pod), self._added_preferred)
        if not terms:
            return skip()
        state.write(PRE_SCORE_KEY, PreScoreState(terms))
        return success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        pre = state.get(PRE_SCORE_KEY)
        terms = pre.terms if pre is not None else scoring_terms(pod_preferred_terms(pod), self._added_preferred)
        weighted = [(t.weight, self._term_mask(snapshot, t.preference)) for t in terms]
        return preferred_score(weighted, positions)

    def _term_mask(self, snapshot: ClusterSnapshot, term: NodeSelectorTerm) -> BoolArray:
        return self._masks.get(
            snapshot, ("preferred", term), lambda: term_mask(term, live_nodes(snapshot), snapshot.capacity)
        )

    def score_extensions(self) -> NodeAffinity:
        return self

    normalize_reads_only_scores = True
    """NormalizeScore depends on nothing but the scores (the runtime may reuse its result)."""

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return success()

    # ----- queueing -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self.is_schedulable_after_node_change,
            ),
        )

    def is_schedulable_after_node_change(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """Queue when the node (now) satisfies the added and the pod's required affinity, and did not
        before."""
        if not isinstance(new, Node):
            return QueueingHint.SKIP
        if self._added_selector is not None and not matches_required(self._added_selector, new):
            return QueueingHint.SKIP
        selector = required_selector(pod)
        if not matches_required(selector, new):
            return QueueingHint.SKIP
        if (
            isinstance(old, Node)
            and matches_required(selector, old)
            and (self._added_selector is None or matches_required(self._added_selector, old))
        ):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE


def parse_added_affinity(args: NodeAffinityArgs | None) -> NodeAffinitySpec | None:
    """``args.addedAffinity`` (a raw ``v1.NodeAffinity`` mapping) as a typed value."""
    if args is None or args.added_affinity is None:
        return None
    affinity = parse_affinity({"nodeAffinity": args.added_affinity})
    return affinity.node_affinity if affinity is not None else None


def new(args: NodeAffinityArgs | None, handle: Handle) -> NodeAffinity:
    return NodeAffinity(parse_added_affinity(args))


def declared_capabilities(
    plugin: NodeAffinity,
) -> tuple[
    PreFilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    BatchScorePlugin,
    EnqueueExtensions,
    SignedPlugin,
    ScoresOnlyNormalizer,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin
