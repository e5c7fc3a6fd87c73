"""``koord-scheduler simulate`` with Device objects in the cluster file: the default profile runs
DeviceShare, and the output shows which GPU each pod got."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[5]
SCHEDULER = Path(sys.executable).parent / "koord-scheduler"


def test_simulate_gpu_cluster_shows_gpu_per_pod() -> None:
    cmd = [str(SCHEDULER), "simulate", "--cluster", "config/simulate/gpu-cluster.yaml", "-o", "json"]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout)
    placed = {p["name"]: p.get("node") for p in doc["pods"]}
    assert placed["train-two"] == "gpu-a"
    assert placed["infer-half"] == placed["infer-8gi"] == "gpu-b"
    assert placed["train-too-big"] is None and placed["bad-request"] is None
    gpus = {(r["pod"], r["device"]) for r in doc["DeviceShare allocations"]}
    assert gpus == {
        ("default/train-two", "gpu/0"),
        ("default/train-two", "gpu/1"),
        ("default/infer-half", "gpu/0"),
        ("default/infer-8gi", "gpu/0"),
    }
    devices = {(r["node"], r["type"]): r["healthy"] for r in doc["Devices"]}
    assert devices == {("gpu-a", "gpu"): "2/2", ("gpu-a", "rdma"): "1/1", ("gpu-b", "gpu"): "1/2"}
    reasons = {p["name"]: p["message"] for p in doc["pods"]}
    assert "invalid resource device requests: [koordinator.sh/gpu-core]" in reasons["bad-request"]


async def test_simulate_joint_gpu_and_rdma_with_vfs() -> None:
    """config/simulate/rdma-cluster.yaml: GPUs and the NIC under the same PCIe switch, with a VF each."""
    from apis.config import load_scheduler_config
    from koord_scheduler.app.simulate import run_simulation
    from koord_scheduler.plugins.registry import in_tree_registry
    from koord_scheduler.scheduler.memory_source import MemoryCluster

    config = load_scheduler_config(REPO / "config/simulate/scheduler-config.yaml")
    result, scheduler = await run_simulation(
        REPO / "config/simulate/rdma-cluster.yaml", config, in_tree_registry(), now=1_800_000_000.0
    )
    placed = {p.name: (p.node, p.message) for p in result.placements}
    assert placed["train-a"] == placed["train-b"] == placed["vf-only"] == ("gpu-rdma-1", "")
    assert placed["whole-nic"][0] is None and "Insufficient rdma devices" in placed["whole-nic"][1]
    rows = {(r["pod"], r["device"]): r["resources"] for r in result.extra_sections["DeviceShare allocations"]}
    assert sorted(d for p, d in rows if p == "default/train-a") == ["gpu/0", "gpu/1", "rdma/0"]
    assert sorted(d for p, d in rows if p == "default/train-b") == ["gpu/2", "gpu/3", "rdma/1"]
    assert rows[("default/train-a", "rdma/0")] == "rdma=1 vf=0000:1f:00.2"
    assert rows[("default/train-b", "rdma/1")] == "rdma=1 vf=0000:40:00.2"
    assert rows[("default/vf-only", "rdma/0")] == "rdma=1 vf=0000:1f:00.3"
    cluster = scheduler.source
    assert isinstance(cluster, MemoryCluster)
    allocated = json.loads(cluster.pods["default/train-a"].annotations["scheduling.koordinator.sh/device-allocated"])
    assert allocated["rdma"] == [
        {
            "minor": 0,
            "resources": {"koordinator.sh/rdma": "1"},
            "extension": {"vfs": [{"minor": -1, "busID": "0000:1f:00.2"}]},
        }
    ]
