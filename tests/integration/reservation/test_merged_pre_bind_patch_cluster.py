"""DefaultPreBind's merged patch against the real API server: an owner pod that lands in a reservation
and gets a GPU share is annotated by Reservation and DeviceShare in one PATCH. A watch on the pod sees
every change; the two annotations must arrive in the same update, never one before the other."""

from __future__ import annotations

import json
import ssl
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until
from test_reservation_cluster import RESERVATIONS, phase, reservation
from test_reservation_cluster import scope as reservation_scope  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
DEVICE_CRD = REPO / "deploy" / "crds" / "scheduling.koordinator.sh_devices.yaml"
DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
DEVICE = "scheduling.koordinator.sh/device-allocated"
GPU = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100", "koordinator.sh/gpu-memory": "16Gi"}
BOTH = {"Reservation", "DeviceShare"}


class AnnotationWatch:
    """Every annotation key set a pod of the namespace was seen with, in order."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.seen: dict[str, list[frozenset[str]]] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> AnnotationWatch:
        self._thread.start()
        assert self._ready.wait(10), "watch did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        plane = self.scope.plane
        base = f"/api/v1/namespaces/{self.scope.namespace}/pods"
        rv = plane.request("GET", base).json()["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            request = urllib.request.Request(
                plane.server + f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=5",
                headers={"Authorization": f"Bearer {plane.token}"},
            )
            try:
                context = ssl.create_default_context(cafile=str(plane.ca_file))
                with urllib.request.urlopen(request, context=context, timeout=10) as resp:
                    self._ready.set()
                    for line in resp:
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            break
                        obj = event["object"]
                        rv = obj["metadata"]["resourceVersion"]
                        keys = frozenset(obj["metadata"].get("annotations") or {})
                        self.seen.setdefault(obj["metadata"]["name"], []).append(keys)
            except (OSError, ValueError):
                time.sleep(0.5)


@pytest.fixture
def scope(reservation_scope: Scope) -> Iterator[Scope]:  # noqa: F811
    plane = reservation_scope.plane
    crd = yaml.safe_load(DEVICE_CRD.read_text().split("---", 1)[1])
    result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert result.status in (201, 409), result.body[:300]
    wait_until(lambda: plane.request("GET", DEVICES).status == 200, timeout=30, what="Device CRD served")
    yield reservation_scope
    for node in reservation_scope.nodes:
        plane.request("DELETE", f"{DEVICES}/{node}")


@pytest.fixture(params=[True, False], ids=["merged", "DefaultPreBind-disabled"])
def merged(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path, merged: bool) -> Iterator[SchedulerProcess]:
    config = scheduler_config(scope)
    both = [{"name": "Reservation"}, {"name": "DeviceShare"}]
    config["profiles"][0]["plugins"] = {
        **{point: {"enabled": both} for point in ("preFilter", "filter", "preScore", "reserve")},
        "preBind": {"enabled": both, "disabled": [] if merged else [{"name": "DefaultPreBind"}]},
        "score": {"enabled": [{"name": "Reservation", "weight": 5000}, {"name": "DeviceShare", "weight": 1}]},
        "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
    }
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def test_reservation_and_device_annotations_arrive_in_one_patch(
    scope: Scope, scheduler: SchedulerProcess, merged: bool
) -> None:
    """Without DefaultPreBind (the control case) each plugin patches on its own, so the watch sees the
    pod with one annotation and not yet the other."""
    body = scope.node_body(f"{scope.name}-gpu")
    body["status"]["allocatable"].update(GPU)
    body["status"]["capacity"].update(GPU)
    node = scope.add_node_body(body)
    resources = dict(GPU)
    device = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": node},
        "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True, "resources": resources}]},
    }
    scope.ok("POST", DEVICES, device)
    scope.ok("POST", RESERVATIONS, reservation(scope, "web", cpu="1", app="web"))
    wait_until(lambda: phase(scope, "web") == "Available", timeout=30, what="reservation Available")

    pod = scope.pod_body("web-0", cpu="1")
    pod["metadata"]["labels"] = {"app": "web"}
    pod["spec"]["containers"][0]["resources"]["limits"] = {
        "koordinator.sh/gpu-core": "50",
        "koordinator.sh/gpu-memory-ratio": "50",
    }
    with AnnotationWatch(scope) as watch:
        scope.add_pods([pod])
        wait_until(lambda: scope.pod("web-0")["spec"].get("nodeName") == node, timeout=60, what="owner bound")
        wait_until(lambda: any(ALLOCATED in k for k in watch.seen.get("web-0", [])), timeout=10, what="watched")
    annotations = scope.pod("web-0")["metadata"]["annotations"]
    assert json.loads(annotations[ALLOCATED])["name"] == f"{scope.name}-web"
    assert json.loads(annotations[DEVICE])["gpu"][0]["minor"] == 0
    partial = [k for k in watch.seen["web-0"] if (ALLOCATED in k) != (DEVICE in k)]
    assert (partial == []) is merged, watch.seen["web-0"]
