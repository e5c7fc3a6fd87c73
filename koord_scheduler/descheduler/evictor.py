"""Which pods the descheduler may move, and whether a pod fits a node: the parts of Koordinator's
DefaultEvictor filter (``pkg/descheduler/framework/plugins/kubernetes/defaultevictor``) and
``pkg/descheduler/node.NodeFit`` that pykoord implements.

A pod is evictable when it is bound, not terminating, not a mirror or static pod, not owned by a
DaemonSet, has a controller (a bare pod would not come back), is not system-critical (priority at least
2000000000, or ``system-cluster-critical``/``system-node-critical``), has no local storage (``emptyDir``
or ``hostPath``... as the pod's volumes record them: not checked here, see docs/descheduling.md), is in a
namespace the MigrationController's ``namespaces`` allow, and no active PodMigrationJob targets it.

A pod fits a node when the node is schedulable, the pod's ``nodeSelector`` and required node affinity
match it, its taints (NoSchedule, NoExecute) are tolerated, and its free allocatable (minus the
requests of the pods on it) holds the pod's requests.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from apis.core.selectors import node_selector_map_matches, node_selector_matches
from apis.core.tolerations import find_untolerated_taint
from apis.core.types import Node, Pod

SYSTEM_CRITICAL_PRIORITY: Final = 2_000_000_000
CRITICAL_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"


@dataclass(frozen=True, slots=True)
class EvictionFilter:
    """``namespaces_include``/``namespaces_exclude``: the MigrationController's ``namespaces``;
    ``migrating``: keys of pods an unfinished PodMigrationJob already moves."""

    namespaces_include: frozenset[str] = frozenset()
    namespaces_exclude: frozenset[str] = frozenset()
    migrating: Collection[str] = field(default_factory=frozenset)

    def reason(self, pod: Pod) -> str:
        """Why ``pod`` may not be moved; empty when it may."""
        if not pod.node_name:
            return "not bound"
        if pod.meta.deletion_timestamp is not None:
            return "terminating"
        if MIRROR_ANNOTATION in pod.meta.annotations:
            return "a mirror pod"
        controllers = [o for o in pod.meta.owner_references if o.controller]
        if not controllers:
            return "no controller (a bare pod)"
        if any(o.kind == "DaemonSet" for o in controllers):
            return "owned by a DaemonSet"
        if pod.priority >= SYSTEM_CRITICAL_PRIORITY or pod.priority_class_name in CRITICAL_CLASSES:
            return "system-critical"
        if self.namespaces_include and pod.namespace not in self.namespaces_include:
            return f"namespace {pod.namespace} is not included"
        if pod.namespace in self.namespaces_exclude:
            return f"namespace {pod.namespace} is excluded"
        if pod.key in self.migrating:
            return "already being migrated"
        return ""

    def __call__(self, pod: Pod) -> bool:
        return not self.reason(pod)


def requested(pods: Sequence[Pod]) -> dict[str, int]:
    out: dict[str, int] = {"pods": len(pods)}
    for pod in pods:
        for name, amount in pod.requests.items():
            out[name] = out.get(name, 0) + amount
    return out


def fits_node(pod: Pod, node: Node, node_requested: Mapping[str, int]) -> bool:
    """Koordinator's ``NodeFit`` as described in the module docstring."""
    if node.unschedulable:
        return False
    if not node_selector_map_matches(pod.node_selector, node.meta.labels):
        return False
    affinity = pod.affinity.node_affinity if pod.affinity is not None else None
    if (
        affinity is not None
        and affinity.required is not None
        and not node_selector_matches(affinity.required, node.meta.labels, node.name)
    ):
        return False
    if find_untolerated_taint(node.taints, pod.tolerations) is not None:
        return False
    if node_requested.get("pods", 0) + 1 > node.allocatable.get("pods", 110):
        return False
    return all(
        node_requested.get(name, 0) + amount <= node.allocatable.get(name, 0)
        for name, amount in pod.requests.items()
        if amount > 0
    )
