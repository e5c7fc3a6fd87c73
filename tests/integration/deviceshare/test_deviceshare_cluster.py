"""DeviceShare against the real API server, as Koordinator's fine-grained device scheduling manual goes:
a node with one GPU (its Device object created by hand, node allocatable as koord-manager would set it),
a pod asking for half of it is bound with ``scheduling.koordinator.sh/device-allocated``, and a pod
asking for a whole GPU no longer fits and is unschedulable with the device reason."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRD = REPO / "deploy" / "crds" / "scheduling.koordinator.sh_devices.yaml"
DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
ALLOCATED = "scheduling.koordinator.sh/device-allocated"
POINTS = ("preFilter", "filter", "preScore", "reserve", "preBind")
PLUGINS: dict[str, Any] = {p: {"enabled": [{"name": "DeviceShare"}]} for p in POINTS}
PLUGINS["score"] = {"enabled": [{"name": "DeviceShare", "weight": 1}]}


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "gpu")
    result = control_plane.request(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        yaml.safe_load(CRD.read_text().split("---", 1)[1]),
    )
    assert result.status in (201, 409), result.body[:300]
    wait_until(lambda: control_plane.request("GET", DEVICES).status == 200, timeout=30, what="CRD served")
    yield s
    for node in s.nodes:
        control_plane.request("DELETE", f"{DEVICES}/{node}")
    s.cleanup()


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def gpu_pod(scope: Scope, name: str, limits: dict[str, str]) -> dict[str, Any]:
    body = scope.pod_body(name)
    body["spec"]["containers"][0]["resources"]["limits"] = limits
    return body


def scheduled_condition(scope: Scope, name: str) -> dict[str, Any] | None:
    for c in scope.pod(name).get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def test_manual_gpu_share_then_whole_gpu_does_not_fit(scope: Scope, scheduler: SchedulerProcess) -> None:
    body = scope.node_body(f"{scope.name}-gpu")
    gpu_resources = {
        "koordinator.sh/gpu": "100",
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory-ratio": "100",
        "koordinator.sh/gpu-memory": "16Gi",
    }
    body["status"]["allocatable"].update(gpu_resources)
    body["status"]["capacity"].update(gpu_resources)
    node = scope.add_node_body(body)
    scope.ok(
        "POST",
        DEVICES,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {"name": node},
            "spec": {
                "devices": [
                    {
                        "type": "gpu",
                        "minor": 0,
                        "id": "GPU-8c25ea37-2909-6e62-b7bf-e2fcadebea8d",
                        "health": True,
                        "resources": {
                            "koordinator.sh/gpu-core": "100",
                            "koordinator.sh/gpu-memory": "16Gi",
                            "koordinator.sh/gpu-memory-ratio": "100",
                        },
                    }
                ]
            },
        },
    )
    scope.add_pods([gpu_pod(scope, "half", {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"})])
    scope.wait_all_bound(1, timeout=60)
    half = scope.pod("half")
    assert half["spec"]["nodeName"] == node
    assert json.loads(half["metadata"]["annotations"][ALLOCATED]) == {
        "gpu": [
            {
                "minor": 0,
                "resources": {
                    "koordinator.sh/gpu-core": "50",
                    "koordinator.sh/gpu-memory": "8Gi",
                    "koordinator.sh/gpu-memory-ratio": "50",
                },
            }
        ]
    }

    scope.add_pods([gpu_pod(scope, "whole", {"kubernetes.io/gpu": "100"})])

    def rejected() -> bool:
        c = scheduled_condition(scope, "whole")
        return c is not None and c.get("reason") == "Unschedulable"

    wait_until(rejected, timeout=60, what="whole-GPU pod marked unschedulable")
    condition = scheduled_condition(scope, "whole")
    assert condition is not None
    assert "Insufficient gpu devices" in condition["message"], condition
    assert not scope.pod("whole")["spec"].get("nodeName")


def one_gpu(minor: int) -> dict[str, Any]:
    return {
        "type": "gpu",
        "minor": minor,
        "id": f"GPU-{minor}",
        "health": True,
        "resources": {
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": "16Gi",
            "koordinator.sh/gpu-memory-ratio": "100",
        },
    }


def test_deviceresource_controller_keeps_node_resources_in_step(scope: Scope, tmp_path: Path) -> None:
    """The Node carries no GPU resources of its own: the deviceresource controller sets them from the
    Device object, the pod is scheduled on them, and they follow the Device when it changes and goes."""
    node = scope.add_node("gpu")
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    proc = SchedulerProcess.start(
        scope.plane, config, tmp_path, extra_args=["--controllers=deviceresource"], wait_ready=False
    )
    try:
        wait_until(lambda: proc.get("/readyz")[0] == 200 or not proc.alive, timeout=90, what="readyz")
        assert proc.alive, proc.log_tail()
        labels = {"node.koordinator.sh/gpu-vendor": "nvidia", "node.koordinator.sh/gpu-model": "Tesla-T4"}
        scope.ok(
            "POST",
            DEVICES,
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "Device",
                "metadata": {"name": node, "labels": labels},
                "spec": {"devices": [one_gpu(0)]},
            },
        )

        def gpu_status() -> dict[str, str]:
            status = scope.ok("GET", f"/api/v1/nodes/{node}")["status"]
            return {k: v for k, v in status["allocatable"].items() if k.startswith("koordinator.sh/")}

        one = {
            "koordinator.sh/gpu": "100",
            "koordinator.sh/gpu-core": "100",
            "koordinator.sh/gpu-memory": "16Gi",
            "koordinator.sh/gpu-memory-ratio": "100",
        }
        wait_until(lambda: gpu_status() == one, timeout=60, what="node GPU resources from the Device")

        def node_labels() -> dict[str, str]:
            return {k: scope.ok("GET", f"/api/v1/nodes/{node}")["metadata"]["labels"].get(k) for k in labels}

        wait_until(lambda: node_labels() == labels, timeout=30, what="node GPU labels from the Device")
        got = scope.ok("GET", f"/api/v1/nodes/{node}")
        assert {k: v for k, v in got["status"]["capacity"].items() if k.startswith("koordinator.sh/")} == one

        scope.add_pods(
            [gpu_pod(scope, "half", {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"})]
        )
        assert scope.wait_all_bound(1, timeout=60)[0]["spec"]["nodeName"] == node

        current = scope.ok("GET", f"{DEVICES}/{node}")
        current["spec"]["devices"].append(one_gpu(1))
        scope.ok("PUT", f"{DEVICES}/{node}", current)
        two = {
            "koordinator.sh/gpu": "200",
            "koordinator.sh/gpu-core": "200",
            "koordinator.sh/gpu-memory": "32Gi",
            "koordinator.sh/gpu-memory-ratio": "200",
        }
        wait_until(lambda: gpu_status() == two, timeout=60, what="node GPU resources follow the Device")

        scope.ok("DELETE", f"{DEVICES}/{node}")
        wait_until(lambda: gpu_status() == {}, timeout=60, what="node GPU resources removed with the Device")
        assert proc.alive, proc.log_tail()
    finally:
        proc.terminate()
    log = proc.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    assert f"deviceresource: node {node}: koordinator.sh/gpu=100" in log
