"""PodTopologySpread (kube-scheduler ``podtopologyspread``, v1.35 semantics).

- PreFilter: the pod's ``DoNotSchedule`` constraints (or the default ones, with the selector of the
  Services and controller selecting the pod: :mod:`.workloads`); Skip when there are none. Matching
  pods are counted per topology value over all nodes that carry every constraint's key and pass the
  constraint's nodeAffinityPolicy (default Honor) and nodeTaintsPolicy (default Ignore).
- Filter: a node without a constraint's key is UnschedulableAndUnresolvable
  ``"node(s) didn't match pod topology spread constraints (missing required label)"``; a node where
  ``matchNum + selfMatch - globalMin > maxSkew`` (globalMin 0 below ``minDomains`` domains) is
  Unschedulable ``"node(s) didn't match pod topology spread constraints"``. Constraints are checked in
  order and the first failing one decides.
- PreScore/Score/NormalizeScore: the ``ScheduleAnyway`` constraints; see :mod:`.scoring`.
- PreFilterExtensions add_pod/remove_pod update the per-domain counts of a cloned state.
- EventsToRegister: Pod and Node events with upstream's queueing hints (:mod:`.hints`).

Counting uses a :class:`~koord_scheduler.plugins.topology_index.TopologyIndex` kept up to date from the
pods that changed, so a pod costs O(nodes) numpy work whatever the number of running pods.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from apis.config.plugin_args import SYSTEM_DEFAULTING, PodTopologySpreadArgs
from apis.config.plugin_args import TopologySpreadConstraint as ArgsConstraint
from apis.core.selectors import label_selector_matches
from apis.core.tolerations import SCHEDULING_EFFECTS, find_untolerated_taint
from apis.core.types import Node, Pod, Toleration, TopologySpreadConstraint
from koord_scheduler.framework.cycle_state import CycleState, StateKey
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
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, IntArray, NodeInfo, Positions
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
from koord_scheduler.plugins.helpers import RequiredSelector, SnapshotCache, live_nodes, matches_required, required_mask
from koord_scheduler.plugins.podtopologyspread import hints
from koord_scheduler.plugins.podtopologyspread.policy import (
    HONOR,
    HOSTNAME_KEY,
    IGNORE,
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    DefaultSelector,
    bucket_sums,
    domain_match_counts,
    domain_reasons,
    eligible_buckets,
    hard_constraints,
    min_match_num,
    owner_default_selector,
    soft_constraints,
)
from koord_scheduler.plugins.podtopologyspread.scoring import (
    add_constraint_score,
    go_round,
    normalize_scores,
    topology_normalizing_weight,
)
from koord_scheduler.plugins.podtopologyspread.workloads import WORKLOAD_KINDS, WorkloadStore
from koord_scheduler.plugins.topology_index import (
    DomainCache,
    SpreadSelector,
    TopologyDomains,
    TopologyIndex,
    as_upstream_pod_change,
)

NAME = names.POD_TOPOLOGY_SPREAD
ARGS = PodTopologySpreadArgs

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

_MISSING_LABEL = unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
_SKEW = unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
_FILTER_STATUSES = (_MISSING_LABEL, _MISSING_LABEL, _SKEW)
MAX_FILTER_ANSWERS = 16
"""Filter answers kept over read-only positions (the least recently used is dropped)."""
"""Indexed by reason id: 1 missing label, 2 skew (0 is unused: passing nodes)."""


@dataclass(slots=True)
class ConstraintCounts:
    """One hard constraint's ``TpValueToMatchNum`` and critical-path minimum."""

    constraint: Constraint
    domains: TopologyDomains
    self_match: int
    match_num: IntArray
    """Matching pods per topology value id (eligible nodes only)."""
    present: BoolArray
    """Values that are domains (some eligible node carries them)."""

    def clone(self) -> ConstraintCounts:
        return ConstraintCounts(
            self.constraint, self.domains, self.self_match, self.match_num.copy(), self.present.copy()
        )

    def global_min(self) -> int:
        return min_match_num(self.match_num, self.present, self.constraint.min_domains)


