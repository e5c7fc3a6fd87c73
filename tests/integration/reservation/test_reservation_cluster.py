"""Reservations against the real API server: the koord-scheduler binary schedules them and their owners,
and its lifecycle controller (``--controllers=reservation``, on the scheduler's own informers) keeps their
status true, with the garbage-collection args of the profile's Reservation pluginConfig."""

from __future__ import annotations

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
CRD = REPO / "deploy" / "crds" / "scheduling.koordinator.sh_reservations.yaml"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
PLUGINS = {
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}
QUICK_GC = {"gcDurationSeconds": 5, "gcIntervalSeconds": 1}
"""Finished Reservations are collected 5 s after they finish, looked at every second (defaults: a day, a
minute)."""


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "resv")
    result = control_plane.request(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        yaml.safe_load(CRD.read_text().split("---", 1)[1]),
    )
    assert result.status in (201, 409), result.body[:300]
    wait_until(lambda: control_plane.request("GET", RESERVATIONS).status == 200, timeout=30, what="CRD served")
    yield s
    for r in s.ok("GET", RESERVATIONS)["items"]:
        if r["metadata"].get("labels", {}).get("pykoord.test/scope") == s.name:
            control_plane.request("DELETE", f"{RESERVATIONS}/{r['metadata']['name']}")
    s.cleanup()


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    config["profiles"][0]["pluginConfig"] = [{"name": "Reservation", "args": QUICK_GC}]
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def reservation(
    scope: Scope, name: str, *, cpu: str, app: str, allocate_once: bool = True, ttl: str = "1h"
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": f"{scope.name}-{name}", "labels": {"pykoord.test/scope": scope.name}},
        "spec": {
            "template": {
                "metadata": {"namespace": scope.namespace},
                "spec": {
                    "schedulerName": scope.scheduler_name,
                    "nodeSelector": {"pykoord.test/scope": scope.name},
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": app}}}],
            "allocateOnce": allocate_once,
            "ttl": ttl,
        },
    }


def get_reservation(scope: Scope, name: str) -> dict[str, Any] | None:
    result = scope.plane.request("GET", f"{RESERVATIONS}/{scope.name}-{name}")
    return result.json() if result.status == 200 else None


def phase(scope: Scope, name: str) -> str | None:
    r = get_reservation(scope, name)
    return None if r is None else (r.get("status") or {}).get("phase")


def owner_pod(scope: Scope, name: str, *, cpu: str, app: str | None) -> dict[str, Any]:
    body = scope.pod_body(name, cpu=cpu)
    if app:
        body["metadata"]["labels"] = {"app": app}
    return body


def test_reservation_lifecycle(scope: Scope, scheduler: SchedulerProcess) -> None:
    node = scope.add_node("n1", cpu="4")
    scope.ok("POST", RESERVATIONS, reservation(scope, "once", cpu="2", app="web"))
    wait_until(lambda: phase(scope, "once") == "Available", timeout=30, what="reservation Available")
    status = get_reservation(scope, "once")["status"]  # type: ignore[index]
    assert status["nodeName"] == node and status["allocatable"]["cpu"] == "2"

    # A non-owner needing 3 CPUs cannot use the 2 reserved ones.
    scope.add_pods([owner_pod(scope, "stranger", cpu="3", app=None)])
    scope.add_pods([owner_pod(scope, "web-0", cpu="2", app="web")])
    wait_until(lambda: scope.pod("web-0")["spec"].get("nodeName") == node, timeout=30, what="owner bound")
    annotation = scope.pod("web-0")["metadata"]["annotations"][ALLOCATED]
    assert f"{scope.name}-once" in annotation
    assert not scope.pod("stranger")["spec"].get("nodeName")

    # allocateOnce: the controller records the owner and moves it to Succeeded, then collects it.
    wait_until(lambda: phase(scope, "once") == "Succeeded", timeout=30, what="reservation Succeeded")
    # The controller writes only the status: no finalizer (deletion never waits for it), no state annotations.
    meta = get_reservation(scope, "once")["metadata"]  # type: ignore[index]
    assert not meta.get("finalizers")
    assert not [k for k in meta.get("annotations") or {} if "kopf" in k or k.startswith("pykoord.koordinator.sh")]
    wait_until(lambda: get_reservation(scope, "once") is None, timeout=40, what="reservation collected")


def test_owner_deleted_status_follows(scope: Scope, scheduler: SchedulerProcess) -> None:
    node = scope.add_node("n1", cpu="4")
    scope.ok("POST", RESERVATIONS, reservation(scope, "pool", cpu="2", app="svc", allocate_once=False))
    wait_until(lambda: phase(scope, "pool") == "Available", timeout=30, what="reservation Available")
    scope.add_pods([owner_pod(scope, "svc-0", cpu="1", app="svc")])
    wait_until(lambda: scope.pod("svc-0")["spec"].get("nodeName") == node, timeout=30, what="owner bound")

    def owners() -> list[str]:
        r = get_reservation(scope, "pool") or {}
        return [o["name"] for o in (r.get("status") or {}).get("currentOwners") or []]

    wait_until(lambda: owners() == ["svc-0"], timeout=30, what="currentOwners")
    assert get_reservation(scope, "pool")["status"]["allocated"]["cpu"] == "1"  # type: ignore[index]
    scope.ok("DELETE", f"/api/v1/namespaces/{scope.namespace}/pods/svc-0?gracePeriodSeconds=0")
    wait_until(lambda: owners() == [], timeout=30, what="currentOwners cleared")


def test_ttl_expiry_then_collected(scope: Scope, scheduler: SchedulerProcess) -> None:
    scope.add_node("n1", cpu="4")
    scope.ok("POST", RESERVATIONS, reservation(scope, "short", cpu="1", app="x", ttl="4s"))
    wait_until(lambda: phase(scope, "short") == "Failed", timeout=30, what="reservation expired")
    ready = [
        c
        for c in get_reservation(scope, "short")["status"]["conditions"]  # type: ignore[index]
        if c["type"] == "Ready"
    ]
    assert ready and ready[0]["reason"] == "Expired"
    wait_until(lambda: get_reservation(scope, "short") is None, timeout=40, what="reservation collected")
