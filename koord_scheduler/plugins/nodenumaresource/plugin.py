"""NodeNUMAResource: fine-grained CPU orchestration (Koordinator ``pkg/scheduler/plugins/nodenumaresource``).

LSE/LSR pods of priority koord-prod (and, on nodes labelled ``cpu-bind-policy``, every pod with a CPU
request) get a set of logical CPUs chosen by :mod:`.allocation` from the node's NodeResourceTopology.
Filter rejects nodes that cannot give the required policy; Score is Koordinator's node-level
LeastAllocated/MostAllocated; Reserve assumes the CPUs; PreBind writes
``scheduling.koordinator.sh/resource-status``.

NUMA topology policies (node label ``numa-topology-policy``, the NRT's kubelet policy, or the pod's
``numa-topology-spec``): SingleNUMANode and Restricted are admitted in Filter, BestEffort in Reserve, by
:mod:`.numa_step`; the pod then gets a share of each NUMA node of its affinity (``numaNodeResources`` in
resource-status) and its bound CPUs from those NUMA nodes. The profile's other NUMA hint providers
(DeviceShare) add their hints to the merge and allocate inside the chosen affinity, so GPUs are aligned
with CPUs and memory.

Reservations (:mod:`.reservation_cpus`): a Reservation asking for bound CPUs gets a cpuset like a
pod (``resource-status`` on the Reservation object); its owner pods take those CPUs first.

Preemption (:mod:`.preemption`): AddPod/RemovePod keep a dry run's changes per node in the cycle state,
so a victim's CPUs are free for the preemptor there and nowhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from apis.config.numa_args import MOST_ALLOCATED, NodeNUMAResourceArgs
from apis.core.types import CPU, MEMORY, Pod
from apis.extension.constants import LABEL_POD_QOS
from apis.extension.numa import (
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    AnnotationError,
    CPUBindPolicy,
    CPUExclusivePolicy,
    NodeCPUBindPolicy,
    NUMAAllocateStrategy,
    NUMATopologyPolicy,
    ResourceSpec,
    format_cpuset,
)
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.fast_paths import SignedPlugin
from koord_scheduler.framework.handle import ClusterClient, Handle
from koord_scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchScorePlugin,
    FilterPlugin,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from koord_scheduler.framework.koordinator_stages import NUMAHintProvider, ReservationPreBindPlugin
from koord_scheduler.framework.pod_patch import patch_at_pre_bind
from koord_scheduler.framework.services import ApiRoute, APIServiceProvider
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Status, error, skip, success, unresolvable, unschedulable
from koord_scheduler.framework.types import EventType, NodeFilterResult, PreFilterResult
from koord_scheduler.plugins import names
from koord_scheduler.plugins import resource_scoring as scoring
from koord_scheduler.plugins.kinds import RESERVATION_KIND
from koord_scheduler.plugins.nodenumaresource import amplification as amp
from koord_scheduler.plugins.nodenumaresource import policy, preemption, service
from koord_scheduler.plugins.nodenumaresource import reservation_cpus as resv
from koord_scheduler.plugins.nodenumaresource.allocation import AllocationError, AllocationRequest
from koord_scheduler.plugins.nodenumaresource.cache import Holding, NodeAllocations
from koord_scheduler.plugins.nodenumaresource.nrt import NODE_RESOURCE_TOPOLOGY_KIND, NodeTopologyRecord
from koord_scheduler.plugins.nodenumaresource.numa_placement import ERR_MISSING_NUMA
from koord_scheduler.plugins.nodenumaresource.numa_step import NUMAContext, NUMAPolicyStep
from koord_scheduler.plugins.nodenumaresource.reserved import ReservedCPUs, status_annotations
from koord_scheduler.plugins.nodenumaresource.special_nodes import SpecialNodes
from koord_scheduler.plugins.resource_scoring import ScoredResource, gather, scored_resources

log = logging.getLogger(__name__)

NAME = names.NODE_NUMA_RESOURCE
ARGS = NodeNUMAResourceArgs


@dataclass(slots=True)
class PreFilterState:
    request: policy.PodCPURequest


@dataclass(frozen=True, slots=True)
class _Placed:
    """What a pod gets on a node: bound CPUs, NUMA shares, and the allocation request they answer."""

    cpus: tuple[int, ...]
    shares: dict[int, dict[str, int]]
    alloc: AllocationRequest | None


_NO_SPEC = ResourceSpec()

PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilterNodeNUMAResource")
RESERVED_KEY: StateKey[ReservedCPUs] = StateKey("ReservedNodeNUMAResource")
PRE_SCORE_KEY: StateKey[tuple[ScoredResource, ...]] = StateKey("PreScoreNodeNUMAResource")


class NodeNUMAResource:
    name = NAME

    def __init__(self, args: NodeNUMAResourceArgs, snapshot: ClusterSnapshot, cluster: ClusterClient) -> None:
        self._snapshot = snapshot
        self._cluster = cluster
        self.allocations = NodeAllocations()
        self._default_policy = CPUBindPolicy(args.default_cpu_bind_policy)
        self._default_strategy = (
            NUMAAllocateStrategy.MOST_ALLOCATED
            if args.numa_scoring_strategy.type == MOST_ALLOCATED
            else NUMAAllocateStrategy.LEAST_ALLOCATED
        )
        self._scorer = (
            scoring.most_allocated if args.scoring_strategy.type == MOST_ALLOCATED else scoring.least_allocated
        )
        self._row_scorer = (
            scoring.most_allocated_row if args.scoring_strategy.type == MOST_ALLOCATED else scoring.least_allocated_row
        )
        self._resources = tuple((r.name, r.weight) for r in args.scoring_strategy.resources if r.name in (CPU, MEMORY))
        numa_most = args.numa_scoring_strategy.type == MOST_ALLOCATED
        self._numa = NUMAPolicyStep(
            scoring.most_allocated_row if numa_most else scoring.least_allocated_row,
            tuple((r.name, r.weight) for r in args.numa_scoring_strategy.resources),
            self._row_scorer,
            self._resources,
        )
        self._topologies: dict[str, NodeTopologyRecord] = {}
        self._special_nodes = SpecialNodes(snapshot, self._topologies)
        self._no_bind: dict[int, policy.PodCPURequest] = {}

    def sign_pod(self, pod: Pod) -> Hashable:
        """Filter and Score depend on the node (its labels, its NRT and its allocations, which touch the
        node's row when they change) and on these fields of the pod."""
        labels, annotations = pod.meta.labels, pod.meta.annotations
        return (
            pod.requests,
            pod.non_zero_cpu,
            pod.non_zero_memory,
            labels.get(LABEL_POD_QOS),
            labels.get("koordinator.sh/priority-class"),
            pod.priority,
            annotations.get(ANNOTATION_RESOURCE_SPEC),
            annotations.get(ANNOTATION_NUMA_TOPOLOGY_SPEC),
        )

    @property
    def _special(self) -> set[int]:
        return self._special_nodes.positions

    def use_hint_providers(self, providers: Callable[[], Sequence[NUMAHintProvider]]) -> None:
        """``providers()``: the profile's NUMA hint providers (its handle's), asked when the NUMA admission
        runs; the others than this plugin (DeviceShare) take part in it."""
        self._numa.providers_of = lambda: [p for p in providers() if p.name != self.name]

    # ----- informers -----

    def on_topology(self, event: EventType, old: Any, new: Any) -> None:
        record = new if isinstance(new, NodeTopologyRecord) else None
        name = record.name if record is not None else getattr(old, "name", "")
        if record is None:
            self._topologies.pop(name, None)
        else:
            self._topologies[name] = record
        self._special_nodes.topology_changed = True
        self._touch(name)

    def on_pod(self, event: EventType, old: Any, new: Any) -> None:
        pod = new if isinstance(new, Pod) else None
        if (
            pod is not None
            and ANNOTATION_RESOURCE_STATUS not in pod.meta.annotations
            and not self.allocations.holds(pod.key)
        ):
            return  # the common case: a pod without bound CPUs
        if pod is None or pod.phase in ("Succeeded", "Failed"):
            gone = old if isinstance(old, Pod) else pod
            if gone is not None:
                self._touch(self.allocations.release(gone.key) or "")
            return
        if not pod.node_name:
            # Pending, or between PreBind's patch and the binding: what Reserve assumed stays until
            # Unreserve or the forget-pod handler gives it back.
            return
        try:
            holding = policy.holding_of(pod)
        except AnnotationError as exc:
            log.warning("%s; the CPUs it names are not counted as held", exc)
            return
        if holding is None:
            return
        self.allocations.hold(pod.node_name, pod.key, holding)
        self._touch(pod.node_name)

    def on_forget_pod(self, pod: Pod) -> None:
        self._touch(self.allocations.release(resv.holding_key(pod)) or "")

    def on_reservation(self, event: EventType, old: Any, new: Any) -> None:
        """An Available Reservation holds its ``resource-status`` cpuset on its node; a finished or
        deleted one gives it back. A pending one keeps what its reserve pod's Reserve assumed."""
        for node in resv.apply_reservation_event(self.allocations, event, old, new):
            self._touch(node)

    def _touch(self, node_name: str) -> None:
        info = self._snapshot.node_info(node_name) if node_name else None
        if info is not None:
            self._snapshot.touch(info.position)

    # ----- PreFilter -----

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not any(pod.requests.values()):
            return None, skip()
        # Score and Reserve of every pod read the special nodes, so they are brought up to date here.
        self._special_nodes.sync()
        labels = pod.meta.labels
        if (
            labels.get(LABEL_POD_QOS) not in ("LSE", "LSR")
            and ANNOTATION_NUMA_TOPOLOGY_SPEC not in pod.meta.annotations
        ):
            # No bound CPUs asked for: only labelled nodes (bind or NUMA policy) can say no. Without any,
            # Filter has nothing to do; Score still runs.
            state.write(PRE_FILTER_KEY, PreFilterState(self._no_bind_request(pod.requests.get(CPU, 0))))
            return None, (success() if self._special else skip())
        try:
            request = policy.pod_cpu_request(pod, self._default_policy)
        except AnnotationError as exc:
            return None, unresolvable(str(exc))
        if request.bind_policy is not CPUBindPolicy.NONE and request.milli_cpu % 1000:
            return None, unresolvable(policy.ERR_NOT_INTEGER)
        state.write(PRE_FILTER_KEY, PreFilterState(request))
        return None, success()

    def _no_bind_request(self, milli: int) -> policy.PodCPURequest:
        request = self._no_bind.get(milli)
        if request is None:
            if len(self._no_bind) > 1024:
                self._no_bind.clear()
            request = self._no_bind[milli] = policy.PodCPURequest(
                milli, CPUBindPolicy.NONE, False, CPUExclusivePolicy.NONE, NUMATopologyPolicy.NONE, False, _NO_SPEC
            )
        return request

    def _cpu_request(self, pod: Pod) -> policy.PodCPURequest | None:
        """What PreFilter would record for ``pod`` (None where it would skip or reject it)."""
        if not any(pod.requests.values()):
            return None
        if (
            pod.meta.labels.get(LABEL_POD_QOS) not in ("LSE", "LSR")
            and ANNOTATION_NUMA_TOPOLOGY_SPEC not in pod.meta.annotations
        ):
            return self._no_bind_request(pod.requests.get(CPU, 0))
        try:
            request = policy.pod_cpu_request(pod, self._default_policy)
        except AnnotationError:
            return None
        if request.bind_policy is not CPUBindPolicy.NONE and request.milli_cpu % 1000:
            return None
        return request

    # ----- PreFilterExtensions (preemption dry runs, nominated pods) -----

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        """``AddPod``: ``pod_to_add`` runs on the node in this state (see :mod:`.preemption`)."""
        if state.get(PRE_FILTER_KEY) is not None:
            key = resv.holding_key(pod_to_add)
            preemption.add_pod(
                state,
                self.allocations,
                node_info.name,
                key,
                lambda view: self._dry_holding(pod_to_add, node_info, view),
            )
        return success()

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        """``RemovePod``: ``pod_to_remove`` is off the node in this state; its CPUs are free here."""
        if state.get(PRE_FILTER_KEY) is not None:
            preemption.remove_pod(state, self.allocations, node_info.name, resv.holding_key(pod_to_remove))
        return success()

    def _dry_holding(self, pod: Pod, node_info: NodeInfo, allocations: NodeAllocations) -> Holding | None:
        """What Reserve would give ``pod`` on the node as ``allocations`` has it (None: nothing, or no fit)."""
        request = self._cpu_request(pod)
        if request is None or node_info.node is None:
            return None
        placed = self._allocate(CycleState(), pod, request, node_info, allocations)
        if not isinstance(placed, _Placed):
            return None
        key = resv.holding_key(pod)
        return Holding(frozenset(placed.cpus), request.exclusive, key, placed.shares)

    # ----- Filter -----

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        if state.get(PRE_FILTER_KEY) is None:
            return NodeFilterResult.all_pass(len(positions))
        statuses: list[Status] = []
        passed = np.ones(len(positions), dtype=np.bool_)
        reason_ids = np.zeros(len(positions), dtype=np.int32)
        deltas = preemption.deltas_of(state)
        for i, pos in enumerate(positions.tolist()):
            status = self._filter(state, pod, snapshot.info(pos), deltas)
            if not status.is_success:
                passed[i] = False
                reason_ids[i] = len(statuses)
                statuses.append(status)
        if passed.all():
            return NodeFilterResult(passed, every_node_passed=True)
        return NodeFilterResult(passed, reason_ids, tuple(statuses))

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        return self._filter(state, pod, node_info, preemption.deltas_of(state))

    def _filter(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, deltas: preemption.PreemptionDeltas | None
    ) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        node = node_info.node
        if pre is None or node is None:
            return success()
        request = pre.request
        record = self._topologies.get(node.name)
        numa = policy.node_numa_policy(node.labels, record.numa_policy if record else NUMATopologyPolicy.NONE)
        if numa is not NUMATopologyPolicy.NONE and request.numa_policy not in (NUMATopologyPolicy.NONE, numa):
            return unresolvable(policy.ERR_NUMA_POLICY_NOT_MATCH)
        numa = numa if numa is not NUMATopologyPolicy.NONE else request.numa_policy
        node_policy = policy.node_bind_policy(node.labels, record.full_pcpus_only if record else False)
        bind = request.request_bind or (request.milli_cpu > 0 and node_policy is not NodeCPUBindPolicy.NONE)
        allocations = preemption.allocations_in(deltas, self.allocations, node.name)
        if request.milli_cpu > 0 and amp.ANNOTATION_AMPLIFICATION_RATIO in node.annotations:
            status = amp.amplified_filter_at(self._snapshot, allocations, node_info, request.milli_cpu, bind)
            if not status.is_success:
                return status
        alloc: AllocationRequest | None = None
        if bind:
            if request.milli_cpu % 1000:
                return unresolvable(policy.ERR_NOT_INTEGER)
            checked = self._allocation_request(request, node_policy, node.labels)
            if isinstance(checked, Status):
                return checked
            alloc = checked
            if record is None:
                return unresolvable(policy.ERR_TOPOLOGY_NOT_FOUND)
            if not record.topology.valid:
                return unresolvable(policy.ERR_INVALID_TOPOLOGY)
            full = alloc.bind_policy is CPUBindPolicy.FULL_PCPUS
            if alloc.required and full and alloc.num_cpus % record.topology.cpus_per_core:
                return unresolvable(policy.ERR_NOT_MULTIPLE_OF_CORE)
            if alloc.required and numa is NUMATopologyPolicy.NONE:
                restore = resv.restore_for(state, allocations, node.name, node_info.position)
                try:
                    resv.allocate_on_node(allocations, node.name, record, alloc, restore)
                except AllocationError as exc:
                    return unschedulable(str(exc))
        if numa in (NUMATopologyPolicy.SINGLE_NUMA_NODE, NUMATopologyPolicy.RESTRICTED):
            if record is None or not record.numa_resources:
                return unresolvable(ERR_MISSING_NUMA)
            return self._numa.admit(state, NUMAContext(pod, node.name, record, numa, request, alloc, allocations))
        return success()

    def _allocation_request(
        self, request: policy.PodCPURequest, node_policy: NodeCPUBindPolicy, labels: Any
    ) -> AllocationRequest | Status:
        bind_policy, required = request.bind_policy, request.required
        if node_policy is not NodeCPUBindPolicy.NONE:
            forced = (
                CPUBindPolicy.FULL_PCPUS
                if node_policy is NodeCPUBindPolicy.FULL_PCPUS_ONLY
                else CPUBindPolicy.SPREAD_BY_PCPUS
            )
            if required and bind_policy is not forced:
                return unresolvable(policy.ERR_BIND_POLICY_CONFLICT)
            bind_policy, required = forced, True
        strategy = policy.numa_allocate_strategy(labels, self._default_strategy)
        return AllocationRequest(request.num_cpus, bind_policy, required, request.exclusive, strategy)

    # ----- Score -----

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        if state.get(PRE_FILTER_KEY) is None:
            return skip()
        state.write(PRE_SCORE_KEY, self._scored(pod, snapshot))
        return success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        resources = state.get(PRE_SCORE_KEY) or self._scored(pod, snapshot)
        if not resources:
            return np.zeros(len(positions), dtype=np.int64)
        requested, allocatable = gather(snapshot, positions, resources)
        scores = self._scorer(requested, allocatable, np.array([r.weight for r in resources], dtype=np.int64))
        pre = state.get(PRE_FILTER_KEY)
        if pre is not None and (self._special or pre.request.numa_policy is not NUMATopologyPolicy.NONE):
            for i, pos in enumerate(positions.tolist()):
                if pos in self._special or pre.request.numa_policy is not NUMATopologyPolicy.NONE:
                    numa_score = self._numa_score(state, pod, snapshot.info(pos))
                    if numa_score is None:
                        numa_score = self._amplified_score(resources, snapshot.info(pos))
                    if numa_score is not None:
                        scores[i] = numa_score
        return scores

    def _numa_score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int | None:
        """The score under the node's (or the pod's) NUMA policy, or None where none applies."""
        pre = state.get(PRE_FILTER_KEY)
        node = node_info.node
        if pre is None or node is None:
            return None
        request = pre.request
        record = self._topologies.get(node.name)
        numa = self._numa_policy(node.labels, record, request)
        if numa is NUMATopologyPolicy.NONE or record is None:
            return None
        node_policy = policy.node_bind_policy(node.labels, record.full_pcpus_only)
        alloc: AllocationRequest | None = None
        if request.request_bind or (request.milli_cpu > 0 and node_policy is not NodeCPUBindPolicy.NONE):
            checked = self._allocation_request(request, node_policy, node.labels)
            if isinstance(checked, Status) or not record.topology.valid:
                return 0
            alloc = checked
        allocations = preemption.allocations_for(state, self.allocations, node.name)
        return self._numa.score(state, NUMAContext(pod, node.name, record, numa, request, alloc, allocations))

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        numa_score = self._numa_score(state, pod, node_info)
        if numa_score is not None:
            return numa_score
        resources = state.get(PRE_SCORE_KEY) or self._scored(pod, self._snapshot)
        amplified = self._amplified_score(resources, node_info)
        return amplified if amplified is not None else self._row_score(resources, node_info.position)

    def _amplified_score(self, resources: tuple[ScoredResource, ...], node_info: NodeInfo) -> int | None:
        return amp.amplified_score(self._snapshot, self.allocations, resources, node_info, self._row_scorer)

    def _row_score(self, resources: tuple[ScoredResource, ...], pos: int) -> int:
        return amp.row_score(self._snapshot, resources, pos, self._row_scorer)

    def _scored(self, pod: Pod, snapshot: ClusterSnapshot) -> tuple[ScoredResource, ...]:
        return scored_resources(pod, snapshot, self._resources)

    def score_extensions(self) -> ScoreExtensions | None:
        return None

    # ----- Reserve / PreBind -----

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        pre = state.get(PRE_FILTER_KEY)
        info = self._snapshot.node_info(node_name)
        if pre is None or info is None or info.node is None:
            return success()
        request = pre.request
        allocations = preemption.allocations_for(state, self.allocations, node_name)
        placed = self._allocate(state, pod, request, info, allocations)
        if not isinstance(placed, _Placed):
            return placed or success()
        cpus, shares, alloc = placed.cpus, placed.shares, placed.alloc
        key = resv.holding_key(pod)
        self.allocations.hold(node_name, key, Holding(frozenset(cpus), request.exclusive, key, shares))
        self._touch(node_name)
        state.write(
            RESERVED_KEY,
            ReservedCPUs(
                node_name,
                cpus,
                alloc.bind_policy if alloc else CPUBindPolicy.NONE,
                alloc.required if alloc else False,
                shares,
                resv.reservation_name(pod) if resv.is_reserve_pod(pod) else "",
            ),
        )
        return success()

    def _allocate(
        self,
        state: CycleState,
        pod: Pod,
        request: policy.PodCPURequest,
        info: NodeInfo,
        allocations: NodeAllocations,
    ) -> _Placed | Status | None:
        """The CPUs and NUMA shares ``pod`` gets on the node (Reserve's decision), a failure status, or None
        when it gets neither there."""
        node = info.node
        if node is None:
            return None
        node_name = node.name
        if (
            not request.request_bind
            and request.numa_policy is NUMATopologyPolicy.NONE
            and info.position not in self._special
        ):
            return None
        record = self._topologies.get(node_name)
        node_policy = policy.node_bind_policy(node.labels, record.full_pcpus_only if record else False)
        numa = self._numa_policy(node.labels, record, request)
        bind = request.request_bind or (request.milli_cpu > 0 and node_policy is not NodeCPUBindPolicy.NONE)
        if not bind and numa is NUMATopologyPolicy.NONE:
            return None
        alloc: AllocationRequest | None = None
        if bind:
            checked = self._allocation_request(request, node_policy, node.labels)
            if isinstance(checked, Status):
                return checked
            alloc = checked
            if record is None or not record.topology.valid:
                return error(policy.ERR_TOPOLOGY_NOT_FOUND if record is None else policy.ERR_INVALID_TOPOLOGY)
        if numa is NUMATopologyPolicy.NONE:
            assert alloc is not None and record is not None
            restore = resv.restore_for(state, allocations, node_name, info.position)
            try:
                cpus = resv.allocate_on_node(allocations, node_name, record, alloc, restore)
            except AllocationError as exc:
                return unschedulable(str(exc))
            return _Placed(cpus, {}, alloc)
        if record is None:
            return unresolvable(ERR_MISSING_NUMA)
        placed = self._numa.allocate(state, NUMAContext(pod, node_name, record, numa, request, alloc, allocations))
        if isinstance(placed, Status):
            return placed
        return _Placed(placed.cpus, placed.numa, alloc)

    def _numa_policy(
        self, labels: Any, record: NodeTopologyRecord | None, request: policy.PodCPURequest
    ) -> NUMATopologyPolicy:
        """The node's NUMA policy, else the pod's (Filter has rejected a mismatch)."""
        numa = policy.node_numa_policy(labels, record.numa_policy if record else NUMATopologyPolicy.NONE)
        return numa if numa is not NUMATopologyPolicy.NONE else request.numa_policy

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if state.get(RESERVED_KEY) is None:
            return
        state.delete(RESERVED_KEY)
        self._touch(self.allocations.release(resv.holding_key(pod)) or "")

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        reserved = state.get(RESERVED_KEY)
        pre = state.get(PRE_FILTER_KEY)
        if reserved is None or pre is None or resv.is_reserve_pod(pod):
            return success()  # a reserve pod's status goes on its Reservation (pre_bind_reservation)
        await patch_at_pre_bind(state, self._cluster, pod, annotations=status_annotations(reserved, pre.request.spec))
        return success()

    async def pre_bind_reservation(self, state: CycleState, reservation: object, node_name: str) -> Status:
        """``PreBindReservation``: the reserve pod's cpuset as ``resource-status`` on the Reservation."""
        reserved = state.get(RESERVED_KEY)
        pre = state.get(PRE_FILTER_KEY)
        if reserved is None or pre is None or not reserved.reservation:
            return success()
        body = resv.reservation_annotations(status_annotations(reserved, pre.request.spec))
        try:
            await self._cluster.patch_object(RESERVATION_KIND, reserved.reservation, body)
        except ClusterError as exc:
            return error(f"writing resource-status of Reservation {reserved.reservation}: {exc}")
        return success()

    # ----- simulate -----

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self._snapshot

    def topology_of(self, node: str) -> NodeTopologyRecord | None:
        """The node's CPU topology and NUMA resources (from its NodeResourceTopology), if known."""
        return self._topologies.get(node)

    def api_routes(self) -> Sequence[ApiRoute]:
        """``/apis/v1/plugins/NodeNUMAResource/nodes/:nodeName`` (:mod:`.service`)."""
        return service.routes(self)

    def simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        rows = [
            {"node": node, "pod": key, "cpuset": format_cpuset(cpus)} for node, key, cpus in self.allocations.rows()
        ]
        return "Bound cpusets (NodeNUMAResource)", rows


def new(args: NodeNUMAResourceArgs | None, handle: Handle) -> NodeNUMAResource:
    plugin = NodeNUMAResource(args or NodeNUMAResourceArgs(), handle.snapshot, handle.cluster)
    plugin.use_hint_providers(lambda: handle.numa_hint_providers)
    handle.watch(NODE_RESOURCE_TOPOLOGY_KIND, plugin.on_topology)
    handle.watch(RESERVATION_KIND, plugin.on_reservation)
    handle.watch_pods(plugin.on_pod)
    handle.register_forget_pod_handler(plugin.on_forget_pod)
    handle.add_simulation_report(plugin.simulation_report)
    return plugin


def declared_capabilities(
    plugin: NodeNUMAResource,
) -> tuple[
    PreFilterExtensions,
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    ReservationPreBindPlugin,
    SignedPlugin,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin, plugin


_services: type[APIServiceProvider] = NodeNUMAResource
"""The ``/apis/v1`` routes (not one of the framework's extension points, so not in the list above)."""
