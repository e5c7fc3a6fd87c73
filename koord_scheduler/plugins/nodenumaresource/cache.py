"""CPUs held per node by bound and assumed pods (Koordinator ``resourceManager``'s allocation cache)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.extension.numa import CPUExclusivePolicy
from koord_scheduler.plugins.nodenumaresource.topology import CPUTopology
from koord_scheduler.plugins.nodenumaresource.topology_manager import NUMANodeStatus


@dataclass(slots=True)
class Holding:
    cpus: frozenset[int]
    exclusive: CPUExclusivePolicy
    pod_key: str
    numa: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    """The pod's share of each NUMA node (``numaNodeResources``), in scheduler amounts."""


class NodeAllocations:
    """CPUs held per node by bound and assumed pods, keyed by ``namespace/name`` (``resourceManager``'s
    cache keys by uid; simulate files often have none)."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Holding]] = {}
        self._node_of: dict[str, str] = {}

    def hold(self, node: str, pod_key: str, holding: Holding) -> None:
        self.release(pod_key)
        self._by_node.setdefault(node, {})[pod_key] = holding
        self._node_of[pod_key] = node

    def holds(self, pod_key: str) -> bool:
        return pod_key in self._node_of

    def holding(self, node: str, pod_key: str) -> Holding | None:
        return self._by_node.get(node, {}).get(pod_key)

    def taken_except(self, node: str, pod_key: str) -> frozenset[int]:
        """CPUs held on ``node`` by everyone but ``pod_key``."""
        cpus: set[int] = set()
        for key, holding in self._by_node.get(node, {}).items():
            if key != pod_key:
                cpus |= holding.cpus
        return frozenset(cpus)

    def release(self, pod_key: str) -> str | None:
        node = self._node_of.pop(pod_key, None)
        if node is not None:
            self._by_node.get(node, {}).pop(pod_key, None)
        return node

    def taken(self, node: str) -> tuple[frozenset[int], dict[int, CPUExclusivePolicy]]:
        cpus: set[int] = set()
        exclusive: dict[int, CPUExclusivePolicy] = {}
        for holding in self._by_node.get(node, {}).values():
            cpus |= holding.cpus
            if holding.exclusive is not CPUExclusivePolicy.NONE:
                exclusive.update(dict.fromkeys(holding.cpus, holding.exclusive))
        return frozenset(cpus), exclusive

    def rows(self) -> list[tuple[str, str, frozenset[int]]]:
        return sorted((node, h.pod_key, h.cpus) for node, pods in self._by_node.items() for h in pods.values())

    def numa_allocated(self, node: str) -> dict[int, dict[str, int]]:
        """What bound and assumed pods hold of each NUMA node."""
        total: dict[int, dict[str, int]] = {}
        for holding in self._by_node.get(node, {}).values():
            for numa, amounts in holding.numa.items():
                row = total.setdefault(numa, {})
                for name, amount in amounts.items():
                    row[name] = row.get(name, 0) + amount
        return total

    def numa_status(self, node: str, topology: CPUTopology) -> dict[int, NUMANodeStatus]:
        """``GetAllNUMANodeStatus``: a NUMA node is ``single`` when only single-NUMA cpusets use it,
        ``shared`` when a cpuset spanning several NUMA nodes does, else ``idle`` (cpusets only)."""
        single: set[int] = set()
        shared: set[int] = set()
        for holding in self._by_node.get(node, {}).values():
            used = {topology.cpus[c].node for c in holding.cpus if c in topology.cpus}
            if len(used) > 1:
                shared |= used
            elif used:
                single |= used
        statuses = dict.fromkeys(single, NUMANodeStatus.SINGLE)
        statuses.update(dict.fromkeys(shared, NUMANodeStatus.SHARED))
        return statuses
