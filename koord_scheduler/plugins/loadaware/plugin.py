"""LoadAwareScheduling: place pods by how busy nodes really are (NodeMetric), not only by requests.

Koordinator ``pkg/scheduler/plugins/loadaware``. Filter rejects a node when
``round(100 x (usage + delta + incoming estimate) / allocatable) > threshold`` for some resource; Score
prefers the least used nodes (or, with ``scoringStrategy: TargetUtilization``, packs nodes toward a target
as Trimaran's TargetLoadPacking does). ``delta`` covers pods assigned since the node's last report
(:mod:`.assign_cache`), so a burst of pods does not pile onto the node that looked idle a minute ago.

Stale and missing data, made explicit (``now`` is the scheduler clock, fixed by ``simulate --now``):

======================================  ================================  ==========
NodeMetric of the node                   Filter                            Score
======================================  ================================  ==========
none                                     pass (node is not load-aware)     0
``status.nodeMetric`` unset              pass                              0
expired, ``filterExpiredNodeMetrics``    reject ``node(s) nodeMetric       0
                                         expired``; with
                                         ``enableScheduleWhenNodeMetrics
                                         Expired``: pass, thresholds not
                                         checked on stale data
expired, ``filterExpiredNodeMetrics:     thresholds on the last report     0
false`` (the Helm chart's setting)       (Koordinator's behaviour)
fresh                                    thresholds                        score
======================================  ================================  ==========

Expired means ``updateTime`` unset or ``now - updateTime ≥ nodeMetricExpirationSeconds``. The
``simulate`` report shows every node's freshness next to its usage.

Pods: pods this scheduler places are recorded at Reserve (timestamp = the clock) and dropped at
Unreserve or when forgotten. Pods bound by others or deleted are picked up from the snapshot by the
per-cycle step, :meth:`LoadAwareScheduling.prepare_cycle` (:mod:`.rows`). Such pods take their
PodScheduled transition (else creation time) as assignment time (unknown → estimated only while missing
from ``podsMetric``). ``estimatedSecondsAfterPodScheduled`` / ``estimatedSecondsAfterInitialized`` (and the
pod annotations with ``allowCustomizeEstimation``) set a forced-estimation deadline (:mod:`.timing`); with
either configured the plugin also follows pod condition changes.

Layout: this module holds the extension points; :mod:`.rows` the per-node rows kept against the
snapshot, :mod:`.incoming` the pod estimates, :mod:`.report` the ``simulate`` report, :mod:`.scoring`
the formulas in both forms (arrays for :meth:`~LoadAwareScheduling.filter_nodes` /
:meth:`~LoadAwareScheduling.score_nodes`, one row for :meth:`~LoadAwareScheduling.filter` /
:meth:`~LoadAwareScheduling.score`, which the runtime calls for the few nodes that changed since a
cached answer).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from apis.config.loadaware_args import TARGET_UTILIZATION, LoadAwareSchedulingArgs
from apis.core.types import CPU, MEMORY, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.fast_paths import CyclePreparer, SignedPlugin, WarmUpPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterPlugin,
    ReservePlugin,
    ScorePlugin,
)
from koord_scheduler.framework.services import ApiRoute, APIServiceProvider
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import SUCCESS, Code, Status
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    EventType,
    NodeFilterResult,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.loadaware import scoring, service
from koord_scheduler.plugins.loadaware.assign_cache import AssignCache
from koord_scheduler.plugins.loadaware.estimator import is_reserve_pod
from koord_scheduler.plugins.loadaware.incoming import INCOMING_KEY, IncomingPod, PodEstimator
from koord_scheduler.plugins.loadaware.metrics_view import NON_PROD, PROD, LoadView, RowRecord
from koord_scheduler.plugins.loadaware.nodemetric import NODE_METRIC_KIND, NodeMetricRecord
from koord_scheduler.plugins.loadaware.report import node_load_report
from koord_scheduler.plugins.loadaware.rows import LoadRows
from koord_scheduler.plugins.loadaware.timing import EstimationWindows

NAME = names.LOAD_AWARE_SCHEDULING
ARGS = LoadAwareSchedulingArgs

REASON_NODE_METRIC_EXPIRED = "node(s) nodeMetric expired"
REASON_USAGE_EXCEED_THRESHOLD = "node(s) {} usage exceed threshold"
REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD = "node(s) {} aggregated usage exceed threshold"

SimulationReporter = Callable[[], tuple[str, list[dict[str, Any]]]]


def vectorized_resources(args: LoadAwareSchedulingArgs) -> tuple[str, ...]:
    """Koordinator's vectorizer: the sorted union of cpu, memory and every resource the args name."""
    names_: set[str] = {CPU, MEMORY}
    names_.update(args.usage_thresholds, args.prod_usage_thresholds, args.resource_weights)
    names_.update(args.estimated_scaling_factors, args.supported_resources)
    names_.update(args.scoring_strategy.target_utilization)
    if args.aggregated is not None:
        names_.update(args.aggregated.usage_thresholds)
    return tuple(sorted(names_))


