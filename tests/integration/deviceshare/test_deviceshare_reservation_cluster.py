"""DeviceShare with Reservations against the real API server: a Reservation asking for 2 GPUs gets two
GPUs (``device-allocated`` on the Reservation object); pods that are no owner never get them, even when
only those GPUs are left (the report that a Reservation "did not hold" its devices); the owner pod gets
exactly them."""

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
CRDS = REPO / "deploy" / "crds"
DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
ALLOCATED = "scheduling.koordinator.sh/device-allocated"
RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
CORE, RATIO, MEM = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio", "koordinator.sh/gpu-memory"
PLUGINS = {
    "multiPoint": {"enabled": [{"name": "DeviceShare"}]},
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}


def install_crd(plane: Any, file: str, path: str) -> None:
    docs = [d for d in yaml.safe_load_all((CRDS / file).read_text()) if d]
    result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", docs[0])
    assert result.status in (201, 409), result.body[:300]
    wait_until(lambda: plane.request("GET", path).status == 200, timeout=30, what=f"{file} served")


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    install_crd(control_plane, "scheduling.koordinator.sh_devices.yaml", DEVICES)
    install_crd(control_plane, "scheduling.koordinator.sh_reservations.yaml", RESERVATIONS)
    s = Scope.create(control_plane, "gpuresv")
    yield s
    for r in s.ok("GET", RESERVATIONS)["items"]:
        if r["metadata"].get("labels", {}).get("pykoord.test/scope") == s.name:
            control_plane.request("DELETE", f"{RESERVATIONS}/{r['metadata']['name']}")
    for node in s.nodes:
        control_plane.request("DELETE", f"{DEVICES}/{node}")
    s.cleanup()


def whole_gpu_share(scope: Scope, name: str, *, app: str | None = None) -> dict[str, Any]:
    """One whole GPU asked as gpu-core + gpu-memory-ratio 100 (the Reservation asks nvidia.com/gpu, so
    NodeResourcesFit does not keep these pods off the reserved GPUs: DeviceShare must)."""
    body = scope.pod_body(name)
    body["spec"]["containers"][0]["resources"]["limits"] = {CORE: "100", RATIO: "100"}
    if app:
        body["metadata"]["labels"] = {"app": app}
    return body


def test_two_gpu_reservation_is_consumed_by_its_owner_only(scope: Scope, tmp_path: Path) -> None:
    body = scope.node_body(f"{scope.name}-gpu")
    totals = {"nvidia.com/gpu": "4", CORE: "400", RATIO: "400", MEM: "320Gi", "koordinator.sh/gpu": "400"}
    body["status"]["allocatable"].update(totals)
    body["status"]["capacity"].update(totals)
    node = scope.add_node_body(body)
    gpus = [
        {
            "type": "gpu",
            "minor": m,
            "id": f"GPU-{m}",
            "health": True,
            "resources": {CORE: "100", RATIO: "100", MEM: "80Gi"},
        }
        for m in range(4)
    ]
    scope.ok(
        "POST",
        DEVICES,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {"name": node},
            "spec": {"devices": gpus},
        },
    )
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    name = f"{scope.name}-slot"
    requests = {"cpu": "100m", "memory": "100Mi", "nvidia.com/gpu": "2"}
    reservation = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": {"pykoord.test/scope": scope.name}},
        "spec": {
            "template": {
                "metadata": {"namespace": scope.namespace},
                "spec": {
                    "schedulerName": scope.scheduler_name,
                    "nodeSelector": {"pykoord.test/scope": scope.name},
                    "containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": "train"}}}],
            "allocateOnce": True,
            "ttl": "1h",
        },
    }
    try:
        scope.ok("POST", RESERVATIONS, reservation)

        def current() -> dict[str, Any]:
            return scope.ok("GET", f"{RESERVATIONS}/{name}")

        wait_until(lambda: (current().get("status") or {}).get("phase") == "Available", timeout=60, what="Available")
        reserved = sorted(a["minor"] for a in json.loads(current()["metadata"]["annotations"][ALLOCATED])["gpu"])
        assert reserved == [0, 1], current()["metadata"]["annotations"]

        scope.add_pods([whole_gpu_share(scope, f"other-{i}") for i in range(3)])
        scope.wait_all_bound(2, timeout=60)
        bound = {p: scope.pod(p) for p in ("other-0", "other-1", "other-2")}
        taken = sorted(
            a["minor"]
            for p in bound.values()
            if p["spec"].get("nodeName")
            for a in json.loads(p["metadata"]["annotations"][ALLOCATED])["gpu"]
        )
        assert taken == [2, 3], "pods that are no owner never get the reserved GPUs"

        owner = scope.pod_body("trainer")
        owner["metadata"]["labels"] = {"app": "train"}
        owner["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "2"}
        scope.add_pods([owner])
        wait_until(lambda: bool(scope.pod("trainer")["spec"].get("nodeName")), timeout=60, what="owner bound")
        annotations = scope.pod("trainer")["metadata"]["annotations"]
        assert sorted(a["minor"] for a in json.loads(annotations[ALLOCATED])["gpu"]) == [0, 1]
        assert name in annotations[RESERVATION_ALLOCATED]
        unbound = [p for p, body in bound.items() if not body["spec"].get("nodeName")]
        assert len(unbound) == 1 and not scope.pod(unbound[0])["spec"].get("nodeName")
    except AssertionError:
        print(proc.log_tail())
        raise
    finally:
        if proc.alive:
            proc.kill()
