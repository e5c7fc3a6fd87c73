"""Which cpuset each container gets (Koordinator ``pkg/koordlet/runtimehooks/hooks/cpuset/rule.go``
``getContainerCPUSet``), as a pure function. First match wins:

1. the pod's resource-status has a ``cpuset``: that set (LSE and LSR pods bound by the scheduler);
2. the pod has NUMA resources (``numaNodeResources`` with cpu): the LS pools of those NUMA nodes, for
   non-BE pods;
3. raw QoS ``SYSTEM`` and a system-QoS cpuset: that cpuset;
4. raw QoS ``LS``: the whole LS pool;
5. Kubernetes ``BestEffort``: ``None``, left alone (CPU suppress owns BE cpusets);
6. kubelet ``static`` policy: ``None`` (the kubelet's cpuset stays); otherwise the whole LS pool.

``None`` and ``""`` mean "do not write": an empty ``cpuset.cpus`` is refused by cgroup v1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.extension.constants import LABEL_POD_QOS
from apis.extension.numa import AnnotationError, CPUSharedPool, format_cpuset, parse_cpuset, resource_status_of
from apis.extension.qos import KubeQOSClass
from koordlet.statesinformer.pods import PodMeta


@dataclass(frozen=True, slots=True)
class CPUSetRule:
    """The node-wide inputs: the LS pool per NUMA node, the kubelet policy, the system-QoS cpuset."""

    ls_pools: tuple[CPUSharedPool, ...]
    kubelet_static: bool = False
    system_qos_cpuset: str = ""

    def whole_ls_pool(self) -> str:
        cpus: set[int] = set()
        for pool in self.ls_pools:
            cpus |= parse_cpuset(pool.cpuset)
        return format_cpuset(cpus)


def container_cpuset(pod: PodMeta, rule: CPUSetRule) -> str | None:
    """The ``cpuset.cpus`` for every container of ``pod``; ``None`` to leave them alone."""
    try:
        status = resource_status_of(pod.annotations, f"pod {pod.namespace}/{pod.name}")
    except AnnotationError:
        status = None
    if status is not None and status.cpuset:
        return status.cpuset
    raw_qos = pod.labels.get(LABEL_POD_QOS, "")
    if status is not None and raw_qos != "BE":
        nodes = {r.node for r in status.numa_node_resources if _has_cpu(r.resources)}
        if nodes:
            cpus: set[int] = set()
            for pool in rule.ls_pools:
                if pool.node in nodes:
                    cpus |= parse_cpuset(pool.cpuset)
            return format_cpuset(cpus) or None
    if raw_qos == "SYSTEM" and rule.system_qos_cpuset:
        return rule.system_qos_cpuset
    if raw_qos == "LS":
        return rule.whole_ls_pool() or None
    if pod.kube_qos is KubeQOSClass.BEST_EFFORT:
        return None
    if rule.kubelet_static:
        return None
    return rule.whole_ls_pool() or None


def _has_cpu(resources: Mapping[str, str]) -> bool:
    return any(resources.get(name, "0") not in ("0", "") for name in ("cpu", "kubernetes.io/batch-cpu"))


def unset_cfs_quota(pod: PodMeta) -> bool:
    """Pods with a bound cpuset run without a CFS quota (the quota would throttle them on their own CPUs)."""
    try:
        return bool(resource_status_of(pod.annotations).cpuset)
    except AnnotationError:
        return False
