"""Which pods the descheduler may move, and whether a pod fits a node: the parts of Koordinator's
DefaultEvictor filter (``pkg/descheduler/framework/plugins/kubernetes/defaultevictor``) and
``pkg/descheduler/node.NodeFit`` that pykoord implements.

A pod is evictable when it is bound, not terminating, not a mirror or static pod, not owned by a
DaemonSet, has a controller (a bare pod would not come back; ``evictAllBarePods`` lets any bare pod go,
``evictFailedBarePods`` a Failed one), is not system-critical (priority at least 2000000000, or
``system-cluster-critical``/``system-node-critical``; ``evictSystemCriticalPods`` lets them go) and its
priority is under ``priorityThreshold.value`` (checked only when system-critical pods are protected, as
upstream), mounts no PersistentVolumeClaim when ``ignorePvcPods``, matches ``labelSelector`` when set, does
not carry the maximum ``eviction-cost`` (2147483647), is in a namespace the MigrationController's
``namespaces`` allow, mounts no ``emptyDir`` or ``hostPath`` volume unless ``evictLocalStoragePods``, runs
under one of ``schedulerNames`` when they are set and the default job mode is ``ReservationFirst``
(Koordinator's ``reservationFilter``: only those schedulers place the Reservation), and no active
PodMigrationJob targets it. Each check named in ``skipEvictionGates`` is skipped (:func:`eviction_filter`).

A pod fits a node when the node is schedulable, the pod's ``nodeSelector`` and required node affinity
match it, its taints (NoSchedule, NoExecute) are tolerated, and its free allocatable (minus the
requests of the pods on it) holds the pod's requests.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from apis.config.descheduler import MigrationControllerArgs
from apis.core.parse import parse_label_selector
from apis.core.selectors import label_selector_matches, node_selector_map_matches, node_selector_matches
from apis.core.tolerations import find_untolerated_taint
from apis.core.types import LabelSelector, Node, Pod
from apis.scheduling.migration import MODE_RESERVATION_FIRST

SYSTEM_CRITICAL_PRIORITY: Final = 2_000_000_000
CRITICAL_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
EVICTION_COST_ANNOTATION: Final = "scheduling.koordinator.sh/eviction-cost"
MAX_EVICTION_COST: Final = "2147483647"


@dataclass(frozen=True, slots=True)
class EvictionFilter:
    """``namespaces_include``/``namespaces_exclude``: the MigrationController's ``namespaces``;
    ``migrating``: keys of pods an unfinished PodMigrationJob already moves."""

    namespaces_include: frozenset[str] = frozenset()
    namespaces_exclude: frozenset[str] = frozenset()
    migrating: Collection[str] = field(default_factory=frozenset)
    evict_all_bare_pods: bool = False
    evict_failed_bare_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold: int | None = None
    label_selector: LabelSelector | None = None
    """None: every pod (the selector is not set)."""
    evict_local_storage_pods: bool = False
    scheduler_names: frozenset[str] = frozenset()
    """Empty: any scheduler."""

    def reason(self, pod: Pod) -> str:
        """Why ``pod`` may not be moved; empty when it may."""
        if not pod.node_name:
            return "not bound"
        if pod.meta.deletion_timestamp is not None:
            return "terminating"
        if MIRROR_ANNOTATION in pod.meta.annotations:
            return "a mirror pod"
        controllers = [o for o in pod.meta.owner_references if o.controller]
        if not controllers and not (
            self.evict_all_bare_pods or (self.evict_failed_bare_pods and pod.phase == "Failed")
        ):
            return "no controller (a bare pod)"
        if any(o.kind == "DaemonSet" for o in controllers):
            return "owned by a DaemonSet"
        if not self.evict_system_critical_pods:
            if pod.priority >= SYSTEM_CRITICAL_PRIORITY or pod.priority_class_name in CRITICAL_CLASSES:
                return "system-critical"
            if self.priority_threshold is not None and pod.priority >= self.priority_threshold:
                return f"priority {pod.priority} is not under the threshold {self.priority_threshold}"
        if not self.evict_local_storage_pods and pod.local_storage:
            return "mounts local storage (emptyDir or hostPath)"
        if self.ignore_pvc_pods and pod.pvc_names:
            return "mounts a PersistentVolumeClaim"
        if self.label_selector is not None and not label_selector_matches(self.label_selector, pod.labels):
            return "does not match the labelSelector"
        if pod.annotations.get(EVICTION_COST_ANNOTATION, "").strip() == MAX_EVICTION_COST:
            return "its eviction cost is the maximum"
        if self.namespaces_include and pod.namespace not in self.namespaces_include:
            return f"namespace {pod.namespace} is not included"
        if pod.namespace in self.namespaces_exclude:
            return f"namespace {pod.namespace} is excluded"
        if self.scheduler_names and pod.scheduler_name not in self.scheduler_names:
            return f"its scheduler {pod.scheduler_name} is not one of schedulerNames"
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


GATE_BARE_PODS: Final = "BarePods"
GATE_SYSTEM_CRITICAL: Final = "SystemCritical"
GATE_PRIORITY_THRESHOLD: Final = "PriorityThreshold"
GATE_PVC: Final = "PVC"
GATE_LABEL_SELECTOR: Final = "LabelSelector"
GATE_NAMESPACES: Final = "Namespaces"
GATE_LOCAL_STORAGE: Final = "LocalStorage"
GATE_NODE_FIT: Final = "NodeFit"


def eviction_filter(args: MigrationControllerArgs, migrating: Collection[str] = ()) -> EvictionFilter:
    """The MigrationController's eviction gates from its args, each one named in ``skipEvictionGates``
    skipped (Koordinator ``arbitrator/filter.go`` ``initFilters``: a skipped gate lets every pod through)."""
    skip = frozenset(args.skip_eviction_gates or ())
    ns = args.namespaces if GATE_NAMESPACES not in skip else None
    threshold = (args.priority_threshold or {}).get("value")
    selector = None
    if args.label_selector is not None and GATE_LABEL_SELECTOR not in skip:
        selector = parse_label_selector(args.label_selector.model_dump(by_alias=True, exclude_none=True))
    return EvictionFilter(
        frozenset(ns.include or []) if ns else frozenset(),
        frozenset(ns.exclude or []) if ns else frozenset(),
        frozenset(migrating),
        evict_all_bare_pods=args.evict_all_bare_pods or GATE_BARE_PODS in skip,
        evict_failed_bare_pods=args.evict_failed_bare_pods or GATE_BARE_PODS in skip,
        evict_system_critical_pods=args.evict_system_critical_pods or GATE_SYSTEM_CRITICAL in skip,
        ignore_pvc_pods=args.ignore_pvc_pods and GATE_PVC not in skip,
        priority_threshold=int(threshold) if threshold is not None and GATE_PRIORITY_THRESHOLD not in skip else None,
        label_selector=selector,
        evict_local_storage_pods=args.evict_local_storage_pods or GATE_LOCAL_STORAGE in skip,
        scheduler_names=frozenset(args.scheduler_names or ())
        if (args.default_job_mode or MODE_RESERVATION_FIRST) == MODE_RESERVATION_FIRST
        else frozenset(),
    )


def node_fit_enabled(args: MigrationControllerArgs) -> bool:
    """``nodeFit``, unless ``skipEvictionGates`` names ``NodeFit``."""
    return args.node_fit and GATE_NODE_FIT not in (args.skip_eviction_gates or ())


def fits_other_node(pod: Pod, nodes: Sequence[Node], node_requested: Mapping[str, Mapping[str, int]]) -> bool:
    """sigs.k8s.io/descheduler ``PodFitsAnyOtherNode``: ``pod`` fits (:func:`fits_node`) a node other than
    its own; ``node_requested``: node name -> the requests of the pods on it."""
    return any(node.name != pod.node_name and fits_node(pod, node, node_requested.get(node.name, {})) for node in nodes)
