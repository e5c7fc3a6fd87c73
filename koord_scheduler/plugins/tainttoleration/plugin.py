"""TaintToleration (kube-scheduler ``tainttoleration/taint_toleration.go``).

- Filter: a node with a NoSchedule/NoExecute taint the pod does not tolerate is UnschedulableAndUnresolvable
  ``"node(s) had untolerated taint(s)"`` (the v1.35 message, PR #134740).
- PreScore: keeps the tolerations with effect PreferNoSchedule or empty.
- Score: the number of the node's PreferNoSchedule taints those leave untolerated.
- NormalizeScore: ``DefaultNormalizeScore(100, reverse=True)``: fewer untolerated taints score higher.

Per ``nodes_generation`` the tainted nodes are grouped by taint set; per tolerations tuple the
untolerated flags (Filter) and counts (Score) are cached, so a pod costs one gather over ``positions``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from apis.core.types import Node, Pod, Toleration
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.fast_paths import ScoresOnlyNormalizer, SignedPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    PreScorePlugin,
    ScoreExtensions,
)
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import Status, success, unresolvable
from koord_scheduler.framework.types import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    NodeFilterResult,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.helpers import SnapshotCache, default_normalize_score, live_nodes
from koord_scheduler.plugins.tainttoleration.policy import (
    HARD_EFFECTS,
    PREFER_EFFECTS,
    TaintSet,
    first_untolerated,
    group_by_taints,
    prefer_no_schedule_tolerations,
    tolerated_flags,
    untolerated_counts,
)

NAME = names.TAINT_TOLERATION
ARGS = None

ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
_REJECTED = unresolvable(ERR_REASON_UNTOLERATED)


@dataclass(frozen=True, slots=True)
class PreScoreState:
    tolerations_prefer_no_schedule: tuple[Toleration, ...]


PRE_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)


@dataclass(frozen=True, slots=True)
class TaintIndex:
    """The tainted nodes of one snapshot generation, grouped by taint set."""

    hard: dict[TaintSet, Positions]
    """NoSchedule/NoExecute taint sets."""
    prefer: dict[TaintSet, Positions]
    """PreferNoSchedule taint sets."""


class TaintToleration:
    name = NAME

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answer depends on, besides the node (see framework.node_cache)."""
        return pod.tolerations

    def __init__(self) -> None:
        self._index: SnapshotCache[str, TaintIndex] = SnapshotCache(max_entries=1)
        self._flags: SnapshotCache[tuple[Toleration, ...], BoolArray] = SnapshotCache(max_entries=256)
        self._counts: SnapshotCache[tuple[Toleration, ...], IntArray] = SnapshotCache(max_entries=256)

    def _taint_index(self, snapshot: ClusterSnapshot) -> TaintIndex:
        return self._index.get(snapshot, "taints", lambda: build_index(snapshot))

    # ----- Filter -----

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        index = self._taint_index(snapshot)
        if not index.hard:
            return NodeFilterResult.all_pass(len(positions))
        tolerations = pod.tolerations
        flags = self._flags.get(
            snapshot, tolerations, lambda: tolerated_flags(index.hard, tolerations, snapshot.capacity)
        )
        return NodeFilterResult.from_mask(flags.take(positions), _REJECTED)

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        state.write(PRE_SCORE_KEY, PreScoreState(prefer_no_schedule_tolerations(pod.tolerations)))
        return success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        pre = state.get(PRE_SCORE_KEY)
        tolerations = (
            pre.tolerations_prefer_no_schedule if pre is not None else prefer_no_schedule_tolerations(pod.tolerations)
        )
        index = self._taint_index(snapshot)
        if not index.prefer:
            return np.zeros(len(positions), dtype=np.int64)
        counts = self._counts.get(
            snapshot, tolerations, lambda: untolerated_counts(index.prefer, tolerations, snapshot.capacity)
        )
        return counts.take(positions)

    def score_extensions(self) -> TaintToleration:
        return self

    normalize_reads_only_scores = True
    """NormalizeScore depends on nothing but the scores (the runtime may reuse its result)."""

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return success()

    # ----- queueing -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
                is_schedulable_after_pod_toleration_change,
            ),
        )


def build_index(snapshot: ClusterSnapshot) -> TaintIndex:
    tainted = [(pos, node.taints) for pos, node in live_nodes(snapshot) if node.taints]
    return TaintIndex(
        hard=group_by_taints(tainted, HARD_EFFECTS),
        prefer=group_by_taints(tainted, PREFER_EFFECTS),
    )


def is_schedulable_after_node_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """Queue when the node went from having an untolerated taint (or not existing) to having none."""
    if not isinstance(new, Node) or first_untolerated(new.taints, pod.tolerations) is not None:
        return QueueingHint.SKIP
    if isinstance(old, Node) and first_untolerated(old.taints, pod.tolerations) is None:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def is_schedulable_after_pod_toleration_change(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """Only the pod's own toleration change can help it."""
    if isinstance(new, Pod) and new.key == pod.key and new.uid == pod.uid:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: None, handle: Handle) -> TaintToleration:
    return TaintToleration()


def declared_capabilities(
    plugin: TaintToleration,
) -> tuple[
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
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin
