"""LoadAwareScheduling: place pods by how busy nodes really are (NodeMetric), not only by requests.

Koordinator ``pkg/scheduler/plugins/loadaware`` (``scheduler-anchors`` §4). Filter rejects a node when
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
Unreserve or when forgotten. Pods bound by others or deleted are picked up from the snapshot: at the
start of a cycle, nodes whose pod count changed since the plugin last looked are reconciled (one
vectorised comparison per cycle; a per-node loop only over the changed nodes). Such pods take their
PodScheduled transition (else creation time) as assignment time (unknown → estimated only while missing
from ``podsMetric``). ``estimatedSecondsAfterPodScheduled`` / ``estimatedSecondsAfterInitialized`` (and the
pod annotations with ``allowCustomizeEstimation``) set a forced-estimation deadline (:mod:`.timing`); with
either configured the plugin also follows pod condition changes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from apis.config.loadaware_args import TARGET_UTILIZATION, LoadAwareSchedulingArgs
from apis.core.quantity import format_quantity
from apis.core.types import CPU, MEMORY, PODS, Node, Pod
from apis.extension import LABEL_POD_PRIORITY_CLASS, LABEL_POD_QOS, PriorityClass
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    ReservePlugin,
    SignedPlugin,
    WarmUpPlugin,
)
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, Positions
from koord_scheduler.framework.status import SUCCESS, Code, Status
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    EventType,
    NodeFilterResult,
    ObjectKind,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.loadaware import scoring
from koord_scheduler.plugins.loadaware.assign_cache import AssignCache, AssignedPod, NodeLoad
from koord_scheduler.plugins.loadaware.estimator import (
    ANNOTATION_ESTIMATED_SCALING_FACTORS,
    estimate_pod,
    is_daemonset_pod,
    is_reserve_pod,
    pod_priority_class,
)
from koord_scheduler.plugins.loadaware.metrics_view import (
    ANNOTATION_CUSTOM_USAGE_THRESHOLDS,
    NON_PROD,
    PROD,
    LoadView,
    RowRecord,
    ScorePaths,
    ThresholdProfile,
    args_profile,
    node_profile,
)
from koord_scheduler.plugins.loadaware.nodemetric import NODE_METRIC_KIND, NodeMetricRecord
from koord_scheduler.plugins.loadaware.raw_allocatable import ANNOTATION_RAW_ALLOCATABLE, raw_allocatable_row
from koord_scheduler.plugins.loadaware.timing import EstimationWindows, assign_time, estimation_deadline

NAME = names.LOAD_AWARE_SCHEDULING
ARGS = LoadAwareSchedulingArgs

REASON_NODE_METRIC_EXPIRED = "node(s) nodeMetric expired"
REASON_USAGE_EXCEED_THRESHOLD = "node(s) {} usage exceed threshold"
REASON_AGGREGATED_USAGE_EXCEED_THRESHOLD = "node(s) {} aggregated usage exceed threshold"

FEW_NODES = 64
"""Up to this many nodes, Filter and Score run in plain Python: numpy's per-call overhead, and flushing
the rows Reserve rewrote into the arrays, cost more below that (the runtime's node cache asks for the
nodes changed since the last cycle: usually one or two, a few dozen after a burst of bindings)."""

SimulationReporter = Callable[[], tuple[str, list[dict[str, Any]]]]


class LoadAwareHandle(Protocol):
    """The services this plugin uses (a subset of the scheduler's handle)."""

    @property
    def snapshot(self) -> ClusterSnapshot: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    def watch(self, kind: ObjectKind, handler: Callable[[EventType, Any, Any], None]) -> None: ...

    def watch_pods(self, handler: Callable[[EventType, Any, Any], None]) -> None: ...

    def register_forget_pod_handler(self, handler: Callable[[Pod], None]) -> None: ...

    def add_simulation_report(self, reporter: SimulationReporter) -> None: ...


@dataclass(frozen=True, slots=True)
class IncomingPod:
    """The pod being scheduled, estimated once per cycle (Koordinator's
    ``IncomingPodEstimatedLoadAwareScheduling`` state)."""

    estimate: tuple[int, ...]
    vector: IntArray
    prod: bool
    daemonset: bool
    sign: Hashable
    """What :meth:`LoadAwareScheduling.sign_pod` returns: (estimate, prod, daemonset)."""


INCOMING_KEY: StateKey[IncomingPod] = StateKey("IncomingPodEstimated" + NAME)


def vectorized_resources(args: LoadAwareSchedulingArgs) -> tuple[str, ...]:
    """Koordinator's vectorizer: the sorted union of cpu, memory and every resource the args name."""
    names_: set[str] = {CPU, MEMORY}
    names_.update(args.usage_thresholds, args.prod_usage_thresholds, args.resource_weights)
    names_.update(args.estimated_scaling_factors, args.supported_resources)
    names_.update(args.scoring_strategy.target_utilization)
    if args.aggregated is not None:
        names_.update(args.aggregated.usage_thresholds)
    return tuple(sorted(names_))


class LoadAwareScheduling:
    """Filter (batch), Score (batch), Reserve/Unreserve and queue events. See the module docstring."""

    name = NAME

    def __init__(self, args: LoadAwareSchedulingArgs, snapshot: ClusterSnapshot, clock: Callable[[], float]) -> None:
        self.args = args
        self._snapshot = snapshot
        self._clock = clock
        self.resources = vectorized_resources(args)
        width = len(self.resources)
        self.cache = AssignCache(self.resources, prod_usage_include_sys=args.prod_usage_include_sys)
        self.view = LoadView(self.resources, snapshot.capacity)
        self._known_pods: list[int] = [-1] * snapshot.capacity
        """Per position, the snapshot's pod count when the plugin last agreed with it (-1: never)."""
        self._recheck: set[int] = set()
        """Positions whose ``_known_pods`` Reserve/Unreserve moved (compared at the next pod sync even if
        the snapshot did not touch them)."""
        self._synced_version = -1
        """``snapshot.version`` after the last :meth:`_sync` (nothing to do while it is unchanged; -1:
        compare every position)."""
        self._nodes_generation = -1
        self._rows: dict[str, int] = {}
        self._row_owner: dict[int, str] = {}
        self._profile = args_profile(args, self.resources)
        self._node_profiles: dict[str, ThresholdProfile] = {}
        agg = args.aggregated
        self._score_paths = ScorePaths(
            agg.score_aggregation_type if agg is not None else "",
            float(agg.score_aggregated_duration) if agg is not None else 0.0,
            args.score_according_prod_usage,
        )
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
        self._expired_reason = 2 * width
        self._last_estimate: tuple[Pod, IncomingPod] | None = None
        self._last_sign: tuple[Pod, int, Hashable] | None = None
        """(pod, ``snapshot.version`` after the sync, signature) of the last :meth:`sign_pod`."""
        self._few_scores: tuple[list[int], int, IncomingPod, list[int]] | None = None
        """(positions, ``snapshot.version``, incoming estimate, scores) from the last :meth:`_filter_few`."""
        self._estimates: dict[Hashable, IncomingPod] = {}
        """Estimates by :meth:`_estimate_key` (bounded; cleared when full)."""
        self._pods_generation = -1
        self._fresh_checked_at = float("-inf")
        self._fresh_seen = np.zeros(snapshot.capacity, dtype=np.bool_)
        """Per position, whether the row was fresh when the plugin last looked (to touch rows that expire)."""
        self._windows = EstimationWindows(
            float(args.estimated_seconds_after_pod_scheduled or 0) or None,
            float(args.estimated_seconds_after_initialized or 0) or None,
            args.allow_customize_estimation,
        )
        self._customize = args.allow_customize_estimation
        self._deadlines = self._windows.may_need_pod_updates
        self._expiration = args.node_metric_expiration_seconds
        self._reject_expired = args.filter_expired_node_metrics and not args.enable_schedule_when_node_metrics_expired
        self._width = width
        self._raw_allocatable: dict[int, tuple[Node, list[int]]] = {}
        """Per position of a node annotated ``node.koordinator.sh/raw-allocatable``: the node object and its
        allocatable over ``resources`` with the annotation's values in place (:mod:`.raw_allocatable`)."""
        self._raw_version = -1
        """``snapshot.version`` when the annotations were last looked at."""
        self._raw_node_objects = -1
        """``snapshot.node_objects_version`` then (nothing to look at while no node object changed)."""
        self._allocatable_rows: list[tuple[Node | None, list[int]] | None] = [None] * snapshot.capacity
        """Per position: (node object, its allocatable over ``resources``) for the few-nodes paths."""

    @property
    def windows(self) -> EstimationWindows:
        return self._windows

    # ----- events -----

    def on_node_metric(self, event: EventType, old: NodeMetricRecord | None, new: NodeMetricRecord | None) -> None:
        if event == EventType.DELETED or new is None:
            if old is not None:
                self.cache.delete_metric(old.name)
                self._write(old.name)
            return
        self.cache.set_metric(new)
        self._write(new.name)

    def on_forget_pod(self, pod: Pod) -> None:
        self._drop(pod, pod.node_name)

    def warm_up(self) -> None:
        """The first sync (every node holding pods reconciled, every row written to the arrays) at start,
        not in the first cycle: about 10 ms at 1,000 nodes, 20 ms at 5,000, off the first pod's latency."""
        self._sync()
        self.view.flush()

    # ----- per-node result cache -----

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answers depend on besides the node's row (framework.node_cache).

        Called before the runtime decides which nodes changed, so it also brings the rows up to date:
        rows this plugin rewrites, and rows whose metric went stale since the last cycle, are touched.
        The runtime asks again for Score in the same cycle: for the same pod object with the snapshot
        unchanged since, the answer is the same (the once-a-second staleness check waits for the next
        cycle).
        """
        last = self._last_sign
        if last is not None and last[0] is pod and last[1] == self._snapshot.version:
            return last[2]
        self._sync()
        sign = self._estimate(pod).sign
        self._last_sign = (pod, self._snapshot.version, sign)
        return sign

    # ----- Filter -----

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        if self._snapshot.version != self._synced_version:
            self._sync()  # (freshness touches matter only to per-node caches: sign_pod does them)
        incoming = self._incoming(state, pod)
        n = len(positions)
        if incoming.daemonset:
            return NodeFilterResult.all_pass(n)
        if n <= FEW_NODES:
            return self._filter_few(incoming, snapshot, positions)
        view = self.view
        view.flush()
        has = view.has_metric[positions]
        if not has.any():
            return NodeFilterResult.all_pass(n)
        kind = PROD if incoming.prod else NON_PROD
        checked = has & view.has_info[positions] & view.filter_on[kind][positions]
        reject_expired = None
        if self.args.filter_expired_node_metrics:
            fresh = self._fresh(positions)
            if not self.args.enable_schedule_when_node_metrics_expired:
                reject_expired = has & ~fresh
            checked &= fresh
        passed = np.ones(n, dtype=np.bool_)
        reason_ids = np.zeros(n, dtype=np.int64)
        rows = np.flatnonzero(checked)
        if len(rows):
            idx = positions[rows]
            used = view.filter_base[kind][idx] + incoming.vector
            failures = scoring.threshold_failures(
                used, self._allocatable(snapshot, idx), view.filter_thresholds[kind][idx]
            )
            failed, first = scoring.first_failed_resource(failures)
            reason_ids[rows] = first + len(self.resources) * view.filter_aggregated[kind][idx]
            passed[rows[failed]] = False
        if reject_expired is not None and reject_expired.any():
            passed[reject_expired] = False
            reason_ids[reject_expired] = self._expired_reason
        return NodeFilterResult(passed, reason_ids, self._statuses)

    # ----- Score -----

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        if self._snapshot.version != self._synced_version:
            self._sync()
        incoming = self._incoming(state, pod)
        n = len(positions)
        if n <= FEW_NODES:
            return self._score_few(incoming, snapshot, positions)
        out = np.zeros(n, dtype=np.int64)
        view = self.view
        view.flush()
        scored = view.has_metric[positions] & view.has_info[positions]
        if not scored.any():
            return out
        scored &= self._fresh(positions)
        rows = np.flatnonzero(scored)
        if not len(rows):
            return out
        idx = positions[rows]
        kind = PROD if incoming.prod else NON_PROD
        used = view.score_base[kind][idx] + incoming.vector
        allocatable = self._allocatable(snapshot, idx)
        if self._target_scoring:
            per_resource = scoring.target_utilization_scores(used, allocatable, self._targets)
        else:
            per_resource = scoring.least_used_scores(used, allocatable)
        out[rows] = scoring.combine(per_resource, self._weights, self.args.dominant_resource_weight)
        return out

    def _filter_few(self, incoming: IncomingPod, snapshot: ClusterSnapshot, positions: Positions) -> NodeFilterResult:
        """:meth:`filter_nodes` for a handful of nodes, in plain Python (same answers). The nodes' scores
        are computed on the way and kept for this cycle's Score (:meth:`_score_few`): both read the
        same rows, which a cycle usually touches only here (the node the last pod went to)."""
        failures: list[tuple[int, int]] | None = None
        records = self.view.records
        kind = PROD if incoming.prod else NON_PROD
        estimate = incoming.estimate
        check_expired = self.args.filter_expired_node_metrics
        expiration = self._expiration
        now = self._clock()
        listed: list[int] = positions.tolist()
        scores = [0] * len(listed)
        fused = not self._target_scoring
        for i, pos in enumerate(listed):
            record = records[pos]
            if record is None:
                continue
            fresh = now - record.update_time < expiration
            allocatable = self._allocatable_row(snapshot, pos)
            on, aggregated, thresholds, base = record.filter[kind]
            if fused and fresh and on and record.has_info:
                failed, scores[i] = scoring.row_failure_and_least_used(
                    base, record.score_base[kind], estimate, allocatable, thresholds,
                    weights=self._weight_list, dominant_weight=self.args.dominant_resource_weight,
                )
            else:
                if fresh and record.has_info:
                    scores[i] = self._row_score(record, kind, estimate, allocatable)
                if check_expired and not fresh:
                    if self._reject_expired:
                        failures = failures or []
                        failures.append((i, self._expired_reason))
                    continue
                if not (on and record.has_info):
                    continue
                failed = scoring.row_first_failure(base, estimate, allocatable, thresholds)
            if failed >= 0:
                failures = failures or []
                failures.append((i, failed + self._width * aggregated))
        self._few_scores = (listed, self._snapshot.version, incoming, scores)
        if failures is None:
            return NodeFilterResult.all_pass(len(listed))
        passed = np.ones(len(listed), dtype=np.bool_)
        reason_ids = np.zeros(len(listed), dtype=np.int64)
        for i, reason in failures:
            passed[i] = False
            reason_ids[i] = reason
        return NodeFilterResult(passed, reason_ids, self._statuses)

    def _score_few(self, incoming: IncomingPod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        """:meth:`score_nodes` for a handful of nodes: the scores :meth:`_filter_few` computed for the same
        nodes, pod estimate and snapshot version (used once), else computed here."""
        listed: list[int] = positions.tolist()
        memo, self._few_scores = self._few_scores, None
        if memo is not None and memo[2] is incoming and memo[1] == self._snapshot.version and memo[0] == listed:
            return np.array(memo[3], dtype=np.int64)
        records = self.view.records
        kind = PROD if incoming.prod else NON_PROD
        estimate = incoming.estimate
        now = self._clock()
        expiration = self._expiration
        out = []
        for pos in listed:
            record = records[pos]
            if record is None or not record.has_info or not now - record.update_time < expiration:
                out.append(0)
                continue
            out.append(self._row_score(record, kind, estimate, self._allocatable_row(snapshot, pos)))
        return np.array(out, dtype=np.int64)

    def _row_score(self, record: RowRecord, kind: int, estimate: tuple[int, ...], allocatable: list[int]) -> int:
        return scoring.row_score(
            record.score_base[kind],
            estimate,
            allocatable,
            self._weight_list,
            dominant_weight=self.args.dominant_resource_weight,
            targets=self._target_list if self._target_scoring else None,
        )

    def _allocatable_row(self, snapshot: ClusterSnapshot, pos: int) -> list[int]:
        """The node's allocatable over ``resources`` (what ``snapshot.allocatable`` holds for it: the
        node object's allocatable, ``pods`` excluded, zeros once the node is gone), cached per node object."""
        info = snapshot.infos[pos]
        node = info.node if info is not None else None
        rows = self._allocatable_rows
        if pos >= len(rows):
            rows.extend([None] * (pos + 1 - len(rows)))
        cached = rows[pos]
        if cached is not None and cached[0] is node:
            return cached[1]
        if node is None or not snapshot.valid[pos]:
            row = [0] * self._width
        else:
            raw = self._raw_allocatable.get(pos)
            if raw is not None and raw[0] is node:
                row = raw[1]
            else:
                allocatable = node.allocatable
                row = [allocatable.get(r, 0) if r != PODS else 0 for r in self.resources]
        rows[pos] = (node, row)
        return row

    def score_extensions(self) -> None:
        return None

    # ----- Reserve -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if pod.is_terminal or is_reserve_pod(pod):
            return SUCCESS
        incoming = self._estimate(pod)  # (the same for the assumed copy as for the pod Filter saw)
        now = self._clock()
        deadline = estimation_deadline(pod, now, self._windows) if self._deadlines else None
        assigned = AssignedPod(pod.key, incoming.estimate, incoming.prod, now, deadline)
        snap = self._snapshot
        pos = snap.positions.get(node_name)
        load = self.cache.get(node_name)
        metric = load.metric if load is not None else None
        # The common case: a pod new to the node and missing from its podsMetric adds exactly its
        # estimate to node_delta, and the node's row (already written at ``pos``) takes it in place.
        unreported = (
            load is not None and metric is not None and pod.key not in load.pods and pod.key not in metric.pods
        )
        if unreported:
            assert load is not None
            self.cache.assign_unreported(load, assigned)
        else:
            self.cache.assign(node_name, assigned)
        if pos is None:
            self._write(node_name)
            return SUCCESS
        known = self._known_pods
        if pos < len(known) and known[pos] >= 0:
            known[pos] += 1  # the assume that preceded Reserve
            if snap.only_pod_change_since(self._pods_generation) == pos:
                # That assume is the only pod change since the last sync (which left every count in
                # agreement): the counts agree again, and the next sync has no pods to look at.
                self._pods_generation = snap.pods_generation
            else:
                self._recheck.add(pos)
        if unreported and self._rows.get(node_name) == pos and self.view.add_to_base(pos, incoming.estimate):
            snap.touch(pos)
        else:
            self._write(node_name)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self._drop(pod, node_name)

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
        requests (percent of allocatable)."""
        snap = self._snapshot
        now = self._clock()
        rows: list[dict[str, Any]] = []
        for info in sorted(snap.iter_nodes(), key=lambda i: i.name):
            pos = info.position
            load = self.cache.get(info.name)
            metric = load.metric if load is not None else None
            row: dict[str, Any] = {"node": info.name, "nodeMetric": _freshness(metric, now, self.args)}
            for resource in (CPU, MEMORY):
                col = snap.column(resource)
                allocatable = int(snap.allocatable[pos, col]) if col is not None else 0
                requested = int(snap.requested[pos, col]) if col is not None else 0
                row[f"{resource} requested"] = _amount(resource, requested, allocatable)
                if metric is None or load is None:
                    row[f"{resource} usage"] = "-"
                    row[f"{resource} estimated"] = "-"
                    continue
                i = self.resources.index(resource)
                usage = load.node_usage[i]
                row[f"{resource} usage"] = _amount(resource, usage, allocatable)
                row[f"{resource} estimated"] = _amount(resource, usage + load.node_delta[i], allocatable)
            row["pods estimated"] = len(load.delta_pods) if load is not None and metric is not None else 0
            rows.append(row)
        return "Node load (LoadAwareScheduling; estimated = usage + pods not yet reported)", rows

    # ----- internals -----

    def _incoming(self, state: CycleState, pod: Pod) -> IncomingPod:
        last = self._last_estimate
        if last is not None and last[0] is pod:  # sign_pod estimated this very pod object
            return last[1]
        cached = state.get(INCOMING_KEY)
        if cached is not None:
            return cached
        incoming = self._estimate(pod)
        state.write(INCOMING_KEY, incoming)
        return incoming

    def _estimate(self, pod: Pod) -> IncomingPod:
        """The pod's estimate, memoised for the last pod (the same object, or a copy of it with other
        fields changed, such as the assumed pod Reserve gets) and by :meth:`_estimate_key`."""
        last = self._last_estimate
        if last is not None:
            prev = last[0]
            if prev is pod or (
                prev.meta is pod.meta
                and prev.requests is pod.requests
                and prev.limits is pod.limits
                and prev.priority == pod.priority
                and prev.qos_class == pod.qos_class
            ):
                return last[1]
        key: tuple[object, ...] | None = self._estimate_key(pod)
        try:
            incoming = self._estimates.get(key)
        except TypeError:  # an unhashable field: estimate afresh
            key, incoming = None, None
        if incoming is None:
            estimate = estimate_pod(
                pod,
                self.resources,
                self.args.estimated_scaling_factors,
                allow_customize=self.args.allow_customize_estimation,
            )
            prod = pod_priority_class(pod) is PriorityClass.PROD
            daemonset = is_daemonset_pod(pod)
            incoming = IncomingPod(
                estimate, np.array(estimate, dtype=np.int64), prod, daemonset, (estimate, prod, daemonset)
            )
            if key is not None:
                if len(self._estimates) >= 1024:
                    self._estimates.clear()
                self._estimates[key] = incoming
        self._last_estimate = (pod, incoming)
        return incoming

    def _estimate_key(self, pod: Pod) -> tuple[object, ...]:
        """Everything :func:`estimate_pod`, :func:`pod_priority_class` and :func:`is_daemonset_pod` read
        (pods of one template share the key). It may not be hashable: :meth:`_estimate` then estimates
        afresh."""
        meta = pod.meta
        labels = meta.labels
        limits = pod.limits
        return (
            pod.requests,  # hashed by the runtime's node cache anyway (FrozenDict caches its hash)
            tuple(limits.items()) if limits else (),
            pod.priority,
            pod.qos_class,
            labels.get(LABEL_POD_PRIORITY_CLASS),
            labels.get(LABEL_POD_QOS),
            meta.annotations.get(ANNOTATION_ESTIMATED_SCALING_FACTORS) if self._customize else None,
            is_daemonset_pod(pod),
        )

    def _assigned(self, pod: Pod) -> AssignedPod:
        """A pod found on a node (not placed by this scheduler): assigned at its PodScheduled transition
        (:mod:`.timing`; its creation time when it has none)."""
        incoming = self._estimate(pod)
        timestamp = assign_time(pod, pod.meta.creation_timestamp)
        windows = self._windows
        deadline = estimation_deadline(pod, timestamp, windows) if windows.may_need_pod_updates else None
        return AssignedPod(pod.key, incoming.estimate, incoming.prod, timestamp, deadline)

    def on_pod_update(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        """A bound pod's PodScheduled/Initialized transition moves its assign time and forced-estimation
        deadline (Koordinator re-assigns on condition changes). Watched only when a window is configured."""
        if event != EventType.MODIFIED or old is None or new is None or not new.node_name:
            return
        if old.condition_times == new.condition_times and old.conditions == new.conditions:
            return
        load = self.cache.get(new.node_name)
        current = load.pods.get(new.key) if load is not None else None
        if current is None:
            return
        timestamp = assign_time(new, current.timestamp)
        deadline = estimation_deadline(new, timestamp, self._windows)
        if (timestamp, deadline) != (current.timestamp, current.deadline):
            self.cache.assign(new.node_name, current._replace(timestamp=timestamp, deadline=deadline))
            self._write(new.node_name)

    def _drop(self, pod: Pod, node_name: str) -> None:
        if not node_name or not self.cache.unassign(node_name, pod.key):
            return
        pos = self._snapshot.positions.get(node_name)
        known = self._known_pods
        if pos is not None and pos < len(known) and known[pos] > 0:
            known[pos] -= 1  # the snapshot drops (or has dropped) the pod too
            self._recheck.add(pos)
        self._write(node_name)

    def _fresh(self, positions: Positions) -> np.ndarray:
        self.view.flush()
        # NaN update times (absent) compare False: expired.
        age = self._clock() - self.view.update_time[positions]
        fresh: np.ndarray = age < self.args.node_metric_expiration_seconds
        return fresh

    def _allocatable(self, snapshot: ClusterSnapshot, idx: Positions) -> IntArray:
        out = np.zeros((len(idx), len(self.resources)), dtype=np.int64)
        rows = np.take(snapshot.allocatable, idx, axis=0)
        for i, resource in enumerate(self.resources):
            col = snapshot.column(resource)
            if col is not None:
                out[:, i] = rows[:, col]
        if self._raw_allocatable:
            overridden = np.fromiter(self._raw_allocatable, dtype=np.intp, count=len(self._raw_allocatable))
            for i in np.flatnonzero(np.isin(idx, overridden)).tolist():
                out[i] = self._raw_allocatable[int(idx[i])][1]
        return out

    def _sync_raw_allocatable(self, cap: int) -> None:
        """Track the nodes whose ``raw-allocatable`` annotation overrides their allocatable: only positions
        the snapshot touched since the last look (all of them when its change log no longer reaches)."""
        snap = self._snapshot
        changed = snap.changed_since(self._raw_version) if self._raw_version >= 0 else None
        positions = range(cap) if changed is None else changed.tolist()
        infos, valid = snap.infos, snap.valid
        for pos in positions:
            info = infos[pos] if pos < cap else None
            node = info.node if info is not None and valid[pos] else None
            raw = node.annotations.get(ANNOTATION_RAW_ALLOCATABLE) if node is not None else None
            if node is None or not raw:
                self._raw_allocatable.pop(pos, None)
                continue
            current = self._raw_allocatable.get(pos)
            if current is not None and current[0] is node:
                continue
            allocatable = node.allocatable
            base = [allocatable.get(r, 0) if r != PODS else 0 for r in self.resources]
            row = raw_allocatable_row(raw, self.resources, base)
            if row == base:
                self._raw_allocatable.pop(pos, None)
            else:
                self._raw_allocatable[pos] = (node, row)
        self._raw_version = snap.version
        self._raw_node_objects = snap.node_objects_version

    def _sync(self) -> None:
        """Bring rows in line with the snapshot: positions after node changes, pods after pod changes,
        and (at most once per second of clock time) touch rows whose metric went stale.

        Called several times per cycle; while ``snapshot.version`` has not moved it is two comparisons."""
        snap = self._snapshot
        now = self._clock()
        fresh_due = not (0.0 <= now - self._fresh_checked_at < 1.0)
        if not fresh_due and snap.version == self._synced_version:
            return
        cap = snap.capacity
        if cap > self.view.capacity:
            self.view.ensure_capacity(cap)
        known = self._known_pods
        if cap > len(known):
            known.extend([-1] * (cap - len(known)))
            self._fresh_seen = np.concatenate([self._fresh_seen, np.zeros(cap - len(self._fresh_seen), bool)])
        if snap.nodes_generation != self._nodes_generation:
            self._nodes_generation = snap.nodes_generation
            self._remap()
        if snap.pods_generation != self._pods_generation:
            mismatched = self._pod_count_mismatches(cap)
            self._pods_generation = snap.pods_generation
            for pos in mismatched:
                self._reconcile(pos)
        if snap.node_objects_version != self._raw_node_objects:
            self._sync_raw_allocatable(cap)
        if fresh_due:
            self._fresh_checked_at = now
            self.view.flush()
            fresh = (now - self.view.update_time[:cap]) < self.args.node_metric_expiration_seconds
            for pos in np.flatnonzero(fresh != self._fresh_seen[:cap]).tolist():
                snap.touch(pos)
            self._fresh_seen[:cap] = fresh
        self._synced_version = snap.version

    def _pod_count_mismatches(self, cap: int) -> list[int]:
        """Positions whose snapshot pod count differs from the plugin's, in ascending order.

        Only positions where the snapshot added or removed a pod since the last look (its pod log) can
        have moved, and those whose count Reserve/Unreserve moved (``_recheck``). When the log no longer
        reaches back that far, every position is compared (one vectorised comparison)."""
        snap = self._snapshot
        known = self._known_pods
        counts = snap.pod_count
        since = self._pods_generation
        changed = snap.pods_changed_since(since) if since >= 0 else None
        recheck, self._recheck = self._recheck, set()
        if changed is None:
            mismatch = np.array(known[:cap], dtype=np.int64) != counts[:cap]
            if not any(load.pods for load in self.cache):
                # The plugin knows no pod anywhere (its first sync): nodes without pods already agree.
                empty = mismatch & (counts[:cap] == 0)
                for pos in np.flatnonzero(empty).tolist():
                    known[pos] = 0
                mismatch &= ~empty
            mismatched: list[int] = np.flatnonzero(mismatch).tolist()
            return mismatched
        candidates = recheck.union(changed) if recheck else set(changed)
        return sorted(pos for pos in candidates if pos < cap and known[pos] != counts[pos])

    def _remap(self) -> None:
        positions = self._snapshot.positions
        for pos, owner in list(self._row_owner.items()):
            if positions.get(owner) != pos:
                self._clear(pos)
                del self._row_owner[pos]
                self._rows.pop(owner, None)
        self._node_profiles.clear()
        for load in self.cache:
            if load.metric is not None and self._rows.get(load.name) != positions.get(load.name):
                self._write(load.name)

    def _reconcile(self, pos: int) -> None:
        snap = self._snapshot
        self._known_pods[pos] = int(snap.pod_count[pos])
        info = snap.infos[pos]
        if info is None or info.node is None:
            return
        name = info.name
        current = info.pods
        load = self.cache.get(name)
        known = load.pods if load is not None else {}
        changed = False
        for key in [k for k in known if k not in current]:
            changed |= self.cache.unassign(name, key)
        for key, pod in current.items():
            if key not in known and not is_reserve_pod(pod) and not pod.is_terminal:
                self.cache.assign(name, self._assigned(pod))
                changed = True
        if changed:
            self._write(name)

    def _write(self, name: str) -> None:
        """Rewrite the node's row from its load (Reserve updates a row in place instead when it can:
        :meth:`LoadView.add_to_base`)."""
        snap = self._snapshot
        pos = snap.positions.get(name)
        load = self.cache.get(name)
        old = self._rows.get(name)
        if old is not None and old != pos:
            self._clear(old)
            self._row_owner.pop(old, None)
            del self._rows[name]
        if pos is None:
            return
        if load is None or load.metric is None:
            if self._row_owner.get(pos) == name:
                self._clear(pos)
                del self._row_owner[pos]
                self._rows.pop(name, None)
            return
        if pos >= self.view.capacity:
            self.view.ensure_capacity(snap.capacity)
        self.view.write(pos, load, self._node_profile(pos), self._score_paths)
        if old != pos:
            self._rows[name] = pos
            self._row_owner[pos] = name
        snap.touch(pos)  # a position from snapshot.positions is below its capacity

    def _clear(self, pos: int) -> None:
        self.view.clear(pos)
        self._touched(pos)

    def _touched(self, pos: int) -> None:
        if pos < self._snapshot.capacity:
            self._snapshot.touch(pos)

    def _node_profile(self, pos: int) -> ThresholdProfile:
        node = self._snapshot.infos[pos]
        annotation = node.node.annotations.get(ANNOTATION_CUSTOM_USAGE_THRESHOLDS) if node and node.node else None
        if not annotation:
            return self._profile
        profile = self._node_profiles.get(annotation)
        if profile is None:
            if len(self._node_profiles) > 1024:
                self._node_profiles.clear()
            profile = node_profile(self._profile, annotation, self.resources)
            self._node_profiles[annotation] = profile
        return profile

    def node_load(self, name: str) -> NodeLoad | None:
        """The node's metric and pods as the plugin sees them (debugging, tests)."""
        self._sync()
        return self.cache.get(name)


