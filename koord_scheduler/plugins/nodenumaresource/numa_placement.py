"""Where on a node's NUMA nodes a pod goes: its topology hints, the NUMA policy's verdict and the
allocation (NUMA shares and bound CPUs) for a chosen affinity (Koordinator ``topology_hint.go``,
``resource_manager.go`` ``GetTopologyHints`` / ``Allocate``).

Reads the node's NodeResourceTopology record and the plugin's allocation cache; changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from apis.core.types import CPU
from apis.extension.numa import CPUBindPolicy, CPUExclusivePolicy, NUMATopologyPolicy
from koord_scheduler.plugins.nodenumaresource.allocation import (
    AllocationError,
    AllocationRequest,
    allocate_cpus,
    allocate_cpus_in_numa,
    filter_by_required_policy,
)
from koord_scheduler.plugins.nodenumaresource.cache import NodeAllocations
from koord_scheduler.plugins.nodenumaresource.nrt import NodeTopologyRecord
from koord_scheduler.plugins.nodenumaresource.numa_hints import (
    CPUSplit,
    available_numa,
    distribute,
    generate_hints,
    trim_cpu,
)
from koord_scheduler.plugins.nodenumaresource.topology_manager import NUMAExclusive, NUMAHint, admit, bits

ERR_MISSING_NUMA = "node(s) missing NUMA resources"
ERR_INSUFFICIENT_NUMA_NODE = "node(s) Insufficient NUMA Node resources"

Scorer = Callable[[dict[str, int], dict[str, int]], int]
"""NUMA-level score of a set of NUMA nodes from (used with the pod added, total)."""


class PlacementError(Exception):
    """No allocation; ``reasons`` are upstream's messages."""

    def __init__(self, *reasons: str) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    requests: Mapping[str, int]
    cpus: AllocationRequest | None = None
    """Bound CPUs, when the pod gets a cpuset on this node."""


@dataclass(frozen=True, slots=True)
class Placement:
    cpus: tuple[int, ...] = ()
    numa: dict[int, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _NodeView:
    available_cpus: frozenset[int]
    exclusive: Mapping[int, CPUExclusivePolicy]
    available_numa: dict[int, dict[str, int]]


def _view(
    record: NodeTopologyRecord, allocations: NodeAllocations, node_name: str, request: PlacementRequest
) -> _NodeView:
    taken, exclusive = allocations.taken(node_name)
    available_cpus = frozenset(record.topology.cpus) - taken - record.reserved
    numa = available_numa(record.numa_resources, allocations.numa_allocated(node_name))
    alloc = request.cpus
    if alloc is not None and alloc.required:
        bindable = filter_by_required_policy(record.topology, available_cpus, alloc.bind_policy)
        per_numa: dict[int, int] = {}
        for cpu in bindable:
            node = record.topology.cpus[cpu].node
            per_numa[node] = per_numa.get(node, 0) + 1
        numa = trim_cpu(numa, per_numa)
    return _NodeView(available_cpus, exclusive, numa)


def _split(record: NodeTopologyRecord, alloc: AllocationRequest | None) -> CPUSplit:
    if alloc is None:
        return CPUSplit()
    full = alloc.required and alloc.bind_policy is CPUBindPolicy.FULL_PCPUS
    return CPUSplit(True, full, record.topology.cpus_per_core)


def _place(record: NodeTopologyRecord, view: _NodeView, request: PlacementRequest, mask: int | None) -> Placement:
    numa: dict[int, dict[str, int]] = {}
    if mask is not None:
        if not record.numa_resources:
            raise PlacementError("insufficient resources on NUMA Node")
        numa, reasons = distribute(request.requests, view.available_numa, bits(mask), _split(record, request.cpus))
        if reasons:
            raise PlacementError(*reasons)
    cpus: tuple[int, ...] = ()
    alloc = request.cpus
    if alloc is not None:
        try:
            if numa:
                per_numa = {node: amounts.get(CPU, 0) // 1000 for node, amounts in numa.items()}
                cpus = allocate_cpus_in_numa(record.topology, view.available_cpus, view.exclusive, alloc, per_numa)
            else:
                cpus = allocate_cpus(record.topology, view.available_cpus, view.exclusive, alloc)
        except AllocationError as exc:
            raise PlacementError(str(exc)) from None
    return Placement(cpus, numa)


def place(
    record: NodeTopologyRecord,
    allocations: NodeAllocations,
    node_name: str,
    request: PlacementRequest,
    mask: int | None,
) -> Placement:
    """``Allocate``: the pod's NUMA shares for the affinity ``mask`` (none without one) and its bound CPUs
    (from those NUMA nodes when it has shares). Raises :class:`PlacementError`."""
    return _place(record, _view(record, allocations, node_name, request), request, mask)


def topology_hints(
    record: NodeTopologyRecord,
    allocations: NodeAllocations,
    node_name: str,
    request: PlacementRequest,
    *,
    policy: NUMATopologyPolicy,
    scorer: Scorer,
) -> dict[str, list[NUMAHint]]:
    """``GetTopologyHints``: hints per requested resource, each NUMA set checked by a dry-run allocation."""
    view = _view(record, allocations, node_name, request)
    numa_nodes = record.numa_nodes

    def feasible(nodes: tuple[int, ...]) -> bool:
        mask = 0
        for node in nodes:
            mask |= 1 << node
        try:
            _place(record, view, request, mask)
        except PlacementError:
            return False
        return True

    def score(used: dict[str, int], total: dict[str, int]) -> int:
        with_pod = dict(used)
        for name, amount in request.requests.items():
            with_pod[name] = with_pod.get(name, 0) + amount
        return scorer(with_pod, total)

    return generate_hints(
        numa_nodes,
        record.numa_resources,
        view.available_numa,
        request.requests,
        policy=policy,
        feasible=feasible,
        score=score,
    )


def filter_by_numa(
    record: NodeTopologyRecord | None,
    allocations: NodeAllocations,
    node_name: str,
    request: PlacementRequest,
    *,
    policy: NUMATopologyPolicy,
    exclusive: NUMAExclusive,
    scorer: Scorer,
    other_hints: Sequence[Mapping[str, Sequence[NUMAHint] | None]] = (),
) -> tuple[NUMAHint, bool, list[str], bool]:
    """``FilterByNUMANode``: (best hint, admitted, reasons, resolvable). ``resolvable`` is false when the
    node reports no NUMA nodes at all (``node(s) missing NUMA resources``). ``other_hints`` are the other
    hint providers' (DeviceShare's devices), merged with the CPU and memory hints."""
    if record is None or not record.numa_resources:
        return NUMAHint(None, False), False, [ERR_MISSING_NUMA], False
    hints = topology_hints(record, allocations, node_name, request, policy=policy, scorer=scorer)
    statuses = allocations.numa_status(node_name, record.topology)
    best, admitted, reasons = admit(policy, record.numa_nodes, [hints, *other_hints], exclusive, statuses)
    return best, admitted, reasons, True
