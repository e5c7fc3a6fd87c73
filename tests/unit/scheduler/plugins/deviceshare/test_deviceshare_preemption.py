"""Preemption of GPU pods: DeviceShare's PreFilterExtensions give a victim's GPU shares back in the
dry run (Koordinator ``deviceshare/plugin.go`` AddPod/RemovePod, ``preemptibleDevices``), so a
higher-priority GPU pod preempts exactly the pods whose GPUs it needs."""

from __future__ import annotations

from pathlib import Path

from apis.config import load_scheduler_config
from koord_scheduler.app.simulate import run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.memory_source import MemoryCluster

REPO = Path(__file__).resolve().parents[5]
NOW = 1_800_000_000.0


async def test_whole_gpu_pod_preempts_the_half_gpu_pods_of_one_gpu() -> None:
    cluster_file = REPO / "config/simulate/gpu-preemption-cluster.yaml"
    config = load_scheduler_config(REPO / "config/simulate/scheduler-config.yaml")  # simulate's default profile
    result, scheduler = await run_simulation(cluster_file, config, in_tree_registry(), now=NOW)
    placements = {p.name: (p.node, p.message) for p in result.placements}
    assert placements == {"train": ("gpu-1", "")}
    assert result.extra_sections["Preemptions"] == [
        {"preemptor": "default/train", "node": "gpu-1", "victims": ["default/half-1a", "default/half-1b"]}
    ]
    cluster = scheduler.source
    assert isinstance(cluster, MemoryCluster)
    assert {"default/half-0a", "default/half-0b", "default/cpu-only"} <= set(cluster.pods)
    assert not {"default/half-1a", "default/half-1b"} & set(cluster.pods)
    gpus = {(r["pod"], r["device"]) for r in result.extra_sections["DeviceShare allocations"]}
    assert gpus == {("default/train", "gpu/1")}
