"""Network-topology-aware gangs (Koordinator ``coscheduling/core/network_topology_workflow.go``): the
cluster's ClusterNetworkTopology, the per-node offer slots measured with the Filter plugins, and the
PreScore order for pods with a network-topology selector. The pure planning is in :mod:`.topology_plan`,
the tree in :mod:`.topology_tree`; the round bookkeeping (who is first, who is pinned) stays in the
plugin.

Offer slots: on each candidate node, the job's pending pods (in ``network-topology-index`` order, then
by name) are filtered one after another with the first pod's CycleState, each one placed on the node
(through ``PreFilterExtensions.AddPod``) before the next is tried; the count stops at the first pod that
does not fit. Pods nominated to the node, of other jobs and at least as important, are placed first
(Koordinator's ``RunFilterPluginsWithNominatedPods``, less its second pass without them). The snapshot is
edited and restored; each node gets its own clone of the CycleState.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from apis.core.types import Pod
from apis.scheduling import network_topology as nt
from apis.scheduling.constants import GROUP, VERSION
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.errors import PluginCycleError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Code, Status, error, unschedulable
from koord_scheduler.framework.types import MAX_NODE_SCORE, EventType, ObjectKind, PreFilterResult
from koord_scheduler.plugins.coscheduling import topology_plan as plan
from koord_scheduler.plugins.coscheduling.gang_cache import Round
from koord_scheduler.plugins.coscheduling.job_dryrun import Placer
from koord_scheduler.plugins.coscheduling.topology_tree import TopologySpecError, TopologyTree, build_tree, order_layers
from koord_scheduler.plugins.helpers import default_normalize_score

log = logging.getLogger(__name__)

CLUSTER_NETWORK_TOPOLOGY_KIND = ObjectKind(
    kind=nt.KIND,
    group=GROUP,
    version=VERSION,
    plural=nt.PLURAL,
    namespaced=False,
    parse=nt.parse_cluster_network_topology,
    optional=True,  # a cluster without the CRD has no topology: gangs with a spec get the message for that
)


@dataclass(frozen=True, slots=True)
class NodeOrder:
    """PreScore's result: node name -> rank (0 = best)."""

    rank: Mapping[str, int]


PRE_SCORE_KEY: StateKey[NodeOrder] = StateKey("Coscheduling/network-topology-pre-score")


def sort_pods_by_index(pods: Sequence[Pod]) -> list[Pod]:
    """Koordinator's ``SortPodsByIndex``: pods with an index first, by index; then by name."""

    def key(pod: Pod) -> tuple[int, int, str]:
        index = nt.pod_topology_index(pod.annotations)
        return (0, index, pod.name) if index >= 0 else (1, 0, pod.name)

    return sorted(pods, key=key)


