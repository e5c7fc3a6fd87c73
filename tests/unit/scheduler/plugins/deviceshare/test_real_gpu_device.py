"""The Device object koordlet's reporter built from a real NVIDIA H100 through NVML (kept in
``tests/fixtures/devices``) goes the whole way: it parses, the deviceresource controller derives the node's
GPU resources and labels from it, and DeviceShare shares the GPU between pods in ``simulate``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from apis.scheduling.device import parse_device
from koord_scheduler.scheduler.controllers.deviceresource import (
    GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    LABEL_GPU_MODEL,
    device_resources,
    format_amount,
)

REPO = Path(__file__).resolve().parents[5]
SCHEDULER = Path(sys.executable).parent / "koord-scheduler"
FIXTURE = REPO / "tests" / "fixtures" / "devices" / "h100-nvml-device.json"
MI = 1024**2


def real_device() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(FIXTURE.read_text())
    return doc


def test_real_h100_device_parses_into_node_resources() -> None:
    record = parse_device(real_device())
    want = device_resources(record)
    rdma = "koordinator.sh/rdma"  # no RDMA NIC: the resource is removed from the node
    assert want.resources == {GPU_CORE: 100, GPU_MEMORY: 81559 * MI, GPU_MEMORY_RATIO: 100, GPU: 100, rdma: None}
    assert want.labels[LABEL_GPU_MODEL] == "NVIDIA-H100-80GB-HBM3"


def gpu_pod(name: str, core: str, ratio: str) -> dict[str, Any]:
    limits = {"cpu": "1", "memory": "1Gi", GPU_CORE: core, GPU_MEMORY_RATIO: ratio}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits}}]},
    }


def test_simulate_shares_the_real_h100_between_pods(tmp_path: Path) -> None:
    device = real_device()
    node_name = device["metadata"]["name"]
    want = device_resources(parse_device(device))
    allocatable = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    allocatable |= {k: format_amount(k, v) for k, v in want.resources.items() if v is not None}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name, "labels": dict(want.labels)},
        "status": {"allocatable": allocatable},
    }
    pods = [gpu_pod("infer-a", "50", "50"), gpu_pod("infer-b", "50", "50"), gpu_pod("infer-c", "50", "50")]
    cluster = tmp_path / "h100.yaml"
    cluster.write_text(yaml.safe_dump_all([node, device, *pods]))
    cmd = [str(SCHEDULER), "simulate", "--cluster", str(cluster), "-o", "json"]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout)
    placed = {p["name"]: p.get("node") for p in doc["pods"]}
    assert placed == {"infer-a": node_name, "infer-b": node_name, "infer-c": None}
    gpus = {(r["pod"], r["device"]) for r in doc["DeviceShare allocations"]}
    assert gpus == {("default/infer-a", "gpu/0"), ("default/infer-b", "gpu/0")}
