"""PodMigrationJobs against the real API server: koord-scheduler runs with the Reservation plugin and the
``reservation`` and ``migration`` controllers; the test plays the workload controller (it recreates the
evicted pod with the same controller reference) and the kubelet (it marks the new pod Ready)."""

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
CRDS = [
    REPO / "deploy" / "crds" / f"scheduling.koordinator.sh_{plural}.yaml"
    for plural in ("reservations", "podmigrationjobs")
]
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
JOBS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
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


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "pmj")
    for crd in CRDS:
        result = control_plane.request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            yaml.safe_load(crd.read_text().split("---", 1)[1]),
        )
        assert result.status in (201, 409), result.body[:300]
    for path in (RESERVATIONS, JOBS):
        wait_until(
            lambda path=path: control_plane.request("GET", path).status == 200,
            timeout=30,  # type: ignore[misc]
            what=f"{path} served",
        )
    yield s
    for job in s.ok("GET", JOBS)["items"]:
        if job["metadata"].get("labels", {}).get("pykoord.test/scope") == s.name:
            control_plane.request("DELETE", f"{JOBS}/{job['metadata']['name']}")
            ref = ((job["spec"].get("reservationOptions") or {}).get("reservationRef") or {}).get("name")
            if ref:
                control_plane.request("DELETE", f"{RESERVATIONS}/{ref}")
    s.cleanup()


# The tests move the one pod of a one-replica ReplicaSet that no kubelet makes Ready: arbitration would
# refuse it (expected replicas) or hold it (the workload has a pod unavailable), as Koordinator's does.
MIGRATION_ARGS = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerConfiguration",
    "profiles": [
        {
            "name": "koord-descheduler",
            "pluginConfig": [
                {
                    "name": "MigrationController",
                    "args": {"skipEvictionGates": ["ExpectedReplicas", "MaxUnavailablePerWorkload"]},
                }
            ],
        }
    ],
}


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    descheduler = tmp_path / "descheduler.yaml"
    descheduler.write_text(yaml.safe_dump(MIGRATION_ARGS))
    proc = SchedulerProcess.start(
        scope.plane,
        config,
        tmp_path,
        extra_args=("--controllers=reservation,migration", f"--descheduler-config={descheduler}"),
    )
    yield proc
    if proc.alive:
        proc.kill()


def replica_set(scope: Scope) -> dict[str, Any]:
    labels = {"app": "web"}
    body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": scope.namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }
    created: dict[str, Any] = scope.ok("POST", f"/apis/apps/v1/namespaces/{scope.namespace}/replicasets", body)
    return created


def web_pod(scope: Scope, name: str, rs: dict[str, Any], *, cpu: str = "2") -> dict[str, Any]:
    body = scope.pod_body(name, cpu=cpu)
    body["metadata"]["labels"] = {"app": "web"}
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": rs["metadata"]["name"],
            "uid": rs["metadata"]["uid"],
            "controller": True,
        }
    ]
    return body


def job_body(scope: Scope, name: str, pod: str, *, ttl: str = "5m", mode: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "podRef": {"namespace": scope.namespace, "name": pod},
        "ttl": ttl,
        # No kubelet runs for the test's nodes: the evicted pod goes at once instead of waiting for one.
        "deleteOptions": {"gracePeriodSeconds": 0},
    }
    if mode:
        spec["mode"] = mode
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": f"{scope.name}-{name}", "labels": {"pykoord.test/scope": scope.name}},
        "spec": spec,
    }


def job(scope: Scope, name: str) -> dict[str, Any]:
    found: dict[str, Any] = scope.ok("GET", f"{JOBS}/{scope.name}-{name}")
    return found


def status(scope: Scope, name: str) -> dict[str, Any]:
    return job(scope, name).get("status") or {}


def conditions(scope: Scope, name: str) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in status(scope, name).get("conditions", [])}


def pod_exists(scope: Scope, name: str) -> bool:
    return scope.plane.request("GET", f"/api/v1/namespaces/{scope.namespace}/pods/{name}").status == 200


