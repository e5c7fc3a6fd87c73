"""The NUMA topology policy inside a scheduling cycle: Filter admits (SingleNUMANode, Restricted),
Reserve admits BestEffort and allocates along the chosen affinity, Score rates the chosen NUMA nodes
(Koordinator ``topology_hint.go``, ``topologymanager/manager.go`` ``Admit``, ``scoring.go``).

The affinity chosen for a node is kept in the cycle state; Reserve and Score recompute it when Filter's
result came from a cache and the state has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from apis.core.types import CPU, Pod
from apis.extension.numa import NUMATopologyPolicy
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.koordinator_stages import NUMAHintProvider
from koord_scheduler.framework.numa_affinity import NUMA_AFFINITY_KEY
from koord_scheduler.framework.status import Status, success, unresolvable, unschedulable
from koord_scheduler.plugins.nodenumaresource import policy
from koord_scheduler.plugins.nodenumaresource.allocation import AllocationRequest
from koord_scheduler.plugins.nodenumaresource.cache import NodeAllocations
from koord_scheduler.plugins.nodenumaresource.nrt import NodeTopologyRecord
from koord_scheduler.plugins.nodenumaresource.numa_placement import (
    Placement,
    PlacementError,
    PlacementRequest,
    filter_by_numa,
    place,
)
from koord_scheduler.plugins.nodenumaresource.topology_manager import NUMAExclusive, NUMAHint

AFFINITY_KEY: StateKey[dict[str, int | None]] = NUMA_AFFINITY_KEY
"""Node name → the NUMA affinity mask chosen there this cycle (``None``: any NUMA node); the framework's
key, so that the hint providers (DeviceShare) allocate inside it."""

RowScorer = Callable[[Sequence[int], Sequence[int], Sequence[int]], int]


def pod_exclusive(request: policy.PodCPURequest) -> NUMAExclusive:
    """The pod's ``singleNUMANodeExclusive``; ``Required`` by default only when the pod itself names a
    NUMA policy (a node-level policy keeps the old, non-exclusive behaviour)."""
    if request.numa_exclusive:
        return NUMAExclusive(request.numa_exclusive)
    if request.numa_policy is not NUMATopologyPolicy.NONE:
        return NUMAExclusive.REQUIRED
    return NUMAExclusive.NONE


@dataclass(frozen=True, slots=True)
class NUMAContext:
    """One pod on one node under a NUMA policy."""

    pod: Pod
    node_name: str
    record: NodeTopologyRecord
    numa: NUMATopologyPolicy
    request: policy.PodCPURequest
    alloc: AllocationRequest | None
    """Bound CPUs, when the pod gets a cpuset on this node."""
    allocations: NodeAllocations
    """What pods hold on the node, as this cycle sees it (a preemption dry run's view included)."""


class NUMAPolicyStep:
    def __init__(
        self,
        numa_scorer: RowScorer,
        numa_weights: Sequence[tuple[str, int]],
        node_scorer: RowScorer,
        node_weights: Sequence[tuple[str, int]],
    ) -> None:
        self._numa_scorer = numa_scorer
        self._numa_weights = tuple(numa_weights)
        self._node_scorer = node_scorer
        self._node_weights = tuple(node_weights)
        self.providers_of: Callable[[], Sequence[NUMAHintProvider]] = tuple
        """The profile's other NUMA hint providers (DeviceShare), asked each time (the plugin's handle knows
        them once the profile is built)."""

    def _provider_hints(
        self, state: CycleState, ctx: NUMAContext
    ) -> list[Mapping[str, Sequence[NUMAHint] | None]] | Status:
        """Each provider's hints for the pod on the node (``GetPodTopologyHints``), or its failure."""
        out: list[Mapping[str, Sequence[NUMAHint] | None]] = []
        for provider in self.providers_of():
            hints, status = provider.numa_topology_hints(state, ctx.pod, ctx.node_name)
            if not status.is_success:
                return status.with_plugin(provider.name)
            if hints is None:
                continue
            out.append(
                {name: [NUMAHint(h.mask, h.preferred, h.score) for h in listed] for name, listed in hints.items()}
            )
        return out

    def _score_amounts(self, used: dict[str, int], total: dict[str, int]) -> int:
        names = [name for name, _ in self._numa_weights]
        return self._numa_scorer(
            [used.get(n, 0) for n in names], [total.get(n, 0) for n in names], [w for _, w in self._numa_weights]
        )

    @staticmethod
    def request_of(pod: Pod, alloc: AllocationRequest | None) -> PlacementRequest:
        return PlacementRequest(dict(pod.requests), alloc)

    def admit(self, state: CycleState, ctx: NUMAContext) -> Status:
        """``FilterByNUMANode``: the policy's verdict; the affinity is remembered for Reserve."""
        request = self.request_of(ctx.pod, ctx.alloc)
        other_hints = self._provider_hints(state, ctx)
        if isinstance(other_hints, Status):
            return other_hints
        best, admitted, reasons, resolvable = filter_by_numa(
            ctx.record,
            ctx.allocations,
            ctx.node_name,
            request,
            policy=ctx.numa,
            exclusive=pod_exclusive(ctx.request),
            scorer=self._score_amounts,
            other_hints=other_hints,
        )
        if not resolvable:
            return unresolvable(*reasons)
        if not admitted:
            return unschedulable(*reasons)
        try:
            place(ctx.record, ctx.allocations, ctx.node_name, request, best.mask)
        except PlacementError as exc:
            return unschedulable(*exc.reasons)
        for provider in self.providers_of():
            status = provider.allocate_numa(state, ctx.pod, ctx.node_name, best.mask)
            if not status.is_success:
                return status.with_plugin(provider.name)
        affinities = state.get(AFFINITY_KEY)
        if affinities is None:
            affinities = {}
            state.write(AFFINITY_KEY, affinities)
        affinities[ctx.node_name] = best.mask
        return success()

    def allocate(self, state: CycleState, ctx: NUMAContext) -> Placement | Status:
        """Reserve's allocation under a NUMA policy: admit first when the policy is BestEffort (or when
        Filter's verdict is not in the state), then allocate along the affinity."""
        affinities = state.get(AFFINITY_KEY)
        if ctx.numa is NUMATopologyPolicy.BEST_EFFORT or affinities is None or ctx.node_name not in affinities:
            status = self.admit(state, ctx)
            if not status.is_success:
                return status
            affinities = state.get(AFFINITY_KEY)
        mask = affinities.get(ctx.node_name) if affinities is not None else None
        try:
            return place(ctx.record, ctx.allocations, ctx.node_name, self.request_of(ctx.pod, ctx.alloc), mask)
        except PlacementError as exc:
            return unschedulable(*exc.reasons)

    def score(self, state: CycleState, ctx: NUMAContext) -> int | None:
        """Score under a NUMA policy: the node scorer over the NUMA nodes the pod would get (their
        allocatable; what is held there plus the pod); with bound CPUs, used CPU is the node's count of
        bound CPUs, as Koordinator counts it. 0 when allocation fails; ``None`` when the pod would get no
        NUMA shares (the node-level score applies)."""
        placement = self.allocate(state, ctx)
        if isinstance(placement, Status):
            return 0
        if not placement.numa:
            return None
        names = [name for name, _ in self._node_weights]
        weights = [w for _, w in self._node_weights]
        held = ctx.allocations.numa_allocated(ctx.node_name)
        used = [sum(held.get(n, {}).get(name, 0) for n in placement.numa) for name in names]
        total = [sum(ctx.record.numa_resources.get(n, {}).get(name, 0) for n in placement.numa) for name in names]
        if placement.cpus and CPU in names:
            taken, _ = ctx.allocations.taken(ctx.node_name)
            used[names.index(CPU)] = len(taken) * 1000
        requests = ctx.pod.requests
        with_pod = [u + requests.get(name, 0) for u, name in zip(used, names, strict=True)]
        return self._node_scorer(with_pod, total, weights)
