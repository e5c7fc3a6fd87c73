"""GPU shared resource templates on the real API server: the scheduler watches the ConfigMap named by
``gpuSharedResourceTemplatesConfig`` (created after it starts), an Ascend NPU slice equal to a template is
bound with the template named in its device allocation, a request equal to no template is unschedulable
with Koordinator's message, and a bad ``data.yaml`` keeps the last good templates and raises a Warning
Event on the ConfigMap."""

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
CM_NAME = "gpu-templates"
ASCEND = {"node.koordinator.sh/gpu-vendor": "huawei", "node.koordinator.sh/gpu-model": "Ascend-310P"}
TEMPLATES = {
    "huawei-Ascend-310P": {
        "vir01": {
            "huawei.com/npu-core": "1",
            "huawei.com/npu-cpu": "1",
            "huawei.com/npu-dvpp": "12",
            "koordinator.sh/gpu-memory": "3Gi",
        },
        "vir04": {
            "huawei.com/npu-core": "4",
            "huawei.com/npu-cpu": "4",
            "huawei.com/npu-dvpp": "50",
            "koordinator.sh/gpu-memory": "12Gi",
        },
    }
}


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "npu")
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
    templates = {
        "configMapNamespace": scope.namespace,
        "configMapName": CM_NAME,
        "matchedResources": ["huawei.com/npu-core"],  # given whole, the field takes no defaults
    }
    config["profiles"][0]["pluginConfig"] = [
        {"name": "DeviceShare", "args": {"gpuSharedResourceTemplatesConfig": templates}}
    ]
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def npu_pod(scope: Scope, name: str, slice_: tuple[str, str, str, str]) -> dict[str, Any]:
    """A pod sharing one NPU: (npu-core, npu-cpu, npu-dvpp, gpu-memory)."""
    body = scope.pod_body(name)
    core, cpu, dvpp, memory = slice_
    body["spec"]["containers"][0]["resources"]["limits"] = {
        "koordinator.sh/gpu.shared": "1",
        "huawei.com/npu-core": core,
        "huawei.com/npu-cpu": cpu,
        "huawei.com/npu-dvpp": dvpp,
        "koordinator.sh/gpu-memory": memory,
    }
    return body


def condition_message(scope: Scope, name: str) -> str:
    for c in scope.pod(name).get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
            return str(c.get("message", ""))
    return ""


def config_map(scope: Scope, data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CM_NAME, "namespace": scope.namespace},
        "data": {"data.yaml": data},
    }


def test_templates_from_the_watched_configmap(scope: Scope, scheduler: SchedulerProcess) -> None:
    body = scope.node_body(f"{scope.name}-npu")
    body["metadata"].setdefault("labels", {}).update(ASCEND)
    npu = {
        "koordinator.sh/gpu.shared": "100",
        "huawei.com/npu-core": "8",
        "huawei.com/npu-cpu": "7",
        "huawei.com/npu-dvpp": "100",
        "koordinator.sh/gpu-memory": "24Gi",
    }
    body["status"]["allocatable"].update(npu)
    body["status"]["capacity"].update(npu)
    node = scope.add_node_body(body)
    resources = {k: v for k, v in npu.items() if k != "koordinator.sh/gpu.shared"}
    resources["koordinator.sh/gpu-memory-ratio"] = "100"
    device = {"type": "gpu", "minor": 0, "id": "NPU-0", "health": True, "resources": resources}
    scope.ok(
        "POST",
        DEVICES,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {"name": node, "labels": ASCEND},
            "spec": {"devices": [device]},
        },
    )
    cms = f"/api/v1/namespaces/{scope.namespace}/configmaps"
    scope.ok("POST", cms, config_map(scope, yaml.safe_dump(TEMPLATES)))

    # The ConfigMap reaches the scheduler through its watch; until then the pod is refused and retried.
    scope.add_pods([npu_pod(scope, "vir04", ("4", "4", "50", "12Gi"))])
    (bound,) = scope.wait_all_bound(1, timeout=90)
    assert bound["spec"]["nodeName"] == node
    (allocation,) = json.loads(bound["metadata"]["annotations"][ALLOCATED])["gpu"]
    assert allocation["minor"] == 0
    assert allocation["extension"] == {"gpuSharedResourceTemplate": "vir04"}

    scope.add_pods([npu_pod(scope, "five-cores", ("5", "4", "50", "12Gi"))])
    wait_until(lambda: bool(condition_message(scope, "five-cores")), timeout=60, what="five-cores unschedulable")
    assert "no matched GPU shared resource template" in condition_message(scope, "five-cores")

    current = scope.ok("GET", f"{cms}/{CM_NAME}")
    current["data"] = {"data.yaml": "invalid yaml"}
    scope.ok("PUT", f"{cms}/{CM_NAME}", current)

    def warned() -> list[dict[str, Any]]:
        items = scope.ok("GET", f"/apis/events.k8s.io/v1/namespaces/{scope.namespace}/events")["items"]
        return [e for e in items if e.get("reason") == "InvalidGPUSharedResourceTemplates"]

    wait_until(lambda: bool(warned()), timeout=60, what="Warning Event on the templates ConfigMap")
    (event,) = warned()
    assert event["type"] == "Warning"
    assert (event["regarding"]["kind"], event["regarding"]["name"]) == ("ConfigMap", CM_NAME)

    # The last good templates are kept: a vir01 slice still fits.
    scope.add_pods([npu_pod(scope, "vir01", ("1", "1", "12", "3Gi"))])
    wait_until(lambda: bool(scope.pod("vir01")["spec"].get("nodeName")), timeout=60, what="vir01 bound")
    (allocation,) = json.loads(scope.pod("vir01")["metadata"]["annotations"][ALLOCATED])["gpu"]
    assert allocation["extension"] == {"gpuSharedResourceTemplate": "vir01"}
