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


_NONE: Mapping[str, Holding] = {}


class NodeAllocations:
    """CPUs held per node by bound and assumed pods, keyed by ``namespace/name`` (``resourceManager``'s
    cache keys by uid; simulate files often have none). Every query reads a node's holdings through
    :meth:`holdings`, so that :class:`AllocationsOverlay` can answer them for a changed node."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Holding]] = {}
        self._node_of: dict[str, str] = {}

    def hold(self, node: str, pod_key: str, holding: Holding) -> None:
        self.release(pod_key)
        self._by_node.setdefault(node, {})[pod_key] = holding
        self._node_of[pod_key] = node

    def holds(self, pod_key: str) -> bool:
        return pod_key in self._node_of

    def holdings(self, node: str) -> Mapping[str, Holding]:
        """Holding key → holding on ``node`` (read-only)."""
        return self._by_node.get(node, _NONE)

    def holding(self, node: str, pod_key: str) -> Holding | None:
        return self.holdings(node).get(pod_key)

    def taken_except(self, node: str, pod_key: str) -> frozenset[int]:
        """CPUs held on ``node`` by everyone but ``pod_key``."""
        cpus: set[int] = set()
        for key, holding in self.holdings(node).items():
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
        for holding in self.holdings(node).values():
            cpus |= holding.cpus
            if holding.exclusive is not CPUExclusivePolicy.NONE:
                exclusive.update(dict.fromkeys(holding.cpus, holding.exclusive))
        return frozenset(cpus), exclusive

    def rows(self) -> list[tuple[str, str, frozenset[int]]]:
        return sorted((node, h.pod_key, h.cpus) for node, pods in self._by_node.items() for h in pods.values())

    def numa_allocated(self, node: str) -> dict[int, dict[str, int]]:
        """What bound and assumed pods hold of each NUMA node."""
        total: dict[int, dict[str, int]] = {}
        for holding in self.holdings(node).values():
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
        for holding in self.holdings(node).values():
            used = {topology.cpus[c].node for c in holding.cpus if c in topology.cpus}
            if len(used) > 1:
                shared |= used
            elif used:
                single |= used
        statuses = dict.fromkeys(single, NUMANodeStatus.SINGLE)
        statuses.update(dict.fromkeys(shared, NUMANodeStatus.SHARED))
        return statuses


class AllocationsOverlay(NodeAllocations):
    """A read-only view of ``base`` with one node's holdings changed: the holdings under ``removed`` keys
    left out and the ``added`` ones put in (what a preemption dry run's RemovePod/AddPod did there).
    Every other node reads through to ``base``; only the changed node's map is copied."""

    def __init__(self, base: NodeAllocations, node: str, removed: frozenset[str], added: Mapping[str, Holding]) -> None:
        super().__init__()
        self._base = base
        self._node = node
        changed = {key: h for key, h in base.holdings(node).items() if key not in removed}
        changed.update(added)
        self._changed = changed

    def holdings(self, node: str) -> Mapping[str, Holding]:
        return self._changed if node == self._node else self._base.holdings(node)

    def holds(self, pod_key: str) -> bool:
        return self._base.holds(pod_key)

    def hold(self, node: str, pod_key: str, holding: Holding) -> None:
        raise TypeError("AllocationsOverlay is read-only")

    def release(self, pod_key: str) -> str | None:
        raise TypeError("AllocationsOverlay is read-only")

    def rows(self) -> list[tuple[str, str, frozenset[int]]]:
        return self._base.rows()
