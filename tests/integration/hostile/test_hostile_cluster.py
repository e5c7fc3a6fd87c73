"""Hostile objects on the real API server (each one accepted by its schema): the koord-scheduler binary,
at its default verbosity, keeps scheduling the valid pods and its Reservation controller keeps expiring the
valid Reservations; every bad object is named in one log line and counted in
``koord_scheduler_object_errors_total``, and the pod gets a Warning Event. No traceback in the log."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from controlplane import free_port
from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRDS = {
    "/apis/slo.koordinator.sh/v1alpha1/nodemetrics": REPO / "deploy" / "crds" / "slo.koordinator.sh_nodemetrics.yaml",
    "/apis/scheduling.koordinator.sh/v1alpha1/reservations": REPO
    / "deploy"
    / "crds"
    / "scheduling.koordinator.sh_reservations.yaml",
}
NODEMETRICS, RESERVATIONS = CRDS
HUGE = "99999999999999999999999"
PLUGINS = {
    "multiPoint": {"enabled": [{"name": "LoadAwareScheduling", "weight": 10}]},
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    for path, crd in CRDS.items():
        docs = [d for d in yaml.safe_load_all(crd.read_text()) if d]
        result = control_plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", docs[0])
        assert result.status in (201, 409), result.body[:300]
        wait_until(lambda path=path: control_plane.request("GET", path).status == 200, timeout=30, what="CRD served")
    s = Scope.create(control_plane, "hostile")
    yield s
    for node in s.nodes:
        control_plane.request("DELETE", f"{NODEMETRICS}/{node}")
    for r in s.ok("GET", RESERVATIONS)["items"]:
        if r["metadata"]["name"].startswith(s.name):
            control_plane.request("DELETE", f"{RESERVATIONS}/{r['metadata']['name']}")
    s.cleanup()


def node_metric(scope: Scope, node: str, cpu: str) -> None:
    scope.ok(
        "POST",
        NODEMETRICS,
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": node},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        },
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"updateTime": now, "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "1Gi"}}}}
    scope.ok("PUT", f"{NODEMETRICS}/{node}/status", {**scope.ok("GET", f"{NODEMETRICS}/{node}"), "status": status})


def reservation(scope: Scope, name: str, *, cpu: str = "100m", ttl: str = "1h") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": f"{scope.name}-{name}"},
        "spec": {
            "template": {
                "metadata": {"namespace": scope.namespace},
                "spec": {
                    "schedulerName": scope.scheduler_name,
                    "nodeSelector": {"pykoord.test/scope": scope.name},
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "10Mi"}}}],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": f"{scope.name}-{name}"}}}],
            "ttl": ttl,
        },
    }


def put(url: str, body: str) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body.encode(), method="PUT")
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def ready_condition(scope: Scope, name: str) -> tuple[str, str, str] | None:
    """(phase, Ready reason, Ready message) of the Reservation, once it is Failed."""
    result = scope.plane.request("GET", f"{RESERVATIONS}/{scope.name}-{name}")
    status = (result.json() or {}).get("status") or {} if result.status == 200 else {}
    if status.get("phase") != "Failed":
        return None
    ready: dict[str, Any] = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), {})
    return "Failed", str(ready.get("reason", "")), str(ready.get("message", ""))


def condition_kinds(scope: Scope, name: str) -> set[tuple[str, str, str]]:
    """(type, status, reason) of each of the Reservation's conditions."""
    result = scope.plane.request("GET", f"{RESERVATIONS}/{scope.name}-{name}")
    status = (result.json() or {}).get("status") or {} if result.status == 200 else {}
    return {(c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or ()}


def reservation_status(scope: Scope, name: str) -> str:
    """The Reservation's status as the API server has it now (for a failure message)."""
    result = scope.plane.request("GET", f"{RESERVATIONS}/{scope.name}-{name}")
    return f"HTTP {result.status}: {(result.json() or {}).get('status') if result.status == 200 else ''}"


def wait_failed(scope: Scope, name: str, *, what: str) -> None:
    """Wait for the Reservation to be Failed; on a time-out, say what the API server has for it."""
    try:
        wait_until(lambda: ready_condition(scope, name) is not None, timeout=30, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the Reservation now: {reservation_status(scope, name)}") from None


def test_bad_objects_do_not_stop_scheduling_or_expiry(scope: Scope, tmp_path: Path) -> None:
    good = [scope.add_node("good-1"), scope.add_node("good-2")]
    huge_metric, negative_metric = scope.add_node("huge-metric"), scope.add_node("negative-metric")
    huge_node = scope.add_node_body(scope.node_body(f"{scope.name}-huge-node", cpu=HUGE))
    node_metric(scope, huge_metric, HUGE)
    node_metric(scope, negative_metric, "-400")
    node_metric(scope, good[0], "500m")

    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    debug_port = free_port()
    scheduler = SchedulerProcess.start(
        scope.plane,
        config,
        tmp_path,
        verbosity=0,
        extra_args=["--controllers=reservation", f"--debug-flags-port={debug_port}"],
    )
    try:
        # The debug switches: not on the metrics port; on loopback, range-checked.
        assert put(f"http://127.0.0.1:{scheduler.port}/debug/flags/s", "3")[0] in (404, 405)
        assert put(f"http://127.0.0.1:{debug_port}/debug/flags/s", "1000000")[0] == 400
        assert put(f"http://127.0.0.1:{debug_port}/debug/flags/s", "-5")[0] == 400
        assert put(f"http://127.0.0.1:{debug_port}/debug/flags/s", "0") == (200, "s=0\n")

        scope.ok("POST", RESERVATIONS, reservation(scope, "bad-ttl", ttl="forever"))
        scope.ok("POST", RESERVATIONS, reservation(scope, "huge-cpu", cpu="1e23"))
        scope.ok("POST", RESERVATIONS, reservation(scope, "short", ttl="3s"))
        scope.add_pods([scope.pod_body("huge-request", cpu=HUGE)])
        scope.add_pods([scope.pod_body(f"web-{i}") for i in range(6)])

        pods = {p["metadata"]["name"]: p for p in scope.wait_all_bound(6, timeout=60)}
        placed = {name: p["spec"].get("nodeName") for name, p in pods.items()}
        assert all(placed[f"web-{i}"] in (*good, huge_metric, negative_metric) for i in range(6)), placed
        assert not placed["huge-request"]

        wait_until(lambda: ready_condition(scope, "short") is not None, timeout=60, what="valid Reservation expired")
        assert ready_condition(scope, "short")[:2] == ("Failed", "Expired")  # type: ignore[index]
        wait_failed(scope, "bad-ttl", what="bad ttl marked Failed")
        _, reason, message = ready_condition(scope, "bad-ttl")  # type: ignore[misc]
        assert reason == "Invalid" and 'spec.ttl: invalid duration "forever"' in message
        # Both writers' conditions stay: the controller's Ready and the plugin's Scheduled (merged by type).
        want = {("Ready", "False", "Invalid"), ("Scheduled", "False", "Unschedulable")}
        try:
            wait_until(lambda: condition_kinds(scope, "bad-ttl") == want, timeout=30, what="both conditions")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the Reservation now: {reservation_status(scope, 'bad-ttl')}") from None
        wait_failed(scope, "huge-cpu", what="1e23 cpu marked Failed")
        assert "spec.template.spec.containers[0].resources.requests.cpu" in ready_condition(scope, "huge-cpu")[2]  # type: ignore[index]

        wait_until(lambda: bool(scope.events(reason="InvalidObject")), timeout=30, what="Event on the bad pod")
        event = scope.events(reason="InvalidObject")[0]
        assert (event["regarding"]["kind"], event["regarding"]["name"], event["type"]) == (
            "Pod",
            "huge-request",
            "Warning",
        )
        assert "spec.containers[0].resources.requests.cpu" in event["note"]

        def errors(kind: str, reason: str) -> float:
            return scheduler.metric("koord_scheduler_object_errors_total", kind=kind, reason=reason)

        assert errors("NodeMetric", "Invalid") >= 2
        assert errors("Node", "Invalid") >= 1
        assert errors("Pod", "Invalid") >= 1
        assert errors("Reservation", "Invalid") >= 2
        assert scheduler.alive, scheduler.log_tail()
    finally:
        scheduler.terminate()
    log = scheduler.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
    for bad in (
        f"NodeMetric {huge_metric}",
        f"NodeMetric {negative_metric}",
        f"Node {huge_node}",
        f"Pod {scope.namespace}/huge-request",
        f"Reservation {scope.name}-bad-ttl",
        f"Reservation {scope.name}-huge-cpu",
    ):
        assert bad in log, f"{bad!r} not named in the log:\n{log[-4000:]}"