@dataclass(slots=True)
class PreFilterState:
    constraints: list[ConstraintCounts]
    namespace: str
    required: RequiredSelector
    tolerations: tuple[Toleration, ...]

    def clone(self) -> PreFilterState:
        return PreFilterState([c.clone() for c in self.constraints], self.namespace, self.required, self.tolerations)


@dataclass(slots=True)
class ScoreConstraint:
    constraint: Constraint
    domains: TopologyDomains
    weight: float
    node_counts: IntArray
    """Matching pods per node position (used directly for the hostname key)."""
    pair_counts: IntArray
    """Matching pods per value id (the extra last id stands for "no label"); unused for hostname."""


@dataclass(slots=True)
class PreScoreState:
    constraints: list[ScoreConstraint]
    require_all: bool
    has_all: BoolArray
    """Per position: the node carries every constraint's key."""
    ignored: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    """Aligned with the positions last scored: nodes scored 0 and left out of normalization."""


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)


def required_selector(pod: Pod) -> RequiredSelector:
    affinity = pod.affinity
    terms = affinity.node_affinity.required if affinity and affinity.node_affinity else None
    return pod.node_selector, terms


class PodTopologySpread:
    name = NAME

    def __init__(
        self,
        default_constraints: Sequence[TopologySpreadConstraint] = SYSTEM_DEFAULT_CONSTRAINTS,
        *,
        system_defaulted: bool = True,
        default_selector: DefaultSelector = owner_default_selector,
    ) -> None:
        self._defaults = tuple(default_constraints)
        self._system_defaulted = system_defaulted
        self._default_selector = default_selector
        self._index = TopologyIndex()
        self._domains = DomainCache()
        self._masks: SnapshotCache[object, BoolArray] = SnapshotCache(max_entries=128)
        self._buckets: SnapshotCache[object, tuple[IntArray, BoolArray]] = SnapshotCache(max_entries=64)
        self._last_slots: tuple[IntArray, Positions, IntArray] | None = None
        self._answers: OrderedDict[tuple[object, ...], tuple[Positions, tuple[IntArray, ...], NodeFilterResult]] = (
            OrderedDict()
        )
        """Filter answers over read-only positions by (positions, per constraint: the domain ids and the
        reason table), with the arrays they were computed from (held, so their ids stay theirs)."""
        """(value ids, positions, :meth:`_slots` of them) of the last Filter over read-only arrays."""
        self.incremental_bucket_sums = True
        """Per-value match counts kept by the index (False: summed over every node per pod; the same
        numbers, for the equivalence test)."""

    # ----- node masks -----

    def _has_keys(self, snapshot: ClusterSnapshot, constraints: Sequence[Constraint]) -> BoolArray:
        """Per position: a live node carrying every constraint's key (``nodeLabelsMatchSpreadConstraints``).
        Shared and read-only: kept per set of keys until a node is added, removed or relabelled."""
        keys = tuple(sorted({c.topology_key for c in constraints}))

        def build() -> BoolArray:
            mask = snapshot.valid[: snapshot.capacity].copy()
            for key in keys:
                mask &= self._domains.get(snapshot, key).has_key
            mask.flags.writeable = False
            return mask

        return self._masks.get(snapshot, ("keys", snapshot.capacity, keys), build)

    def _inclusion(self, snapshot: ClusterSnapshot, c: Constraint, pod: Pod) -> BoolArray | None:
        """``matchNodeInclusionPolicies`` per position, or None when every node is included."""
        mask: BoolArray | None = None
        if c.node_affinity_policy == HONOR:
            selector = required_selector(pod)
            if selector[0] is not None or selector[1] is not None:
                mask = self._masks.get(
                    snapshot,
                    ("affinity", snapshot.capacity, selector),
                    lambda: required_mask(selector, live_nodes(snapshot), snapshot.capacity),
                )
        if c.node_taints_policy == HONOR:
            tolerations = pod.tolerations
            taints_ok = self._masks.get(
                snapshot, ("taints", snapshot.capacity, tolerations), lambda: _tolerated_mask(snapshot, tolerations)
            )
            mask = taints_ok if mask is None else mask & taints_ok
        return mask

    def _node_counts(self, snapshot: ClusterSnapshot, pod: Pod, c: Constraint) -> IntArray:
        if c.counts_nothing:
            return np.zeros(snapshot.capacity, dtype=np.int64)
        assert c.selector is not None
        self._index.sync(snapshot)
        return self._index.pod_counts(SpreadSelector(pod.namespace, c.selector))

    def _match_num(
        self, snapshot: ClusterSnapshot, pod: Pod, c: Constraint, buckets: IntArray, n_values: int
    ) -> IntArray:
        """Matching pods per topology value over the nodes of :func:`eligible_buckets` (a new array)."""
        if not self.incremental_bucket_sums:
            return bucket_sums(buckets, self._node_counts(snapshot, pod, c), n_values)
        if c.counts_nothing:
            return np.zeros(n_values, dtype=np.int64)
        assert c.selector is not None
        self._index.sync(snapshot)
        return self._index.bucket_sums(SpreadSelector(pod.namespace, c.selector), buckets, n_values + 1)[:n_values]

    # ----- Filter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        constraints = hard_constraints(pod, self._defaults, self._default_selector)
        if not constraints:
            return None, skip()
        has_all = self._has_keys(snapshot, constraints)
        counted: list[ConstraintCounts] = []
        for c in constraints:
            domains = self._domains.get(snapshot, c.topology_key)
            eligible = has_all
            inclusion = self._inclusion(snapshot, c, pod)
            if inclusion is not None:
                eligible = eligible & inclusion
            n_values = len(domains.values)
            if inclusion is None:
                # Eligibility is the key mask alone: the per-node bucket ids and the domains present are
                # kept with it, and the index keeps the matching pods per bucket up to date as pods come
                # and go (no sum over every node per pod).
                buckets, present = self._buckets.get(
                    snapshot,
                    ("buckets", snapshot.capacity, c.topology_key, tuple(k.topology_key for k in constraints)),
                    partial(eligible_buckets, domains.value_ids, has_all, n_values),
                )
                match_num, present = self._match_num(snapshot, pod, c, buckets, n_values), present.copy()
            else:
                node_counts = self._node_counts(snapshot, pod, c)
                match_num, present = domain_match_counts(domains.value_ids, node_counts, eligible, n_values)
            self_match = int(label_selector_matches(c.selector, pod.labels))
            counted.append(ConstraintCounts(c, domains, self_match, match_num, present))
        state.write(PRE_FILTER_KEY, PreFilterState(counted, pod.namespace, required_selector(pod), pod.tolerations))
        return None, success()

    def pre_filter_extensions(self) -> PodTopologySpread:
        return self

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        pre = state.get(PRE_FILTER_KEY)
        if pre is None or not pre.constraints:
            return NodeFilterResult.all_pass(len(positions))
        # A node's answer depends only on its domain: one reason per topology value (slot 0: the node
        # lacks the key), read per node with one gather, the first failing constraint's reason kept.
        tables = [
            domain_reasons(cc.match_num, cc.self_match, cc.global_min(), cc.constraint.max_skew)
            for cc in pre.constraints
        ]
        value_ids = tuple(cc.domains.value_ids for cc in pre.constraints)
        keep = not positions.flags.writeable and not any(v.flags.writeable for v in value_ids)
        key: tuple[object, ...] = ()
        if keep:
            # The spread pods of a burst see a few patterns of full domains over the same node order:
            # the same tables over the same read-only arrays give the same (read-only) answer.
            key = (id(positions), *(id(v) for v in value_ids), *(t.tobytes() for t in tables))
            known = self._answers.get(key)
            if (
                known is not None
                and known[0] is positions
                and all(a is b for a, b in zip(known[1], value_ids, strict=True))
            ):
                self._answers.move_to_end(key)
                return known[2]
        reason: np.ndarray | None = None
        for cc, table in zip(pre.constraints, tables, strict=True):
            codes = table.take(self._slots(cc.domains.value_ids, positions))
            reason = codes if reason is None else np.where(reason == 0, codes, reason)
        assert reason is not None
        result = NodeFilterResult(reason == 0, reason, _FILTER_STATUSES)
        if keep:
            result.passed.flags.writeable = False
            reason.flags.writeable = False
            self._answers[key] = (positions, value_ids, result)
            if len(self._answers) > MAX_FILTER_ANSWERS:
                self._answers.popitem(last=False)
        return result

    def _slots(self, value_ids: IntArray, positions: Positions) -> IntArray:
        """``value_ids[positions] + 1`` (the :func:`domain_reasons` slot per node), kept while both arrays
        are the same read-only objects: the snapshot's node order and a domain's ids last a whole burst
        of pods, and the gather over every node would otherwise be paid by each spread pod."""
        last = self._last_slots
        if last is not None and last[0] is value_ids and last[1] is positions:
            return last[2]
        slots: IntArray = value_ids.take(positions) + 1
        if not positions.flags.writeable and not value_ids.flags.writeable:
            slots.flags.writeable = False
            self._last_slots = (value_ids, positions, slots)
        return slots

    # ----- PreFilterExtensions -----

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        self._update_with_pod(state, pod, pod_to_add, node_info.node, 1)
        return success()

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        self._update_with_pod(state, pod, pod_to_remove, node_info.node, -1)
        return success()

    @staticmethod
    def _update_with_pod(state: CycleState, pod: Pod, updated: Pod, node: Node | None, delta: int) -> None:
        """``updateWithPod``: only pods of the preemptor's namespace, on nodes carrying every key and
        passing the constraint's inclusion policies, that match the constraint's selector."""
        pre = state.get(PRE_FILTER_KEY)
        if pre is None or node is None or updated.namespace != pre.namespace:
            return
        labels = node.labels
        if any(cc.constraint.topology_key not in labels for cc in pre.constraints):
            return
        for cc in pre.constraints:
            c = cc.constraint
            if not label_selector_matches(c.selector, updated.labels):
                continue
            if c.node_affinity_policy == HONOR and not matches_required(pre.required, node):
                continue
            if c.node_taints_policy == HONOR and (
                find_untolerated_taint(node.taints, pre.tolerations, SCHEDULING_EFFECTS) is not None
            ):
                continue
            value_id = cc.domains.value_id(labels[c.topology_key])
            if value_id < 0:
                continue  # a node the snapshot did not know at PreFilter time
            cc.match_num[value_id] += delta
            cc.present[value_id] = True

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        constraints = soft_constraints(pod, self._defaults, self._default_selector)
        if not constraints:
            return skip()
        # Only non-system-default constraints require every key: a node without a zone label still gets
        # hostname spreading from the system defaults.
        require_all = bool(pod.topology_spread_constraints) or not self._system_defaulted
        has_all = self._has_keys(snapshot, constraints)
        live = snapshot.valid[: snapshot.capacity]
        counted_nodes = has_all if require_all else live
        scored = positions[has_all.take(positions)] if require_all else positions
        scored_constraints: list[ScoreConstraint] = []
        for c in constraints:
            domains = self._domains.get(snapshot, c.topology_key)
            node_counts = self._node_counts(snapshot, pod, c)
            if c.topology_key == HOSTNAME_KEY:
                # Per-node counts are read in Score; the size is the number of scored nodes.
                weight = topology_normalizing_weight(len(scored))
                scored_constraints.append(ScoreConstraint(c, domains, weight, node_counts, node_counts[:0]))
                continue
            # A node without the key is the pair (key, ""), as a Go map lookup of a missing label gives.
            pair_ids = _pair_ids(domains)
            candidate = np.zeros(len(domains.values) + 1, dtype=np.bool_)
            candidate[pair_ids.take(scored)] = True
            eligible = counted_nodes
            inclusion = self._inclusion(snapshot, c, pod)
            if inclusion is not None:
                eligible = eligible & inclusion
            ids = pair_ids[eligible]
            sums = np.bincount(ids, weights=node_counts[eligible], minlength=len(candidate)).astype(np.int64)
            weight = topology_normalizing_weight(int(candidate.sum()))
            scored_constraints.append(ScoreConstraint(c, domains, weight, node_counts, np.where(candidate, sums, 0)))
        state.write(PRE_SCORE_KEY, PreScoreState(scored_constraints, require_all, has_all))
        return success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        pre = state.read(PRE_SCORE_KEY)
        ignored = ~pre.has_all.take(positions) if pre.require_all else np.zeros(len(positions), dtype=np.bool_)
        pre.ignored = ignored
        score = np.zeros(len(positions), dtype=np.float64)
        for sc in pre.constraints:
            value_ids = sc.domains.value_ids.take(positions)
            has_key = value_ids >= 0
            if sc.constraint.topology_key == HOSTNAME_KEY:
                counts = sc.node_counts.take(positions)
            else:
                counts = sc.pair_counts.take(_pair_ids(sc.domains).take(positions))
            add_constraint_score(score, counts, has_key, sc.weight, sc.constraint.max_skew)
        raw = go_round(score)
        raw[ignored] = 0
        return raw

    def score_extensions(self) -> PodTopologySpread:
        return self

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        pre = state.get(PRE_SCORE_KEY)
        if pre is None:
            return success()
        ignored = pre.ignored if len(pre.ignored) == len(scores) else np.zeros(len(scores), dtype=np.bool_)
        normalize_scores(scores, ignored)
        return success()

    # ----- queueing -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """Upstream's events and hints (:mod:`.hints`). Pods register for every action: the scheduler
        reports an assigned pod's update as one generic ``UPDATE``, which the hint narrows to label
        changes as upstream's ``UpdatePodLabel`` registration does."""
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.ALL), self.hint_after_pod_change),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
                ),
                self.hint_after_node_change,
            ),
        )

    def hint_after_pod_change(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        change = as_upstream_pod_change(old, new)
        if change is None:
            return QueueingHint.QUEUE
        constraints = hard_constraints(pod, self._defaults, self._default_selector)
        return hints.after_pod_change(pod, constraints, *change)

    def hint_after_node_change(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        if not isinstance(old, Node | None) or not isinstance(new, Node | None):
            return QueueingHint.QUEUE
        return hints.after_node_change(hard_constraints(pod, self._defaults, self._default_selector), old, new)


def _pair_ids(domains: TopologyDomains) -> IntArray:
    """Value ids where "no label" becomes the id of the value "" (or a fresh last id)."""
    missing = domains.index.get("", len(domains.values))
    return np.where(domains.value_ids >= 0, domains.value_ids, missing)


def _tolerated_mask(snapshot: ClusterSnapshot, tolerations: tuple[Toleration, ...]) -> BoolArray:
    mask = np.zeros(snapshot.capacity, dtype=np.bool_)
    for pos, node in live_nodes(snapshot):
        mask[pos] = not node.taints or find_untolerated_taint(node.taints, tolerations, SCHEDULING_EFFECTS) is None
    return mask


def new(args: PodTopologySpreadArgs | None, handle: Handle) -> PodTopologySpread:
    """The plugin; it watches Services and controllers for the default constraints' selector
    (:mod:`.workloads`)."""
    store = WorkloadStore()
    for kind in WORKLOAD_KINDS:
        handle.watch(kind, store.on_event)
    return from_args(args, default_selector=store.default_selector)


def from_args(
    args: PodTopologySpreadArgs | None, *, default_selector: DefaultSelector = owner_default_selector
) -> PodTopologySpread:
    """The plugin without workload informers: by default it approximates controllers from the pod
    (:func:`~.policy.owner_default_selector`)."""
    args = args or PodTopologySpreadArgs()
    selector = default_selector
    if args.defaulting_type == SYSTEM_DEFAULTING:
        return PodTopologySpread(SYSTEM_DEFAULT_CONSTRAINTS, system_defaulted=True, default_selector=selector)
    return PodTopologySpread(
        tuple(core_constraint(c) for c in args.default_constraints), system_defaulted=False, default_selector=selector
    )


def core_constraint(c: ArgsConstraint) -> TopologySpreadConstraint:
    """An args ``defaultConstraints`` entry as the core type (validation forbids a labelSelector)."""
    return TopologySpreadConstraint(
        max_skew=c.max_skew,
        topology_key=c.topology_key,
        when_unsatisfiable=c.when_unsatisfiable,
        min_domains=c.min_domains,
        node_affinity_policy=c.node_affinity_policy or HONOR,
        node_taints_policy=c.node_taints_policy or IGNORE,
        match_label_keys=tuple(c.match_label_keys),
    )


def declared_capabilities(
    plugin: PodTopologySpread,
) -> tuple[
    PreFilterExtensions,
    PreFilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    BatchScorePlugin,
    EnqueueExtensions,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin
