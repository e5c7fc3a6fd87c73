"""NodeResourcesFit: does the pod's request fit the node's free allocatable, and how full would it be.

kube-scheduler v1.35 ``pkg/scheduler/framework/plugins/noderesources/fit.go``. PreFilter records the
pod's request; Filter checks every node at once (:mod:`.fit`); PreScore resolves the scored resources;
Score applies the configured strategy (:mod:`.scoring`) to all nodes at once. No NormalizeScore.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import numpy as np

from apis.config.errors import ConfigError
from apis.config.plugin_args import (
    DEFAULT_RESOURCES,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    NodeResourcesFitArgs,
)
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.diagnosis import FailureChunk
from koord_scheduler.framework.fast_paths import AddedPodsCheck, AddedPodsFilter, SignedPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import SUCCESS, Status, success
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
from koord_scheduler.plugins import resource_scoring as scoring
from koord_scheduler.plugins.resource_fit import (
    PRE_FILTER_KEY,
    FitRequest,
    PreFilterState,
    exact_fit_request,
    failure_codes,
    fit_code,
    fit_failures,
    fit_failures_arrays,
    fit_request,
    fits_on_empty_node,
    group_codes,
    is_ignored,
    status_for_code,
)
from koord_scheduler.plugins.resource_scoring import (
    ScoredColumns,
    ScoredResource,
    gather,
    gather_scored,
    scored_columns,
    scored_resources,
)

NAME = names.NODE_RESOURCES_FIT
ARGS = NodeResourcesFitArgs
MAX_PRE_FILTER_STATES = 256
"""PreFilter states kept, one per distinct request row; all are dropped when the table is full."""
MAX_PRE_SCORE_STATES = 256
"""PreScore states kept, one per distinct list of scored resources; all are dropped when full."""


class Scorer(Protocol):
    """``scorer(requested, allocatable, weights, all_positive=...) -> scores``, all over (nodes,
    resources); ``all_positive`` says whether every allocatable cell is > 0 (None: the scorer looks)."""

    def __call__(
        self, requested: IntArray, allocatable: IntArray, weights: IntArray, /, *, all_positive: bool | None = ...
    ) -> IntArray: ...


@dataclass(frozen=True, slots=True)
class PreScoreState:
    columns: ScoredColumns
    """The scored resources, resolved for :func:`~koord_scheduler.plugins.resource_scoring.gather_columns`."""

    @property
    def resources(self) -> tuple[ScoredResource, ...]:
        return self.columns.resources

    @property
    def weights(self) -> IntArray:
        return self.columns.weights


PRE_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)


RowScorer = Callable[[Sequence[int], Sequence[int], Sequence[int]], int]
_ROW_SCORERS: dict[str, RowScorer] = {
    LEAST_ALLOCATED: scoring.least_allocated_row,
    MOST_ALLOCATED: scoring.most_allocated_row,
}
"""Strategies with a plain-int form of the formula (RequestedToCapacityRatio's per-node score uses the
array form on one node)."""


def _scorer(args: NodeResourcesFitArgs) -> Scorer:
    strategy = args.scoring_strategy
    if strategy.type == MOST_ALLOCATED:
        return scoring.most_allocated
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        assert strategy.requested_to_capacity_ratio is not None  # validated
        shape = [(p.utilization, p.score) for p in strategy.requested_to_capacity_ratio.shape]
        utilization, score = scoring.scale_shape(shape)
        return partial(scoring.requested_to_capacity_ratio, utilization=utilization, score=score)
    assert strategy.type == LEAST_ALLOCATED
    return scoring.least_allocated


class Fit:
    """The NodeResourcesFit plugin (PreFilter, Filter, PreScore, Score, EnqueueExtensions).

    Filter and Score have both forms: the batch form over arrays and the per-node form over one node's
    row (the runtime asks the latter for a few nodes). ``snapshot`` is the one the per-node forms read
    rows from (the handle's)."""

    name = NAME

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answer depends on, besides the node (see framework.node_cache)."""
        return (pod.requests, pod.non_zero_cpu, pod.non_zero_memory)

    def __init__(self, args: NodeResourcesFitArgs, *, snapshot: ClusterSnapshot | None = None) -> None:
        self._snapshot = snapshot
        self._ignored_resources = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        # An omitted ``resources`` skips the model's validator, so default here too (cpu:1, memory:1).
        resources = args.scoring_strategy.resources or DEFAULT_RESOURCES
        self._resources = tuple((r.name, r.weight or 1) for r in resources)
        self._scorer = _scorer(args)
        self._row_scorer = _ROW_SCORERS.get(args.scoring_strategy.type)
        self._pre_filter_states: dict[int, PreFilterState] = {}
        """Per shared request row (by identity, checked on use): its PreFilter state."""
        self._pre_score_states: dict[tuple[ScoredResource, ...], PreScoreState] = {}
        """Per list of scored resources (pods of one request shape share it): its PreScore state."""

    # ----- PreFilter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        state.write(PRE_FILTER_KEY, self._pre_filter_state(pod, snapshot))
        return None, success()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _pre_filter_state(self, pod: Pod, snapshot: ClusterSnapshot) -> PreFilterState:
        request = snapshot.request_vector(pod)
        states = self._pre_filter_states
        known = states.get(id(request))
        if known is not None and known.request is request:
            # The same shared row (request_vector caches one per distinct requests and column count):
            # the same columns, names and amounts. Pods of one request shape share the state, however
            # the shapes interleave.
            return known
        fit = fit_request(
            request,
            snapshot.resource_names,
            ignored_resources=self._ignored_resources,
            ignored_groups=self._ignored_groups,
        )
        if len(states) >= MAX_PRE_FILTER_STATES:
            states.clear()
        state = states[id(request)] = PreFilterState(request, fit)
        return state

    # ----- Filter -----

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        pre = state.get(PRE_FILTER_KEY) or self._pre_filter_state(pod, snapshot)
        failed, codes = fit_failures_arrays(
            pre.fit,
            positions,
            allocatable=snapshot.allocatable,
            requested=snapshot.requested,
            pod_count=snapshot.pod_count,
            allowed_pods=snapshot.allowed_pods,
        )
        if len(failed) == 0:
            return NodeFilterResult.all_pass(len(positions))
        restored = state.get(RESTORED_CAPACITY)
        if restored is not None:
            failed, codes = _recheck_restored(
                pre.fit, positions, failed=failed, codes=codes, restored=restored, snapshot=snapshot
            )
            if len(failed) == 0:
                return NodeFilterResult.all_pass(len(positions))
        passed = np.ones(len(positions), dtype=np.bool_)
        passed[failed] = False
        distinct, ids = group_codes(codes, len(pre.fit.names) + 2)
        reason_ids = np.zeros(len(positions), dtype=np.int32)
        reason_ids[failed] = ids
        statuses = tuple(status_for_code(code, pre.fit.names) for code in distinct)
        return NodeFilterResult(passed, reason_ids, statuses)

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        """The per-node form: plain ints over the node's row (the same answer as :meth:`filter_nodes`)."""
        snapshot = self._require_snapshot()
        pre = state.get(PRE_FILTER_KEY) or self._pre_filter_state(pod, snapshot)
        pos = node_info.position
        code = fit_code(
            pre.fit,
            pos,
            allocatable=snapshot.allocatable,
            requested=snapshot.requested,
            pod_count=snapshot.pod_count,
            allowed_pods=snapshot.allowed_pods,
        )
        if code == 0:
            return SUCCESS
        restored = state.get(RESTORED_CAPACITY)
        if restored is not None:
            one = np.array([pos], dtype=np.intp)
            failed, codes = _recheck_restored(
                pre.fit,
                one,
                failed=np.zeros(1, dtype=np.intp),
                codes=np.array([code], dtype=np.int64),
                restored=restored,
                snapshot=snapshot,
            )
            if len(failed) == 0:
                return SUCCESS
            code = int(codes[0])
        return status_for_code(code, pre.fit.names)

    def _require_snapshot(self) -> ClusterSnapshot:
        if self._snapshot is None:
            raise RuntimeError(f"{NAME}: the per-node form needs the snapshot (build the plugin with new())")
        return self._snapshot

    def added_pods_check(self, state: CycleState, active_filters: Sequence[str]) -> AddedPodsCheck | None:
        """Filtering with nominated pods by this plugin's arithmetic, when that is exact this cycle
        (:func:`~koord_scheduler.plugins.resource_fit.exact_fit_request`)."""
        fit = exact_fit_request(state, active_filters)
        return None if fit is None else _FitWithAddedPods(fit)

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        state.write(PRE_SCORE_KEY, self._pre_score_state(pod, snapshot))
        return success()

    def _pre_score_state(self, pod: Pod, snapshot: ClusterSnapshot) -> PreScoreState:
        resources = scored_resources(pod, snapshot, self._resources)
        states = self._pre_score_states
        known = states.get(resources)
        if known is None:
            if len(states) >= MAX_PRE_SCORE_STATES:
                states.clear()
            known = states[resources] = PreScoreState(scored_columns(resources))
        return known

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        pre = state.get(PRE_SCORE_KEY) or self._pre_score_state(pod, snapshot)
        if not pre.resources:
            return np.zeros(len(positions), dtype=np.int64)
        requested, allocatable, all_positive = gather_scored(snapshot, positions, pre.columns)
        return self._scorer(requested, allocatable, pre.weights, all_positive=all_positive)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        """The per-node form: plain ints read from the node's row (the same answer as :meth:`score_nodes`,
        which a dozen numpy calls cost more than on one node)."""
        snapshot = self._require_snapshot()
        pre = state.get(PRE_SCORE_KEY) or self._pre_score_state(pod, snapshot)
        resources = pre.resources
        if not resources:
            return 0
        pos = node_info.position
        row_scorer = self._row_scorer
        if row_scorer is None:
            one = np.array([pos], dtype=np.intp)
            requested_rows, allocatable_rows = gather(snapshot, one, resources)
            return int(self._scorer(requested_rows, allocatable_rows, pre.weights)[0])
        allocatable, requested, non_zero = snapshot.allocatable, snapshot.requested, snapshot.non_zero_requested
        used = [
            r.amount + (non_zero.item(pos, r.non_zero_col) if r.non_zero_col >= 0 else requested.item(pos, r.column))
            for r in resources
        ]
        return row_scorer(used, [allocatable.item(pos, r.column) for r in resources], [r.weight for r in resources])

    def score_extensions(self) -> ScoreExtensions | None:
        return None

    # ----- EnqueueExtensions -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
                self.is_schedulable_after_pod_event,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                self.is_schedulable_after_node_change,
            ),
        )

    def is_schedulable_after_pod_event(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """A deleted pod that was assigned (or nominated) frees resources; an update helps only when it
        shrinks the request of a resource the waiting pod asks for."""
        if not isinstance(old, Pod):
            return QueueingHint.QUEUE
        if new is None:
            if not old.node_name and not old.nominated_node_name:
                return QueueingHint.SKIP
            return QueueingHint.QUEUE
        if not isinstance(new, Pod) or not new.node_name:
            return QueueingHint.SKIP
        for resource, amount in pod.requests.items():
            if amount > 0 and old.requests.get(resource, 0) > new.requests.get(resource, 0):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        """Queue when the pod would fit the (empty) new node and the node is new or grew in a resource
        the pod requests."""
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        if not fits_on_empty_node(
            pod.requests,
            new.allocatable,
            ignored_resources=self._ignored_resources,
            ignored_groups=self._ignored_groups,
        ):
            return QueueingHint.SKIP
        if not isinstance(old, Node):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if _requested_resource_increased(pod, old, new) else QueueingHint.SKIP

    def is_ignored(self, resource: str) -> bool:
        return is_ignored(resource, self._ignored_resources, self._ignored_groups)


class _FitWithAddedPods:
    """NodeResourcesFit's answer with extra pods on some nodes: their requests are added to the nodes'
    rows in one step and checked with the plugin's own arithmetic."""

    __slots__ = ("_fit",)

    def __init__(self, fit: FitRequest) -> None:
        self._fit = fit

    def rejections(self, snapshot: ClusterSnapshot, added: Sequence[tuple[int, Sequence[Pod]]]) -> FailureChunk | None:
        fit = self._fit
        checked: list[tuple[int, list[Pod]]] = []
        for pos, pods in added:
            present = snapshot.info(pos).pods
            extra = [p for p in pods if p.key not in present]  # assumed ones are already accounted
            if extra:
                checked.append((pos, extra))
        if not checked:
            return None
        added = checked
        width = -1
        while width != len(snapshot.resource_names):
            # request_vector adds a column for a resource seen first: gather again until none was added.
            width = len(snapshot.resource_names)
            vectors = [snapshot.request_vector(p) for _, extra in added for p in extra]
        at = np.fromiter((pos for pos, _ in added), dtype=np.intp, count=len(added))
        counts = np.fromiter((len(extra) for _, extra in added), dtype=np.int64, count=len(added))
        extra_rows = np.zeros((len(added), width), dtype=np.int64)
        owners = np.repeat(np.arange(len(added), dtype=np.intp), counts)
        np.add.at(extra_rows, owners, np.array(vectors, dtype=np.int64))
        failing, codes = fit_failures(
            fit,
            np.arange(len(added), dtype=np.intp),
            allocatable=np.take(snapshot.allocatable, at, axis=0),
            requested=np.take(snapshot.requested, at, axis=0) + extra_rows,
            pod_count=np.take(snapshot.pod_count, at) + counts,
            allowed_pods=np.take(snapshot.allowed_pods, at),
        )
        if len(failing) == 0:
            return None
        distinct, ids = group_codes(codes, len(fit.names) + 2)
        statuses = tuple(status_for_code(code, fit.names).with_plugin(NAME) for code in distinct)
        return FailureChunk(at[failing], ids, statuses)


def _recheck_restored(
    fit: FitRequest,
    positions: Positions,
    *,
    failed: Positions,
    codes: IntArray,
    restored: RestoredCapacity,
    snapshot: ClusterSnapshot,
) -> tuple[Positions, IntArray]:
    """Recheck the failing nodes that have capacity restored for this pod (reserved for it), with
    ``requested - restored`` and the reservations' pod slots given back. Only failing nodes are looked at,
    so the common case costs nothing."""
    width = snapshot.requested.shape[1]
    where, amounts = restored.for_positions(positions[failed], width)
    if len(where) == 0:
        return failed, codes
    at = positions[failed[where]]
    local = np.arange(len(at), dtype=np.intp)
    new_codes = failure_codes(
        fit,
        local,
        allocatable=np.take(snapshot.allocatable, at, axis=0),
        requested=np.take(snapshot.requested, at, axis=0) - amounts,
        pod_count=np.take(snapshot.pod_count, at) - restored.pod_slots_for(at),
        allowed_pods=np.take(snapshot.allowed_pods, at),
    )
    codes = codes.copy()
    codes[where] = new_codes
    still = codes != 0
    return failed[still], codes[still]


def _requested_resource_increased(pod: Pod, old: Node, new: Node) -> bool:
    """``haveAnyRequestedResourcesIncreased``: more pod slots, or more of a resource the pod requests."""
    if new.allocatable.get("pods", 0) > old.allocatable.get("pods", 0):
        return True
    return any(
        amount > 0 and name != "pods" and new.allocatable.get(name, 0) > old.allocatable.get(name, 0)
        for name, amount in pod.requests.items()
    )


def new(args: NodeResourcesFitArgs | None, handle: Handle) -> Fit:
    """Factory: validates ``args`` (as ``NewFit`` does) and builds the plugin; ``None`` means defaults."""
    args = args if args is not None else NodeResourcesFitArgs()
    errors = args.field_errors("")
    if errors:
        raise ConfigError(errors, summary=f"invalid {NAME} args")
    return Fit(args, snapshot=handle.snapshot)


def declared_capabilities(
    plugin: Fit,
) -> tuple[
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    SignedPlugin,
    AddedPodsFilter,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin
