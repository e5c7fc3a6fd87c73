"""``CPUNormalization`` (Alpha, off by default): LS pods' CFS quota scaled by the node's CPU normalization
ratio. New containers get it at creation through NRI (``koordlet.runtimehooks``); this reconciler keeps it
on running pods every ``--runtime-hooks-reconcile-interval`` and right after a pod or node change, with the
same function (:func:`~.policy.normalize`)."""

from __future__ import annotations

from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.framework import PluginEntry
from koordlet.qosmanager.plugins.batchresource.policy import batch_rule
from koordlet.qosmanager.plugins.cpunormalization.policy import NAME, normalized_quotas
from koordlet.qosmanager.plugins.hookreconcile import HookReconciler


class CPUNormalization(HookReconciler):
    NAME = NAME

    def tick(self) -> None:
        informer = self.ctx.states_informer
        node = informer.node
        if node is None:
            return
        ratio = batch_rule(informer.node_slo, node.annotations).normalization_ratio
        layout = self.ctx.executor.cgroupfs.layout
        pod_level: list[ResourceUpdate] = []
        container_level: list[ResourceUpdate] = []
        for pod in informer.get_all_pods():
            if pod.phase not in ("Running", "Pending", ""):
                continue
            quotas = normalized_quotas(pod, ratio)
            if quotas is None:
                continue
            if quotas.pod is not None:
                pod_level.append(ResourceUpdate("cpu.cfs_quota_us", pod.cgroup_dir, str(quotas.pod), NAME))
            for container in pod.containers:
                rel = pod.container_dir(layout, container)
                if rel is not None and container.name in quotas.containers:
                    value = str(quotas.containers[container.name])
                    container_level.append(ResourceUpdate("cpu.cfs_quota_us", rel, value, NAME))
        self.apply([], leveled=[pod_level, container_level])


ENTRY = PluginEntry(NAME, CPUNormalization, KOORDLET_FEATURES[NAME])
