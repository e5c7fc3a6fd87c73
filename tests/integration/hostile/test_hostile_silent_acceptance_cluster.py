"""Objects Koordinator accepts silently, on the real API server (each accepted by its schema): a Device with
two GPUs of one minor, a Device with a negative quantity, a ClusterNetworkTopology whose layers form a
cycle, a gang pod whose annotation cannot be parsed. Each gets one Warning Event naming the object and the
field and one log line, and nothing is retried in a loop (the deviceresource controller used to PATCH a
negative capacity every 5 s forever)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import REPO, SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
TOPOLOGIES = "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies"
CRDS = {
    DEVICES: "scheduling.koordinator.sh_devices.yaml",
    TOPOLOGIES: "scheduling.koordinator.sh_clusternetworktopologies.yaml",
    "/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups": "scheduling.sigs.k8s.io_podgroups.yaml",
}
EVENTS = "/apis/events.k8s.io/v1/events"


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    for path, crd in CRDS.items():
        doc = next(d for d in yaml.safe_load_all((REPO / "deploy" / "crds" / crd).read_text()) if d)
        result = control_plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
        assert result.status in (201, 409), result.body[:300]
        wait_until(lambda path=path: control_plane.request("GET", path).status == 200, timeout=30, what="CRD served")
    control_plane.request("DELETE", f"{TOPOLOGIES}/default")
    s = Scope.create(control_plane, "silent")
    yield s
    control_plane.request("DELETE", f"{TOPOLOGIES}/default")
    for node in s.nodes:
        control_plane.request("DELETE", f"{DEVICES}/{node}")
    s.cleanup()


def gpu(minor: int, core: str = "100") -> dict[str, Any]:
    return {
        "type": "gpu",
        "minor": minor,
        "id": f"GPU-{minor}",
        "health": True,
        "resources": {
            "koordinator.sh/gpu-core": core,
            "koordinator.sh/gpu-memory": "16Gi",
            "koordinator.sh/gpu-memory-ratio": core,
        },
    }


def events_about(scope: Scope, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = scope.ok("GET", EVENTS)["items"]
    return [e for e in items if e.get("regarding", {}).get("name") == name]


def gpu_status(scope: Scope, node: str) -> dict[str, str]:
    status = scope.ok("GET", f"/api/v1/nodes/{node}")["status"]
    return {k: v for k, v in status["allocatable"].items() if k.startswith("koordinator.sh/")}


def test_silent_acceptances_get_one_event_and_no_retry_loop(scope: Scope, tmp_path: Path) -> None:
    duplicate, negative = scope.add_node("duplicate"), scope.add_node("negative")
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "DeviceShare"}, {"name": "Coscheduling"}]}}
    config["profiles"][0]["pluginConfig"] = [{"name": "Coscheduling", "args": {"awareNetworkTopology": True}}]
    proc = SchedulerProcess.start(
        scope.plane, config, tmp_path, verbosity=0, extra_args=["--controllers=deviceresource"], wait_ready=False
    )
    try:
        wait_until(lambda: proc.get("/readyz")[0] == 200 or not proc.alive, timeout=90, what="readyz")
        assert proc.alive, proc.log_tail()
        device = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device"}
        scope.ok(
            "POST", DEVICES, {**device, "metadata": {"name": duplicate}, "spec": {"devices": [gpu(0), gpu(1), gpu(1)]}}
        )
        scope.ok("POST", DEVICES, {**device, "metadata": {"name": negative}, "spec": {"devices": [gpu(0, "-100")]}})
        scope.ok(
            "POST",
            TOPOLOGIES,
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "ClusterNetworkTopology",
                "metadata": {"name": "default"},
                "spec": {
                    "networkTopologySpec": [
                        {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
                        {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer"},
                        {"topologyLayer": "SpineLayer", "parentTopologyLayer": "BlockLayer"},
                    ]
                },
            },
        )
        pod = scope.pod_body("member")
        pod["metadata"]["annotations"] = {
            "gang.scheduling.koordinator.sh/name": "g",
            "gang.scheduling.koordinator.sh/min-available": "lots",
        }
        scope.add_pods([pod])

        wanted = {
            duplicate: ("InvalidObject", "spec.devices[2].minor: duplicate minor 1 of type 'gpu' (also spec.devices"),
            negative: ("InvalidObject", "spec.devices[0].resources[koordinator.sh/gpu-core]: must be non-negative"),
            "default": (
                "InvalidObject",
                "spec.networkTopologySpec[1].parentTopologyLayer: the layers' parents form "
                "a cycle (BlockLayer -> SpineLayer -> BlockLayer)",
            ),
            "member": ("InvalidGang", "gang.scheduling.koordinator.sh/min-available: not an integer: 'lots'"),
        }
        for name, (reason, text) in wanted.items():
            wait_until(
                lambda name=name, reason=reason: any(e["reason"] == reason for e in events_about(scope, name)),
                timeout=30,
                what=f"{reason} Event on {name}",
            )
            (event,) = [e for e in events_about(scope, name) if e["reason"] == reason]
            assert event["type"] == "Warning" and text in event["note"], event
        time.sleep(12)  # two of the old 5-second retry periods
        assert gpu_status(scope, duplicate) == {} and gpu_status(scope, negative) == {}  # treated as absent
        assert not scope.pod("member")["spec"].get("nodeName")
        assert proc.metric("koord_scheduler_object_errors_total", kind="Device", reason="Invalid") == 2
        assert proc.metric("koord_scheduler_object_errors_total", kind="ClusterNetworkTopology", reason="Invalid") == 1
        assert proc.alive
    finally:
        proc.terminate()
    log = proc.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
    assert "retrying in" not in log, log[-4000:]  # nothing failing in a loop
    for line in (
        f"Device {duplicate} ignored (Invalid): Device {duplicate}: spec.devices[2].minor: duplicate minor 1",
        f"Device {negative} ignored (Invalid): Device {negative}: spec.devices[0].resources[koordinator.sh/gpu-core]",
        "ClusterNetworkTopology default ignored (Invalid): ClusterNetworkTopology default: spec.networkTopologySpec[1]",
        f"pod {scope.namespace}/member stays pending: invalid gang annotations on pod {scope.namespace}/member",
    ):
        assert log.count(line) == 1, (line, log[-4000:])
