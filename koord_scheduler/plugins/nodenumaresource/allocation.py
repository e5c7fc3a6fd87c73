"""Which logical CPUs a pod gets: Koordinator's CPU accumulator (``cpu_accumulator.go`` ``takeCPUs``) and
the wrapper that applies a *required* bind policy (``resource_manager.go`` ``allocateCPUSet``).

Pure: a topology, the free CPUs and the exclusive holdings in; a tuple of CPU ids out, or
:class:`AllocationError` with upstream's message. Only ``maxRefCount = 1`` (a CPU is held by at most one
pod) is modelled, which is Koordinator's default.

Order of preference, FullPCPUs (or one CPU per core): whole free cores of one NUMA node, then of one
socket, then whole sockets' free cores by size, then single cores from the smallest remainders. SpreadByPCPUs:
one CPU per core inside one NUMA node, then one socket. Both then fall back to single CPUs ordered
by socket affinity with what was already taken. NUMA nodes and sockets are ordered by free CPUs:
more free first under LeastAllocated, fewer free first under MostAllocated; ties by id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from apis.extension.numa import CPUBindPolicy, CPUExclusivePolicy, NUMAAllocateStrategy
from koord_scheduler.plugins.nodenumaresource.topology import CPUTopology

ERR_NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
ERR_FAILED = "failed to allocate cpus"
ERR_REQUIRED_POLICY = "insufficient CPUs to satisfy required cpu bind policy"


class AllocationError(Exception):
    """The request cannot be met; ``str()`` is upstream's reason."""


@dataclass(frozen=True, slots=True)
class AllocationRequest:
    num_cpus: int
    bind_policy: CPUBindPolicy = CPUBindPolicy.FULL_PCPUS
    required: bool = False
    """A required bind policy: only whole free cores (FullPCPUs) or one CPU per core (SpreadByPCPUs)."""
    exclusive_policy: CPUExclusivePolicy = CPUExclusivePolicy.NONE
    strategy: NUMAAllocateStrategy = NUMAAllocateStrategy.LEAST_ALLOCATED


def _desc(strategy: NUMAAllocateStrategy, free: int) -> int:
    """Sort key: more free first (LeastAllocated, DistributeEvenly) or fewer free first (MostAllocated)."""
    return free if strategy is NUMAAllocateStrategy.MOST_ALLOCATED else -free