class LastSign(NamedTuple):
    """What :meth:`LoadAwareScheduling.sign_pod` answered last."""

    pod: Pod
    version: int
    """``snapshot.version`` when it answered."""
    sign: Hashable


@dataclass(slots=True)
class FilterPassScores:
    """Scores the per-node Filter computed on the way (the Filter and Score rules read the same row, in
    one pass over the resources: :func:`.scoring.row_failure_and_least_used`), for this cycle's per-node
    Score. Valid for one incoming estimate and snapshot version; each is used once."""

    incoming: IncomingPod | None = None
    version: int = -1
    by_position: dict[int, int] = field(default_factory=dict)


class LoadAwareScheduling:
    """Filter and Score (both forms), Reserve/Unreserve, queue events and the per-cycle step. See the
    module docstring."""

    name = NAME

    def __init__(self, args: LoadAwareSchedulingArgs, snapshot: ClusterSnapshot, clock: Callable[[], float]) -> None:
        self.args = args
        self._snapshot = snapshot
        self._clock = clock
        self.resources = vectorized_resources(args)
        width = len(self.resources)
        self._width = width
        self._windows = EstimationWindows(
            float(args.estimated_seconds_after_pod_scheduled or 0) or None,
            float(args.estimated_seconds_after_initialized or 0) or None,
            args.allow_customize_estimation,
        )
        self._estimator = PodEstimator(self.resources, args.estimated_scaling_factors, windows=self._windows)
        self._rows = LoadRows(args, snapshot, clock, resources=self.resources, estimator=self._estimator)
        self.cache: AssignCache = self._rows.cache
        self.view: LoadView = self._rows.view
        self._weights = np.array([args.resource_weights.get(r, 0) for r in self.resources], dtype=np.int64)
        self._targets = np.array(
            [args.scoring_strategy.target_utilization.get(r, 0) for r in self.resources], dtype=np.int64
        )
        self._target_scoring = args.scoring_strategy.type == TARGET_UTILIZATION
        self._weight_list = self._weights.tolist()
        self._target_list = self._targets.tolist()
        self._statuses = (
            *(Status(Code.UNSCHEDULABLE, (REASON_USAGE_EXCEED_THRESHOLD.format(r),)) for r in self.resources),
            *(
                Status(Code.UNSCHEDULABLE, (REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD.format(r),))
                for r in self.resources
            ),
            Status(Code.UNSCHEDULABLE, (REASON_NODE_METRIC_EXPIRED,)),
        )
        """Filter's statuses: per resource over its threshold, the same for aggregated thresholds, expired."""
        self._expired_reason = 2 * width
        self._expiration = args.node_metric_expiration_seconds
        self._check_expired = args.filter_expired_node_metrics
        self._reject_expired = args.filter_expired_node_metrics and not args.enable_schedule_when_node_metrics_expired
        self._last_sign: LastSign | None = None
        self._filter_scores = FilterPassScores()

    @property
    def windows(self) -> EstimationWindows:
        return self._windows

    # ----- events -----

    def on_node_metric(self, event: EventType, old: NodeMetricRecord | None, new: NodeMetricRecord | None) -> None:
        self._rows.on_node_metric(event, old, new)

    def on_pod_update(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        """Watched only when an estimation window is configured (see :meth:`.LoadRows.on_pod_update`)."""
        self._rows.on_pod_update(event, old, new)

    def on_forget_pod(self, pod: Pod) -> None:
        self._rows.drop(pod, pod.node_name)

    def warm_up(self) -> None:
        """The first sync (every node holding pods reconciled, every row written to the arrays) at start,
        not in the first cycle: about 10 ms at 1,000 nodes, 20 ms at 5,000, off the first pod's latency."""
        self._rows.sync()
        self.view.flush()

    # ----- the per-cycle step -----

    def prepare_cycle(self, snapshot: ClusterSnapshot) -> None:
        """Bring the rows in line with ``snapshot`` (the one the plugin was built with) before PreFilter:
        pods bound by others or deleted, node changes, ``raw-allocatable`` annotations, and (at most once
        per second) rows whose metric went stale are touched, so that the runtime's per-node result cache
        recomputes them (:mod:`.rows`). The runtime calls it once per scheduling cycle, first.

        Filter, Score and :meth:`sign_pod` only read the rows as this step left them (and as Reserve and
        Unreserve moved them): changes to the snapshot within a cycle, such as a preemption dry run
        taking pods off a node, do not reach the rows, as Koordinator's estimates come from its own
        assign cache, not from the node's pods. Callers outside the runtime call this step first."""
        if snapshot is not self._snapshot:
            raise ValueError(f"{NAME}: prepare_cycle got another snapshot than the one the plugin was built with")
        self._rows.sync()

    # ----- per-node result cache -----

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answers depend on besides the node's row (framework.node_cache).

        The runtime asks again for Score in the same cycle: for the same pod object with the snapshot
        unchanged since, the answer is the same. A query: it changes nothing the cache reads."""
        last = self._last_sign
        if last is not None and last.pod is pod and last.version == self._snapshot.version:
            return last.sign
        sign = self._estimator.estimate(pod).sign
        self._last_sign = LastSign(pod, self._snapshot.version, sign)
        return sign

    # ----- Filter -----

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        """One node (the runtime's form for the few nodes a cached cycle recomputes): the same answer
        as :meth:`filter_nodes` for that node, from the row's plain values."""
        rows = self._rows
        incoming = self._incoming(state, pod)
        if incoming.daemonset:
            return SUCCESS
        pos = node_info.position
        record = self.view.records[pos]
        if record is None:
            return SUCCESS
        kind = PROD if incoming.prod else NON_PROD
        fresh = self._clock() - record.update_time < self._expiration
        on, aggregated, thresholds, base = record.filter[kind]
        if not self._target_scoring and fresh and on and record.has_info:
            allocatable = rows.allocatable_row(self._snapshot, pos)
            failed, score = scoring.row_failure_and_least_used(
                base,
                record.score_base[kind],
                incoming.estimate,
                allocatable,
                thresholds,
                weights=self._weight_list,
                dominant_weight=self.args.dominant_resource_weight,
            )
            self._keep_score(incoming, pos, score)
        else:
            if self._check_expired and not fresh:
                return self._statuses[self._expired_reason] if self._reject_expired else SUCCESS
            if not (on and record.has_info):
                return SUCCESS
            allocatable = rows.allocatable_row(self._snapshot, pos)
            failed = scoring.row_first_failure(base, incoming.estimate, allocatable, thresholds)
        if failed < 0:
            return SUCCESS
        return self._statuses[failed + self._width * aggregated]

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        rows = self._rows
        incoming = self._incoming(state, pod)
        n = len(positions)
        if incoming.daemonset:
            return NodeFilterResult.all_pass(n)
        view = self.view
        view.flush()
        has = view.has_metric[positions]
        if not has.any():
            return NodeFilterResult.all_pass(n)
        kind = PROD if incoming.prod else NON_PROD
        checked = has & view.has_info[positions] & view.filter_on[kind][positions]
        reject_expired = None
        if self._check_expired:
            fresh = rows.fresh(positions)
            if self._reject_expired:
                reject_expired = has & ~fresh
            checked &= fresh
        passed = np.ones(n, dtype=np.bool_)
        reason_ids = np.zeros(n, dtype=np.int64)
        checked_rows = np.flatnonzero(checked)
        if len(checked_rows):
            idx = positions[checked_rows]
            used = view.filter_base[kind][idx] + incoming.vector
            failures = scoring.threshold_failures(
                used, rows.allocatable(snapshot, idx), view.filter_thresholds[kind][idx]
            )
            failed, first = scoring.first_failed_resource(failures)
            reason_ids[checked_rows] = first + self._width * view.filter_aggregated[kind][idx]
            passed[checked_rows[failed]] = False
        if reject_expired is not None and reject_expired.any():
            passed[reject_expired] = False
            reason_ids[reject_expired] = self._expired_reason
        return NodeFilterResult(passed, reason_ids, self._statuses)

    # ----- Score -----

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        """One node: the same answer as :meth:`score_nodes` for that node (kept from this cycle's
        per-node Filter when it computed it)."""
        rows = self._rows
        incoming = self._incoming(state, pod)
        pos = node_info.position
        kept = self._filter_scores
        if kept.incoming is incoming and kept.version == self._snapshot.version:
            score = kept.by_position.pop(pos, None)
            if score is not None:
                return score
        record = self.view.records[pos]
        if record is None or not record.has_info or not self._clock() - record.update_time < self._expiration:
            return 0
        kind = PROD if incoming.prod else NON_PROD
        return self._row_score(record, kind, incoming.estimate, rows.allocatable_row(self._snapshot, pos))

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        rows = self._rows
        incoming = self._incoming(state, pod)
        out = np.zeros(len(positions), dtype=np.int64)
        view = self.view
        view.flush()
        scored = view.has_metric[positions] & view.has_info[positions]
        if not scored.any():
            return out
        scored &= rows.fresh(positions)
        scored_rows = np.flatnonzero(scored)
        if not len(scored_rows):
            return out
        idx = positions[scored_rows]
        kind = PROD if incoming.prod else NON_PROD
        used = view.score_base[kind][idx] + incoming.vector
        allocatable = rows.allocatable(snapshot, idx)
        if self._target_scoring:
            per_resource = scoring.target_utilization_scores(used, allocatable, self._targets)
        else:
            per_resource = scoring.least_used_scores(used, allocatable)
        out[scored_rows] = scoring.combine(per_resource, self._weights, self.args.dominant_resource_weight)
        return out

    def score_extensions(self) -> None:
        return None

    def _row_score(self, record: RowRecord, kind: int, estimate: tuple[int, ...], allocatable: list[int]) -> int:
        return scoring.row_score(
            record.score_base[kind],
            estimate,
            allocatable,
            self._weight_list,
            dominant_weight=self.args.dominant_resource_weight,
            targets=self._target_list if self._target_scoring else None,
        )

    def _keep_score(self, incoming: IncomingPod, pos: int, score: int) -> None:
        kept = self._filter_scores
        version = self._snapshot.version
        if kept.incoming is not incoming or kept.version != version:
            kept.incoming = incoming
            kept.version = version
            kept.by_position.clear()
        kept.by_position[pos] = score

    # ----- Reserve -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if pod.is_terminal or is_reserve_pod(pod):
            return SUCCESS
        self._rows.place(node_name, self._estimator.placed(pod, self._clock()))
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self._rows.drop(pod, node_name)

    # ----- queue -----

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE_METRIC, ActionType.ADD | ActionType.UPDATE | ActionType.DELETE),
                _queue,
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), _queue),
        )

    # ----- simulate -----

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        """Per node: NodeMetric freshness, reported usage and the estimate Filter/Score use, next to
        requests (:mod:`.report`)."""
        return node_load_report(self._snapshot, self.cache, resources=self.resources, args=self.args, now=self._clock())

    def api_routes(self) -> Sequence[ApiRoute]:
        """``/apis/v1/plugins/LoadAwareScheduling/node/:nodeName`` (:mod:`.service`)."""
        return service.routes(self)

    # ----- internals -----

    def _incoming(self, state: CycleState, pod: Pod) -> IncomingPod:
        last = self._estimator.last
        if last is not None and last.pod is pod:  # sign_pod estimated this very pod object
            return last.incoming
        cached = state.get(INCOMING_KEY)
        if cached is not None:
            return cached
        incoming = self._estimator.estimate(pod)
        state.write(INCOMING_KEY, incoming)
        return incoming


def _queue(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    return QueueingHint.QUEUE


def new(args: LoadAwareSchedulingArgs | None, handle: Handle) -> LoadAwareScheduling:
    plugin = LoadAwareScheduling(args or LoadAwareSchedulingArgs(), handle.snapshot, handle.clock)
    handle.watch(NODE_METRIC_KIND, plugin.on_node_metric)
    if plugin.windows.may_need_pod_updates:
        handle.watch_pods(plugin.on_pod_update)
    handle.register_forget_pod_handler(plugin.on_forget_pod)
    handle.add_simulation_report(plugin.simulation_report)
    return plugin


def declared_capabilities(
    plugin: LoadAwareScheduling,
) -> tuple[
    FilterPlugin,
    BatchFilterPlugin,
    ScorePlugin,
    BatchScorePlugin,
    ReservePlugin,
    EnqueueExtensions,
    SignedPlugin,
    CyclePreparer,
    WarmUpPlugin,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin


_services: type[APIServiceProvider] = LoadAwareScheduling
"""The ``/apis/v1`` routes (not one of the framework's extension points, so not in the list above)."""