class NetworkTopology:
    """The cluster's topology object and the planning that needs the framework (``handle``: it runs the
    Filter chain and holds the nominated pods)."""

    def __init__(self, handle: Handle) -> None:
        self.topology: nt.ClusterNetworkTopologyRecord | None = None
        self._handle = handle

    def on_topology(self, event: EventType, old: Any, new: Any) -> None:
        """Keep the ClusterNetworkTopology named ``default``; one whose layers do not chain up from the
        node layer is logged and treated as absent (as Koordinator, which then builds no tree)."""
        record = new if event != EventType.DELETED else None
        name = (new or old).name
        if name != nt.DEFAULT_NAME:
            return
        if record is not None:
            try:
                order_layers(record.layers)
            except TopologySpecError as exc:
                log.error("%s %s is unusable: %s", nt.KIND, name, exc)
                record = None
        self.topology = record

    def tree(self, snapshot: ClusterSnapshot) -> TopologyTree | None:
        """The tree of the snapshot's nodes, or None without a usable ClusterNetworkTopology."""
        if self.topology is None:
            return None
        nodes = ((info.name, info.node.labels) for info in snapshot.iter_nodes() if info.node is not None)
        try:
            return build_tree(self.topology, nodes)
        except TopologySpecError as exc:
            log.error("ClusterNetworkTopology %s is unusable: %s", self.topology.name, exc)
            return None

    # ----- FindOneNode -----

    def find_one_node(
        self,
        state: CycleState,
        pod: Pod,
        *,
        current: Round,
        spec: nt.GangTopologySpec,
        pending: Callable[[], list[Pod]],
        snapshot: ClusterSnapshot,
        result: PreFilterResult | None,
    ) -> tuple[str, Status]:
        """Koordinator's FindOneNode for ``pod`` in the network-topology ``current`` round: the first
        member plans every ``pending()`` member's node (stored in ``current.planned``) and gets its own;
        Skip for the others (PreFilter pins them) and after the round failed."""
        if current.failed_message:
            return "", Status(Code.SKIP)
        if len(current.attempted) > 1:
            return ("", error(plan.NO_PLANNED_PODS)) if not current.planned else ("", Status(Code.SKIP))
        pods = pending()
        if not pods:
            return "", error(plan.NO_PENDING_PODS)
        candidates = None if result is None or result.node_names is None else sorted(result.node_names)
        outcome = self.plan(state, sort_pods_by_index(pods), snapshot, candidates, spec)
        if isinstance(outcome, plan.PlanFailure):
            return "", unschedulable(outcome.message)
        current.planned = outcome
        return outcome[pod.key], Status()

    def plan(
        self,
        state: CycleState,
        pods: Sequence[Pod],
        snapshot: ClusterSnapshot,
        candidates: Sequence[str] | None,
        spec: nt.GangTopologySpec,
        *,
        scores: Mapping[str, int] | None = None,
    ) -> dict[str, str] | plan.PlanFailure:
        """Pod key -> node for every pod of ``pods`` (sorted by :func:`sort_pods_by_index`), or why not.
        ``candidates``: the PreFilterResult's nodes (None: all); ``scores``: node -> score, higher first
        among equals. Raises :class:`PluginCycleError`."""
        tree = self.tree(snapshot)
        if tree is None:
            return plan.PlanFailure(plan.NO_CLUSTER_NETWORK_TOPOLOGY)
        if candidates is None:
            positions = [int(p) for p in snapshot.node_order()]
        else:
            positions = [info.position for n in candidates if (info := snapshot.node_info(n)) is not None]
        slots, failures = self.offer_slots(state, pods, snapshot, positions)
        selector = pods[0].annotations.get(nt.ANNOTATION_NETWORK_TOPOLOGY_SELECTOR, "")
        existing = existing_pods(snapshot, selector) if selector else None
        req = plan.requirements(spec, tree, len(pods))
        names = [(p.key, p.name) for p in pods]
        return plan.place_pods(tree, names, slots, req, node_failures=failures, existing_pods=existing, scores=scores)

    def preemption_placer(self, spec: nt.GangTopologySpec, snapshot: ClusterSnapshot) -> Placer:
        """Koordinator's ``PlanNodes`` for job preemption: the same planning over the dry run's nodes
        (victims taken off), where a cheaper preemption scores higher."""

        def place(
            state: CycleState, pods: Sequence[Pod], nodes: list[str], costs: Mapping[str, int]
        ) -> dict[str, str] | str:
            scores = {node: -cost for node, cost in costs.items()}
            outcome = self.plan(state, sort_pods_by_index(pods), snapshot, nodes, spec, scores=scores)
            return outcome.message if isinstance(outcome, plan.PlanFailure) else outcome

        return place

    def offer_slots(
        self, state: CycleState, pods: Sequence[Pod], snapshot: ClusterSnapshot, positions: list[int]
    ) -> tuple[dict[str, int], dict[str, tuple[str, ...]]]:
        """Node -> how many of ``pods`` it takes in order; node -> reasons of the failure that ended the
        count (nodes that take every pod have none)."""
        slots: dict[str, int] = {}
        failures: dict[str, tuple[str, ...]] = {}
        if not pods or not positions:
            return slots, failures
        job = {p.key for p in pods}
        nominated = {pos: others for pos in positions if (others := self._nominated_on(pods[0], pos, snapshot, job))}
        passed = self._filter(state, pods[0], [p for p in positions if p not in nominated], snapshot, failures)
        for pos in positions:
            info = snapshot.info(pos)
            if pos in nominated:
                slots[info.name] = self._count_on_node(state, pods, info, snapshot, failures, others=nominated[pos])
            elif pos in passed:
                slots[info.name] = self._count_on_node(state, pods, info, snapshot, failures)
            else:
                slots[info.name] = 0
        return slots, failures

    def _nominated_on(self, pod: Pod, pos: int, snapshot: ClusterSnapshot, job: set[str]) -> list[Pod]:
        """Pods nominated to the node that the job's pods must leave room for: at least as important and
        not the job's own (Koordinator's ``MakeNominatedPodsOfTheSameJob``)."""
        nominator = self._handle.nominator
        if not nominator:
            return []
        info = snapshot.info(pos)
        return [
            other
            for other in nominator.nominated_pods_for_node(info.name)
            if other.priority >= pod.priority and other.key not in job and other.key not in info.pods
        ]

    def _count_on_node(
        self,
        state: CycleState,
        pods: Sequence[Pod],
        info: NodeInfo,
        snapshot: ClusterSnapshot,
        failures: dict[str, tuple[str, ...]],
        *,
        others: Sequence[Pod] = (),
    ) -> int:
        """The pods on one node, each with the ones before it placed; pod 0 is known to fit unless
        ``others`` (nominated pods) are placed first."""
        node_state = state.clone()
        added: list[Pod] = []
        try:
            for other in others:
                placed = replace(other, node_name=info.name)
                snapshot.add_pod(placed)
                added.append(placed)
                problem = self._add_pod(node_state, pods[0], placed, info)
                if problem:
                    failures[info.name] = (problem,)
                    return 0
            if others and not self._filter(node_state, pods[0], [info.position], snapshot, failures):
                return 0
            for i in range(1, len(pods)):
                placed = replace(pods[i - 1], node_name=info.name)
                snapshot.add_pod(placed)
                added.append(placed)
                problem = self._add_pod(node_state, pods[i], placed, info)
                if problem:
                    failures[info.name] = (problem,)
                    return i
                if not self._filter(node_state, pods[i], [info.position], snapshot, failures):
                    return i
            return len(pods)
        finally:
            for placed in added:
                snapshot.remove_pod(placed)

    def _filter(
        self,
        state: CycleState,
        pod: Pod,
        positions: list[int],
        snapshot: ClusterSnapshot,
        failures: dict[str, tuple[str, ...]],
    ) -> set[int]:
        probe = Diagnosis(num_all_nodes=len(positions))
        passed = self._handle.filter_nodes_uncached(state, pod, np.asarray(positions, dtype=np.intp), probe)
        for chunk in probe.chunks:
            for i, pos in enumerate(chunk.positions.tolist()):
                failures[snapshot.info(pos).name] = chunk.status_at(i).reasons
        return set(passed.tolist())

    def _add_pod(self, state: CycleState, pod: Pod, other: Pod, info: NodeInfo) -> str:
        """AddPod of every PreFilter plugin; the failure's message, or ""."""
        for plugin in self._handle.pre_filter_plugins:
            if plugin.name in state.skip_filter:
                continue
            extensions = plugin.pre_filter_extensions()
            if extensions is None:
                continue
            status = extensions.add_pod(state, pod, other, info)
            if status.code == Code.ERROR:
                raise PluginCycleError(status.with_plugin(plugin.name))
            if not status.is_success:
                return status.message
        return ""

    # ----- PreScore / Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        """Rank the candidates by topology for a pod with a network-topology selector; Skip otherwise
        (and without a usable ClusterNetworkTopology)."""
        selector = pod.annotations.get(nt.ANNOTATION_NETWORK_TOPOLOGY_SELECTOR, "")
        if not selector:
            return Status(Code.SKIP)
        tree = self.tree(snapshot)
        if tree is None:
            return Status(Code.SKIP)
        names = [snapshot.info(int(p)).name for p in positions]
        order = plan.sort_nodes_by_topology(tree, names, existing_pods(snapshot, selector))
        state.write(PRE_SCORE_KEY, NodeOrder({name: i for i, name in enumerate(order)}))
        return Status()

    normalize_reads_only_scores = True
    """NormalizeScore depends on nothing but the scores (the runtime may reuse its result)."""

    def normalize_score(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        """The best rank (0) becomes 100 (Koordinator: ``DefaultNormalizeScore(100, reverse=true)``)."""
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return Status()

    @staticmethod
    def score_nodes(state: CycleState, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        """Each node's rank from PreScore (0 = best); NormalizeScore reverses it into [0, 100]."""
        order = state.get(PRE_SCORE_KEY)
        if order is None:
            return np.zeros(len(positions), dtype=np.int64)
        rank = order.rank
        return np.array([rank.get(snapshot.info(int(p)).name, 0) for p in positions], dtype=np.int64)


def existing_pods(snapshot: ClusterSnapshot, selector: str) -> dict[str, int]:
    """Node -> pods on it (bound or assumed) with the network-topology selector ``selector``."""
    key = nt.ANNOTATION_NETWORK_TOPOLOGY_SELECTOR
    out: dict[str, int] = {}
    for info in snapshot.iter_nodes():
        count = sum(1 for p in info.pods.values() if p.annotations.get(key) == selector)
        if count:
            out[info.name] = count
    return out