class _Accumulator:
    __slots__ = ("exclusive_cores", "exclusive_nodes", "free", "needed", "policy", "result", "strategy", "topo")

    def __init__(
        self,
        topo: CPUTopology,
        available: frozenset[int],
        held_exclusive: Mapping[int, CPUExclusivePolicy],
        request: AllocationRequest,
    ) -> None:
        self.topo = topo
        self.free = {c for c in available if c in topo.cpus}
        self.needed = request.num_cpus
        self.policy = request.exclusive_policy
        self.strategy = request.strategy
        self.result: list[int] = []
        self.exclusive_cores = {
            topo.cpus[c].core
            for c, p in held_exclusive.items()
            if p is CPUExclusivePolicy.PCPU_LEVEL and c in topo.cpus
        }
        self.exclusive_nodes = {
            topo.cpus[c].node
            for c, p in held_exclusive.items()
            if p is CPUExclusivePolicy.NUMA_NODE_LEVEL and c in topo.cpus
        }

    def take(self, cpus: list[int]) -> None:
        for cpu in cpus:
            self.free.discard(cpu)
            self.result.append(cpu)
            info = self.topo.cpus[cpu]
            if self.policy is CPUExclusivePolicy.PCPU_LEVEL:
                self.exclusive_cores.add(info.core)
            elif self.policy is CPUExclusivePolicy.NUMA_NODE_LEVEL:
                self.exclusive_nodes.add(info.node)
        self.needed -= len(cpus)

    def excluded_pcpu(self, cpu: int) -> bool:
        return self.policy is CPUExclusivePolicy.PCPU_LEVEL and self.topo.cpus[cpu].core in self.exclusive_cores

    def excluded_node(self, cpu: int) -> bool:
        return self.policy is CPUExclusivePolicy.NUMA_NODE_LEVEL and self.topo.cpus[cpu].node in self.exclusive_nodes

    def _cores(self, cpus: list[int]) -> dict[int, list[int]]:
        by_core: dict[int, list[int]] = {}
        for cpu in sorted(cpus):
            by_core.setdefault(self.topo.cpus[cpu].core, []).append(cpu)
        return by_core

    def free_cores_in_nodes(self, filter_exclusive: bool) -> list[list[int]]:
        """CPUs of fully free cores, per NUMA node, nodes in strategy order."""
        cpus = [c for c in self.free if not (filter_exclusive and self.excluded_node(c))]
        socket_free: dict[int, int] = {}
        for c in cpus:
            socket_free[self.topo.cpus[c].socket] = socket_free.get(self.topo.cpus[c].socket, 0) + 1
        per_node: dict[int, list[int]] = {}
        for _core, members in sorted(self._cores(cpus).items()):
            if len(members) == self.topo.cpus_per_core:
                per_node.setdefault(self.topo.cpus[members[0]].node, []).extend(members)
        return self._ordered(
            per_node,
            lambda node, lst: (
                _desc(self.strategy, len(lst)),
                _desc(self.strategy, socket_free[self.topo.cpus[lst[0]].socket]),
                node,
            ),
        )

    def free_cores_in_sockets(self) -> list[list[int]]:
        per_socket: dict[int, list[int]] = {}
        for _core, members in sorted(self._cores(list(self.free)).items()):
            if len(members) == self.topo.cpus_per_core:
                per_socket.setdefault(self.topo.cpus[members[0]].socket, []).extend(members)
        return self._ordered(per_socket, lambda socket, lst: (_desc(self.strategy, len(lst)), socket))

    def free_cpus_in_nodes(self, filter_exclusive: bool) -> list[list[int]]:
        """Free CPUs per NUMA node; with ``filter_exclusive`` only the lowest CPU of each core is kept
        (after dropping exclusive cores and nodes). Nodes ordered by their free count before that cut."""
        per_node: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        for c in sorted(self.free):
            if filter_exclusive and (self.excluded_pcpu(c) or self.excluded_node(c)):
                continue
            info = self.topo.cpus[c]
            per_node.setdefault(info.node, []).append(c)
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        node_free = {n: len(v) for n, v in per_node.items()}
        if filter_exclusive:
            per_node = {n: self._one_per_core(v) for n, v in per_node.items()}
        return self._ordered(
            per_node,
            lambda node, lst: (
                _desc(self.strategy, node_free[node]),
                _desc(self.strategy, socket_free[self.topo.cpus[lst[0]].socket]),
                node,
            ),
        )

    def free_cpus_in_sockets(self, filter_exclusive: bool) -> list[list[int]]:
        per_socket: dict[int, list[int]] = {}
        for c in sorted(self.free):
            if filter_exclusive and self.excluded_pcpu(c):
                continue
            per_socket.setdefault(self.topo.cpus[c].socket, []).append(c)
        if filter_exclusive:
            per_socket = {s: self._one_per_core(v) for s, v in per_socket.items()}
        return self._ordered(per_socket, lambda socket, lst: (_desc(self.strategy, len(lst)), socket))

    def free_cpus_spread_order(self, filter_exclusive: bool) -> list[int]:
        """Every free CPU, core by core: sockets holding result CPUs first, then socket and node free counts
        per strategy, then fuller-used cores (fewer free CPUs) first, then socket id and core id."""
        cpus = [c for c in self.free if not (filter_exclusive and (self.excluded_pcpu(c) or self.excluded_node(c)))]
        socket_free: dict[int, int] = {}
        node_free: dict[int, int] = {}
        for c in cpus:
            info = self.topo.cpus[c]
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
            node_free[info.node] = node_free.get(info.node, 0) + 1
        taken_by_socket: dict[int, int] = {}
        for c in self.result:
            s = self.topo.cpus[c].socket
            taken_by_socket[s] = taken_by_socket.get(s, 0) + 1
        by_core = self._cores(cpus)

        def key(core: int) -> tuple[int, ...]:
            info = self.topo.cpus[by_core[core][0]]
            return (
                -taken_by_socket.get(info.socket, 0),
                _desc(self.strategy, socket_free[info.socket]),
                _desc(self.strategy, node_free[info.node]),
                len(by_core[core]),
                info.socket,
                core,
            )

        return [c for core in sorted(by_core, key=key) for c in by_core[core]]

    def _one_per_core(self, cpus: list[int]) -> list[int]:
        seen: set[int] = set()
        kept: list[int] = []
        for c in cpus:
            core = self.topo.cpus[c].core
            if core not in seen:
                seen.add(core)
                kept.append(c)
        return kept

    def spread(self, cpus: list[int]) -> list[int]:
        """Round-robin by core: the first CPU of each core, then the second..., keeping the given order."""
        if len(cpus) <= self.topo.cpus_per_core:
            return cpus
        out: list[int] = []
        pending = cpus
        while pending:
            seen: set[int] = set()
            rest: list[int] = []
            for c in pending:
                core = self.topo.cpus[c].core
                if core in seen:
                    rest.append(c)
                else:
                    seen.add(core)
                    out.append(c)
            pending = rest
        return out

    @staticmethod
    def _ordered(groups: dict[int, list[int]], key: object) -> list[list[int]]:
        keyed = sorted(groups.items(), key=lambda kv: key(kv[0], kv[1]))  # type: ignore[operator]
        return [lst for _, lst in keyed]


