"""Job-level preemption (Coscheduling ``enablePreemption``) of GPU pods: the dry run places the gang's
members one after another, and each placed member holds the GPU DeviceShare would give it, so the
victims free a GPU for every member."""

from __future__ import annotations

from apis.config import parse_scheduler_config
from koord_scheduler.app.simulate import run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.unit.scheduler.plugins.deviceshare.gpu_objects import gpu_node, gpu_pod

NOW = 1_800_000_000.0
GANG = "gang.scheduling.koordinator.sh/"
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      - name: DeviceShare
    postFilter:
      disabled:
      - name: '*'
      enabled:
      - name: Coscheduling
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
"""


async def test_gang_of_gpu_pods_preempts_one_gpu_per_member() -> None:
    members = {GANG + "name": "train", GANG + "min-available": "2"}
    objects = [
        *gpu_node("gpu-1", 2),
        # Half-GPU pods: NodeResourcesFit sees only the members' nvidia.com/gpu, so DeviceShare alone
        # decides; without the first member holding its GPU, low-a would look spare.
        gpu_pod("low-a", 0, percent=50, node="gpu-1", minors=(0,), created="2024-01-01T00:00:00Z"),
        gpu_pod("low-b", 0, percent=50, node="gpu-1", minors=(1,), created="2024-01-01T00:01:00Z"),
        gpu_pod("g0", 100, annotations=members),
        gpu_pod("g1", 100, annotations=members),
    ]
    result, scheduler = await run_simulation(
        None, parse_scheduler_config(CONFIG), in_tree_registry(), now=NOW, cluster_text="\n---\n".join(objects)
    )
    placements = {p.name: p.node for p in result.placements}
    assert placements == {"g0": "gpu-1", "g1": "gpu-1"}
    (record,) = result.extra_sections["JobPreemptions"]
    assert sorted(record["victims"]) == ["default/low-a", "default/low-b"]
    cluster = scheduler.source
    assert isinstance(cluster, MemoryCluster)
    assert not {"default/low-a", "default/low-b"} & set(cluster.pods)
    gpus = sorted(r["device"] for r in result.extra_sections["DeviceShare allocations"])
    assert gpus == ["gpu/0", "gpu/1"]
