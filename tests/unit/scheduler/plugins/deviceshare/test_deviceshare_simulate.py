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