def take_cpus(
    topo: CPUTopology,
    available: frozenset[int],
    held_exclusive: Mapping[int, CPUExclusivePolicy],
    request: AllocationRequest,
) -> tuple[int, ...]:
    """``takeCPUs``: ``request.num_cpus`` CPUs out of ``available`` (sorted ascending).

    ``held_exclusive`` maps CPUs already held by other pods to those pods' exclusive policy (only
    PCPULevel and NUMANodeLevel entries matter). ``request.required`` is ignored here; see
    :func:`allocate_cpus`.
    """
    acc = _Accumulator(topo, available, held_exclusive, request)
    if acc.needed < 1:
        return ()
    if acc.needed > len(acc.free):
        raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    full = request.bind_policy is CPUBindPolicy.FULL_PCPUS
    per_core = topo.cpus_per_core
    if full or per_core == 1:
        if acc.needed <= topo.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cores_in_nodes(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(cpus[: acc.needed])
                        return tuple(sorted(acc.result))
        if acc.needed <= topo.cpus_per_socket:
            for cpus in acc.free_cores_in_sockets():
                if len(cpus) >= acc.needed:
                    acc.take(cpus[: acc.needed])
                    return tuple(sorted(acc.result))
        set_aside: list[list[int]] = []
        for cpus in sorted(acc.free_cores_in_sockets(), key=len, reverse=True):
            if acc.needed < len(cpus):
                set_aside.append(cpus)
                continue
            acc.take(cpus)
            if acc.needed < 1:
                return tuple(sorted(acc.result))
        if acc.needed >= per_core:
            for cpus in sorted(set_aside, key=len):
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i : i + per_core])
                    if acc.needed < 1:
                        return tuple(sorted(acc.result))
                    if acc.needed < per_core:
                        break
    if not full:
        if acc.needed <= topo.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_nodes(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return tuple(sorted(acc.result))
        if acc.needed <= topo.cpus_per_socket:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_sockets(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return tuple(sorted(acc.result))
    for filter_exclusive in (True, False):
        for cpu in acc.spread(acc.free_cpus_spread_order(filter_exclusive)):
            if acc.needed >= 1:
                acc.take([cpu])
            if acc.needed < 1:
                return tuple(sorted(acc.result))
    raise AllocationError(ERR_FAILED)


def filter_by_required_policy(topo: CPUTopology, available: frozenset[int], policy: CPUBindPolicy) -> frozenset[int]:
    """``filterCPUsByRequiredCPUBindPolicy``: FullPCPUs keeps fully free cores; SpreadByPCPUs keeps the
    lowest free CPU of every core that has one (a half-used core still offers one)."""
    by_core: dict[int, list[int]] = {}
    for c in sorted(available):
        if c in topo.cpus:
            by_core.setdefault(topo.cpus[c].core, []).append(c)
    if policy is CPUBindPolicy.FULL_PCPUS:
        return frozenset(c for cpus in by_core.values() if len(cpus) == topo.cpus_per_core for c in cpus)
    if policy is CPUBindPolicy.SPREAD_BY_PCPUS:
        return frozenset(cpus[0] for cpus in by_core.values())
    return available


def satisfies_required_policy(topo: CPUTopology, cpus: tuple[int, ...], policy: CPUBindPolicy) -> bool:
    cores = {topo.cpus[c].core for c in cpus}
    if policy is CPUBindPolicy.FULL_PCPUS:
        return len(cores) * topo.cpus_per_core == len(cpus)
    if policy is CPUBindPolicy.SPREAD_BY_PCPUS:
        return len(cores) == len(cpus)
    return True


def allocate_cpus(
    topo: CPUTopology,
    available: frozenset[int],
    held_exclusive: Mapping[int, CPUExclusivePolicy],
    request: AllocationRequest,
) -> tuple[int, ...]:
    """``allocateCPUSet`` without NUMA hints: narrow ``available`` for a required policy, take, verify."""
    return allocate_cpus_preferring(topo, available, held_exclusive, request, frozenset())


def allocate_cpus_preferring(
    topo: CPUTopology,
    available: frozenset[int],
    held_exclusive: Mapping[int, CPUExclusivePolicy],
    request: AllocationRequest,
    preferred: frozenset[int],
) -> tuple[int, ...]:
    """``allocateCPUSet`` with ``takePreferredCPUs``: as many CPUs as possible come from ``preferred``
    (a reservation's CPUs restored to its owner), chosen by the accumulator among them, then the rest
    from the other available CPUs."""
    if request.required:
        available = filter_by_required_policy(topo, available, request.bind_policy)
    if len(available) < request.num_cpus:
        raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    inside = available & preferred
    result: tuple[int, ...] = ()
    if inside:
        result = take_cpus(topo, inside, held_exclusive, replace(request, num_cpus=min(request.num_cpus, len(inside))))
    if len(result) < request.num_cpus:
        rest = take_cpus(
            topo, available - inside, held_exclusive, replace(request, num_cpus=request.num_cpus - len(result))
        )
        result = tuple(sorted(result + rest))
    if request.required and not satisfies_required_policy(topo, result, request.bind_policy):
        raise AllocationError(ERR_REQUIRED_POLICY)
    return result


def allocate_cpus_in_numa(
    topo: CPUTopology,
    available: frozenset[int],
    held_exclusive: Mapping[int, CPUExclusivePolicy],
    request: AllocationRequest,
    per_numa: Mapping[int, int],
) -> tuple[int, ...]:
    """``allocateCPUSet`` with NUMA resources assigned: each NUMA node gives its share of CPUs
    (``per_numa``, a count) from its own available CPUs, and every CPU must come from them."""
    if request.required:
        available = filter_by_required_policy(topo, available, request.bind_policy)
    if len(available) < request.num_cpus:
        raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    result: list[int] = []
    for numa in sorted(per_numa):
        inside = frozenset(c for c in available if topo.cpus[c].node == numa)
        wanted = min(per_numa[numa], len(inside))
        if wanted > 0:
            result.extend(take_cpus(topo, inside, held_exclusive, replace(request, num_cpus=wanted)))
    if len(result) != request.num_cpus:
        raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    cpus = tuple(sorted(result))
    if request.required and not satisfies_required_policy(topo, cpus, request.bind_policy):
        raise AllocationError(ERR_REQUIRED_POLICY)
    return cpus