def test_migration_through_a_reservation(scope: Scope, scheduler: SchedulerProcess) -> None:
    n1, n2 = scope.add_node("n1", cpu="4"), scope.add_node("n2", cpu="4")
    rs = replica_set(scope)
    scope.add_pods([web_pod(scope, "web-0", rs)])
    wait_until(lambda: bool(scope.pod("web-0")["spec"].get("nodeName")), timeout=30, what="web-0 bound")
    source = scope.pod("web-0")["spec"]["nodeName"]
    target = n2 if source == n1 else n1

    scope.ok("POST", JOBS, job_body(scope, "move", "web-0"))
    wait_until(lambda: status(scope, "move").get("nodeName") == target, timeout=30, what="Reservation scheduled")
    reservation_name = job(scope, "move")["spec"]["reservationOptions"]["reservationRef"]["name"]
    reservation = scope.ok("GET", f"{RESERVATIONS}/{reservation_name}")
    assert reservation["metadata"]["name"] == job(scope, "move")["metadata"]["uid"]
    assert reservation["spec"]["allocateOnce"] is True
    assert reservation["spec"]["owners"][0]["controller"]["uid"] == rs["metadata"]["uid"]

    wait_until(lambda: not pod_exists(scope, "web-0"), timeout=30, what="web-0 evicted")
    # Ordered just before the eviction, so that a replacement prefers it to a Reservation not yet evicted for.
    reservation = scope.ok("GET", f"{RESERVATIONS}/{reservation_name}")
    assert "scheduling.koordinator.sh/reservation-order" in reservation["metadata"]["labels"]
    assert status(scope, "move")["phase"] == "Running"
    wait_until(
        lambda: conditions(scope, "move").get("PodBoundReservation") == ("False", "WaitForPodBindReservation"),
        timeout=30,
        what="waiting for the replacement",
    )

    # The workload controller recreates the pod; the scheduler binds it into the Reservation.
    scope.add_pods([web_pod(scope, "web-1", rs)])
    wait_until(lambda: scope.pod("web-1")["spec"].get("nodeName") == target, timeout=30, what="web-1 bound")
    assert reservation_name in scope.pod("web-1")["metadata"]["annotations"][ALLOCATED]
    wait_until(
        lambda: conditions(scope, "move").get("BoundPodReady") == ("False", "WaitForBoundPodReady"),
        timeout=30,
        what="waiting for the replacement to be Ready",
    )

    # The kubelet reports it Ready.
    scope.plane.request(
        "PATCH",
        f"/api/v1/namespaces/{scope.namespace}/pods/web-1/status",
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type="application/merge-patch+json",
    )
    wait_until(lambda: status(scope, "move").get("phase") == "Succeeded", timeout=30, what="job Succeeded")
    final = status(scope, "move")
    assert final["status"] == "Complete"
    assert final["podRef"]["name"] == "web-1"
    assert final["message"] == f'Bind Pod "{scope.namespace}/web-1" in Reservation "{reservation_name}"'
    events = scope.plane.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events").json()["items"]
    reasons = {e["reason"] for e in events if e.get("regarding", {}).get("name") == f"{scope.name}-move"}
    assert {
        "ReservationCreated",
        "ReservationScheduled",
        "Evicting",
        "EvictComplete",
        "BoundPodReady",
        "Complete",
    } <= reasons


def test_unschedulable_reservation_never_evicts(scope: Scope, scheduler: SchedulerProcess) -> None:
    scope.add_node("n1", cpu="4")
    scope.add_node("n2", cpu="1")  # too small for the pod's 2 CPUs
    rs = replica_set(scope)
    scope.add_pods([web_pod(scope, "web-0", rs)])
    wait_until(lambda: bool(scope.pod("web-0")["spec"].get("nodeName")), timeout=30, what="web-0 bound")

    scope.ok("POST", JOBS, job_body(scope, "stuck", "web-0", ttl="8s"))
    wait_until(
        lambda: conditions(scope, "stuck").get("ReservationScheduled") == ("False", "Unschedulable"),
        timeout=30,
        what="the scheduler's failure copied into the job",
    )
    assert "Insufficient cpu" in status(scope, "stuck")["message"] or "node(s)" in status(scope, "stuck")["message"]
    wait_until(lambda: status(scope, "stuck").get("phase") == "Failed", timeout=30, what="job times out")
    final = status(scope, "stuck")
    assert (final["reason"], final["message"]) == ("Timeout", "Abort job caused by timeout")
    ref = job(scope, "stuck")["spec"]["reservationOptions"]["reservationRef"]["name"]
    left = scope.plane.request("GET", f"{RESERVATIONS}/{ref}")
    assert left.status == 404, f"{left.body[:600]!r}\n{scheduler.log_tail(80)}"
    assert pod_exists(scope, "web-0"), "the pod is never evicted while its Reservation is not Available"


def test_evict_directly(scope: Scope, scheduler: SchedulerProcess) -> None:
    scope.add_node("n1", cpu="4")
    rs = replica_set(scope)
    scope.add_pods([web_pod(scope, "web-0", rs)])
    wait_until(lambda: bool(scope.pod("web-0")["spec"].get("nodeName")), timeout=30, what="web-0 bound")
    scope.ok("POST", JOBS, job_body(scope, "direct", "web-0", mode="EvictDirectly"))
    wait_until(lambda: status(scope, "direct").get("phase") == "Succeeded", timeout=30, what="job Succeeded")
    assert not pod_exists(scope, "web-0")
    assert status(scope, "direct")["message"] == f'Pod "{scope.namespace}/web-0" has been evicted'
