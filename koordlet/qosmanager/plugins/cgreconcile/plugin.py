"""``CgroupReconcile``: every ``--reconcile-interval-seconds`` (1 s) apply memory QoS for classes whose
NodeSLO ``memoryQOS.enable`` is true. (BE pods' CPU and memory limits from their batch resources are the
``BatchResource`` strategy's, as in Koordinator, where that is a runtime hook with its own gate.)

Writes go through the executor's leveled update (pod widened first, exact values child first), so a
container is never briefly allowed more than its pod. Memory QoS files this kernel lacks (``memory.min``
and friends on upstream cgroup v1) are found once, by probing the kubepods cgroup, and skipped quietly.
"""

from __future__ import annotations

import argparse
from functools import partial

from apis.extension import RESOURCE_BATCH_MEMORY, KubeQOSClass, QoSClass
from apis.slo.nodeslo import MemoryQOSCfg, NodeSLOSpec, ResourceQOS
from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginEntry
from koordlet.qosmanager.plugins.cgreconcile.policy import (
    NAME,
    memory_qos_fields,
    memory_qos_updates,
    memory_qos_values,
)
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag
from koordlet.statesinformer import PodMeta

MEMORY_QOS_FILES = (
    "memory.min",
    "memory.low",
    "memory.high",
    "memory.wmark_ratio",
    "memory.wmark_scale_factor",
    "memory.wmark_min_adj",
    "memory.priority",
    "memory.use_priority_oom",
    "memory.oom.group",
)


def memory_qos_config(slo: NodeSLOSpec, pod: PodMeta) -> MemoryQOSCfg | None:
    """The class's memory QoS when enabled (LSE/LSR → LSR class, LS/none → LS, BE → BE)."""
    strategy = slo.resource_qos_strategy
    if strategy is None:
        return None
    by_class: dict[QoSClass, ResourceQOS | None] = {
        QoSClass.LSE: strategy.lsr_class,
        QoSClass.LSR: strategy.lsr_class,
        QoSClass.LS: strategy.ls_class,
        QoSClass.BE: strategy.be_class,
        QoSClass.NONE: strategy.ls_class,
    }
    qos = QoSClass.BE if pod.is_be else pod.qos
    resource_qos = by_class.get(qos)
    cfg = resource_qos.memory_qos if resource_qos else None
    return cfg if cfg is not None and cfg.enable else None


class CgroupReconcile(Strategy):
    NAME = NAME
    INTERVAL_FLAG = "reconcile_interval_seconds"

    def __init__(self) -> None:
        super().__init__()
        self._supported: frozenset[str] | None = None

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(
            parser,
            "--reconcile-interval-seconds",
            type=positive_seconds,
            default=1.0,
            help="CPUBurst/CgroupReconcile tick",
        )

    def supported_memory_files(self) -> frozenset[str]:
        """Memory QoS files present in the kubepods cgroup (probed once it exists)."""
        if self._supported is not None:
            return self._supported
        fs = self.ctx.executor.cgroupfs
        kubepods = fs.layout.kubepods_dir
        if not fs.exists(kubepods, "memory"):
            return frozenset()
        self._supported = frozenset(f for f in MEMORY_QOS_FILES if fs.read_raw(f, kubepods) is not None)
        return self._supported

    def tick(self) -> None:
        slo = self.ctx.states_informer.node_slo
        supported = self.supported_memory_files()
        if not supported:
            return
        self.apply([], leveled=[self.qos_level_updates(slo, supported)])
        for pod in self.ctx.states_informer.get_all_pods():
            if pod.phase not in ("Running", "Pending", ""):
                continue
            cfg = memory_qos_config(slo, pod)
            if cfg is not None:
                self.contain(f"pod {pod.namespace}/{pod.name}", partial(self.apply_memory_qos, pod, cfg, supported))

    def qos_level_updates(self, slo: NodeSLOSpec, supported: frozenset[str]) -> list[ResourceUpdate]:
        """Priority, priority OOM and OOM group of the kube-QoS cgroups from their classes' memory QoS."""
        strategy = slo.resource_qos_strategy
        if strategy is None:
            return []
        layout = self.ctx.executor.cgroupfs.layout
        out: list[ResourceUpdate] = []
        for kube_qos, resource_qos in (
            (KubeQOSClass.GUARANTEED, strategy.lsr_class),
            (KubeQOSClass.BURSTABLE, strategy.ls_class),
            (KubeQOSClass.BEST_EFFORT, strategy.be_class),
        ):
            cfg = resource_qos.memory_qos if resource_qos else None
            if cfg is None or not cfg.enable:
                continue
            rel = layout.qos_dir(kube_qos)
            fields = memory_qos_fields(cfg, qos_level=True)
            out += [ResourceUpdate(name, rel, str(value), NAME) for name, value in fields.items() if name in supported]
        return out

    def apply_memory_qos(self, pod: PodMeta, cfg: MemoryQOSCfg, supported: frozenset[str]) -> None:
        fs = self.ctx.executor.cgroupfs
        node = self.ctx.states_informer.node
        allocatable = node.allocatable.get("memory", 0) if node else 0
        resource = RESOURCE_BATCH_MEMORY if pod.is_be else "memory"
        pod_level, container_level = [], []
        pod_request = sum(c.requests.get(resource, 0) for c in pod.containers)
        pod_values = memory_qos_values(pod_request, -1, cfg)
        fields = memory_qos_fields(cfg)
        pod_level += memory_qos_updates(pod.cgroup_dir, pod_values, container=False, supported=supported, fields=fields)
        for c in pod.containers:
            rel = pod.container_dir(fs.layout, c)
            if rel is None:
                continue
            limit = c.limits.get(resource, 0) or allocatable
            values = memory_qos_values(c.requests.get(resource, 0), limit, cfg)
            container_level += memory_qos_updates(rel, values, container=True, supported=supported, fields=fields)
        self.apply([], leveled=[pod_level, container_level])


ENTRY = PluginEntry(NAME, CgroupReconcile, KOORDLET_FEATURES[NAME])
