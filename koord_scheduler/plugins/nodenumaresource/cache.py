"""CPUs held per node by bound and assumed pods (Koordinator ``resourceManager``'s allocation cache)."""

from __future__ import annotations

from dataclasses import dataclass

from apis.extension.numa import CPUExclusivePolicy


@dataclass(slots=True)
class Holding:
    cpus: frozenset[int]
    exclusive: CPUExclusivePolicy
    pod_key: str


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
