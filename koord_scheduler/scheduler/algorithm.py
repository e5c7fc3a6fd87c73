"""One pod's placement decision: PreFilter → Filter (with node sampling) → Score → select.

This is kube-scheduler's ``schedulePod`` over the batch framework. Filtering runs vectorised over the
whole node list; the sampling rules of ``percentageOfNodesToScore`` are then applied to the result in
rotation order, which is the deterministic model of upstream's parallel scan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis, FailureChunk
from koord_scheduler.framework.handle import NominatedPods
from koord_scheduler.framework.runtime import Framework
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import Code, Status, unresolvable
from koord_scheduler.scheduler.extenders.client import ExtenderError
from koord_scheduler.scheduler.extenders.phase import Extenders

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES_AVAILABLE = "no nodes available to schedule pods"


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind`` (0 or None means adaptive)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct >= 100:
        return num_all_nodes
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        pct = max(pct, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(slots=True)
class ScheduleResult:
    node_name: str
    evaluated_nodes: int
    feasible_nodes: int
    pod: Pod
    """The pod as the transformers left it (what Reserve and binding use)."""


class FitError(Exception):
    """No node fits; ``diagnosis`` says why."""

    def __init__(self, pod: Pod, diagnosis: Diagnosis) -> None:
        self.pod = pod
        self.diagnosis = diagnosis
        super().__init__("pod does not fit on any node")


class NoNodesError(Exception):
    pass


@dataclass(slots=True)
class Sampler:
    """The rotating start index shared by all pods of one scheduler."""

    next_start_index: int = 0


def schedule_pod(
    fwk: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: ClusterSnapshot,
    sampler: Sampler,
    *,
    nominator: NominatedPods | None = None,
    extenders: Extenders | None = None,
) -> ScheduleResult:
    """Choose a node or raise :class:`FitError` / :class:`NoNodesError` /
    :class:`~koord_scheduler.framework.runtime.PluginCycleError` /
    :class:`~koord_scheduler.scheduler.extenders.ExtenderError` (a non-ignorable extender failed). Pods in
    ``nominator`` with a priority >= the pod's are counted on their nominated nodes. ``extenders`` filter
    after the Filter plugins and add their scores after the Score plugins."""
    num_all = snapshot.num_nodes
    if num_all == 0:
        raise NoNodesError(NO_NODES_AVAILABLE)
    diagnosis = Diagnosis(num_all_nodes=num_all)
    if extenders:
        extenders.begin(pod)
    pod, feasible = find_nodes_that_fit(
        fwk, state, pod, snapshot, sampler=sampler, diagnosis=diagnosis, nominator=nominator, extenders=extenders
    )
    if len(feasible) == 0:
        raise FitError(pod, diagnosis)
    evaluated = len(feasible) + diagnosis.num_recorded()
    if len(feasible) == 1:
        return ScheduleResult(snapshot.info(int(feasible[0])).name, evaluated, 1, pod)
    pod, scored = fwk.run_before_score(state, pod, feasible)
    if len(scored) == 0:
        raise FitError(pod, diagnosis)
    totals = fwk.run_score_plugins(state, pod, scored)
    if extenders and extenders.has_prioritizers:
        extra = extenders.prioritize(pod, snapshot, scored)
        if extra is not None:
            totals = totals + extra
    if fwk.debug.scores > 0:
        fwk.log_score_table(state, pod, scored, totals)
    best = int(scored[int(np.argmax(totals))])
    return ScheduleResult(snapshot.info(best).name, evaluated, len(feasible), pod)


def find_nodes_that_fit(
    fwk: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: ClusterSnapshot,
    *,
    sampler: Sampler,
    diagnosis: Diagnosis,
    nominator: NominatedPods | None = None,
    extenders: Extenders | None = None,
) -> tuple[Pod, Positions]:
    """The (possibly transformed) pod and the feasible positions, at most the sampling limit, that the
    Filter plugins and then the filter extenders accept."""
    pod, result, status = fwk.run_pre_filter(state, pod)
    if not status.is_success:
        diagnosis.all_nodes_status = status
        diagnosis.pre_filter_msg = status.message
        _record_plugin(diagnosis, status)
        return pod, np.empty(0, dtype=np.intp)

    if pod.nominated_node_name:
        pos = snapshot.positions.get(pod.nominated_node_name)
        if pos is not None:
            probe = Diagnosis(num_all_nodes=diagnosis.num_all_nodes)
            single = np.array([pos], dtype=np.intp)
            pod = fwk.run_before_filter(state, pod, single)
            nominated = fwk.run_filter_plugins(state, pod, single, probe, nominated=nominator)
            if extenders and len(nominated):
                try:
                    nominated = extenders.filter(pod, snapshot, nominated, probe)
                except ExtenderError:  # as upstream: logged, and the pod is tried on all nodes
                    nominated = np.empty(0, dtype=np.intp)
            if len(nominated):
                return pod, nominated

    for name in fwk.run_prefer_nodes(state, pod, result):
        # Koordinator's PreferNodes: the first preferred node that passes Filter is the only candidate.
        pos = snapshot.positions.get(name)
        if pos is None:
            continue
        probe = Diagnosis(num_all_nodes=diagnosis.num_all_nodes)
        single = np.array([pos], dtype=np.intp)
        pod = fwk.run_before_filter(state, pod, single)
        preferred = fwk.run_filter_plugins(state, pod, single, probe, nominated=nominator)
        if len(preferred):
            return pod, preferred

    nodes = snapshot.node_order()
    if result is not None and result.node_names is not None:
        wanted = [snapshot.positions[n] for n in result.node_names if n in snapshot.positions]
        rank = np.full(snapshot.capacity, -1, dtype=np.int64)
        rank[nodes] = np.arange(len(nodes))
        narrowed = np.array(sorted(wanted, key=lambda p: int(rank[p])), dtype=np.intp)
        diagnosis.num_absent = len(nodes) - len(narrowed)
        plugins = sorted(result.plugins)
        diagnosis.absent_status = unresolvable(f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}]")
        nodes = narrowed
    if len(nodes) == 0:
        return pod, nodes

    start = sampler.next_start_index % len(nodes)
    rotated = nodes if start == 0 else np.concatenate([nodes[start:], nodes[:start]])
    to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, len(nodes))
    if not fwk.score_plugins and not (extenders and (extenders.has_filters or extenders.has_prioritizers)):
        to_find = 1
    pod = fwk.run_before_filter(state, pod, rotated)
    feasible = fwk.run_filter_plugins(state, pod, rotated, diagnosis, nominated=nominator)
    if len(feasible) > to_find:
        rank = np.empty(snapshot.capacity, dtype=np.int64)
        rank[rotated] = np.arange(len(rotated))
        processed = int(rank[feasible[to_find - 1]]) + 1
        feasible = feasible[:to_find]
    else:
        processed = len(rotated)
    sampler.next_start_index = (sampler.next_start_index + processed) % snapshot.num_nodes
    if extenders:
        feasible = extenders.filter(pod, snapshot, feasible, diagnosis)
    return pod, feasible


def _record_plugin(diagnosis: Diagnosis, status: Status) -> None:
    if status.code == Code.PENDING:
        diagnosis.pending_plugins.add(status.plugin)
    elif status.is_rejected:
        diagnosis.unschedulable_plugins.add(status.plugin)


__all__ = [
    "FailureChunk",
    "FitError",
    "NoNodesError",
    "Sampler",
    "ScheduleResult",
    "find_nodes_that_fit",
    "num_feasible_nodes_to_find",
    "schedule_pod",
]
