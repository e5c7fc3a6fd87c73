"""Nominated pods: pending pods that preemption promised a node to.

kube-scheduler's ``PodNominator`` (``backend/queue/nominator.go``). A pod is nominated to a node when its
``status.nominatedNodeName`` is set, or when a PostFilter plugin (DefaultPreemption) returned the node for
it in this process (the status write may lag). The nomination ends when the pod is assumed, bound or
deleted, or when a later update or PostFilter result clears it. The Filter pass that protects these pods
is the framework's (:meth:`~koord_scheduler.framework.filter_phase.FilterPhase.filter_with_nominated_pods`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from apis.core.types import Pod
from koord_scheduler.framework.filter_phase import yielded_to


class PodNominator:
    """Pod key -> the node it is nominated to, and node -> the nominated pods (in nomination order)."""

    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._by_node: dict[str, dict[str, Pod]] = {}

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name`` (default: its ``nominated_node_name``); "" with no
        status nomination removes it. A pod that is bound is never nominated."""
        self.delete(pod)
        node = node_name or pod.nominated_node_name
        if not node or pod.node_name:
            return
        self._node_of[pod.key] = node
        self._by_node.setdefault(node, {})[pod.key] = pod

    def update(self, old: Pod | None, new: Pod) -> None:
        """A pending pod changed. Keeps an in-memory nomination when neither version carries one in
        its status (the PostFilter result is newer than the watch), as upstream's ``UpdateNominatedPod``."""
        if new.node_name:
            self.delete(new)
            return
        node = new.nominated_node_name
        old_status = old.nominated_node_name if old is not None else ""
        if not node and not old_status:
            node = self._node_of.get(new.key, "")
        self.add(new, node)

    def delete(self, pod: Pod) -> None:
        node = self._node_of.pop(pod.key, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(pod.key, None)
            if not pods:
                del self._by_node[node]

    def node_of(self, key: str) -> str:
        return self._node_of.get(key, "")

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]:
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def by_node(self) -> Iterator[tuple[str, Iterable[Pod]]]:
        """Node -> its nominated pods, without copying: do not change the nominator while iterating."""
        for node, pods in self._by_node.items():
            yield node, pods.values()

    def nodes(self) -> Iterator[tuple[str, list[Pod]]]:
        for node, pods in self._by_node.items():
            yield node, list(pods.values())

    def __len__(self) -> int:
        return len(self._node_of)

    def __bool__(self) -> bool:
        return bool(self._node_of)


__all__ = ["PodNominator", "yielded_to"]
