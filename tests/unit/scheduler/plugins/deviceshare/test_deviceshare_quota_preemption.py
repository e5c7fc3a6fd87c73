"""ElasticQuota preemption of GPU pods: a node that DeviceShare rejects can be freed by evicting
lower-priority pods of the same quota, and the victims are those whose GPU shares the pod needs
(checked by the Filter chain with DeviceShare's RemovePod/AddPod, not by arithmetic over gpu-core)."""

from __future__ import annotations

import json

from apis.config import parse_scheduler_config
from koord_scheduler.app.simulate import run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.unit.scheduler.plugins.deviceshare.gpu_objects import gpu_node, gpu_pod

NOW = 1_800_000_000.0
QUOTA = {"quota.scheduling.koordinator.sh/name": "ml"}
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: DeviceShare
    preFilter:
      enabled:
      - name: ElasticQuota
    postFilter:
      disabled:
      - name: '*'
      enabled:
      - name: ElasticQuota
    reserve:
      enabled:
      - name: ElasticQuota
"""


def quota() -> str:
    return json.dumps(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "ml", "namespace": "default"},
            "spec": {"min": {"cpu": "100", "memory": "1Ti"}, "max": {"cpu": "100", "memory": "1Ti"}},
        }
    )


async def test_quota_preemption_evicts_the_half_gpu_pods_of_one_gpu() -> None:
    objects = [
        *gpu_node("gpu-1", 2),
        quota(),
        gpu_pod("half-0a", 10, percent=50, node="gpu-1", minors=(0,), created="2024-01-01T00:00:00Z", labels=QUOTA),
        gpu_pod("half-1a", 10, percent=50, node="gpu-1", minors=(1,), created="2024-01-01T00:01:00Z", labels=QUOTA),
        gpu_pod("half-0b", 10, percent=50, node="gpu-1", minors=(0,), created="2024-01-01T00:02:00Z", labels=QUOTA),
        gpu_pod("half-1b", 10, percent=50, node="gpu-1", minors=(1,), created="2024-01-01T00:03:00Z", labels=QUOTA),
        gpu_pod("train", 1000, labels=QUOTA),
    ]
    result, scheduler = await run_simulation(
        None, parse_scheduler_config(CONFIG), in_tree_registry(), now=NOW, cluster_text="\n---\n".join(objects)
    )
    assert {p.name: (p.node, p.message) for p in result.placements} == {"train": ("gpu-1", "")}
    cluster = scheduler.source
    assert isinstance(cluster, MemoryCluster)
    survivors = {k for k in cluster.pods if k.startswith("default/half-")}
    assert survivors == {"default/half-0a", "default/half-0b"}
    gpus = {(r["pod"], r["device"]) for r in result.extra_sections["DeviceShare allocations"]}
    assert gpus == {("default/train", "gpu/1")}