def _queue(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    return QueueingHint.QUEUE


def _amount(resource: str, amount: int, allocatable: int) -> str:
    pct = f" ({100 * amount / allocatable:.0f}%)" if allocatable else ""
    if resource == MEMORY and amount % (1 << 20):
        return f"{amount / (1 << 30):.1f}Gi{pct}"
    return f"{format_quantity(resource, amount)}{pct}"


def _freshness(metric: NodeMetricRecord | None, now: float, args: LoadAwareSchedulingArgs) -> str:
    if metric is None:
        return "missing"
    if metric.update_time is None:
        return "expired (no updateTime)"
    age = now - metric.update_time
    if age >= args.node_metric_expiration_seconds:
        return f"expired ({age:.0f}s old)"
    return f"fresh ({age:.0f}s old)"


def new(args: LoadAwareSchedulingArgs | None, handle: LoadAwareHandle) -> LoadAwareScheduling:
    plugin = LoadAwareScheduling(args or LoadAwareSchedulingArgs(), handle.snapshot, handle.clock)
    handle.watch(NODE_METRIC_KIND, plugin.on_node_metric)
    if plugin.windows.may_need_pod_updates:
        handle.watch_pods(plugin.on_pod_update)
    handle.register_forget_pod_handler(plugin.on_forget_pod)
    handle.add_simulation_report(plugin.simulation_report)
    return plugin


if TYPE_CHECKING:
    _filter: type[BatchFilterPlugin] = LoadAwareScheduling
    _score: type[BatchScorePlugin] = LoadAwareScheduling
    _reserve: type[ReservePlugin] = LoadAwareScheduling
    _signed: type[SignedPlugin] = LoadAwareScheduling
    _warm_up: type[WarmUpPlugin] = LoadAwareScheduling
    _enqueue: type[EnqueueExtensions] = LoadAwareScheduling
