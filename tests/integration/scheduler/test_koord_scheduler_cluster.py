"""koord-scheduler in cluster mode against the test run's real kube-apiserver + etcd.

Each test runs ``.venv/bin/koord-scheduler`` as a subprocess in its own scope (namespace, node label,
schedulerName, Lease); see ``kubesched.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane
from kubesched import PodWatch, SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def scope(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Scope]:
    prefix = request.node.name.removeprefix("test_").replace("_", "-")[:30].rstrip("-")
    s = Scope.create(control_plane, prefix)
    yield s
    s.cleanup()


@pytest.fixture
def processes() -> Iterator[list[SchedulerProcess]]:
    started: list[SchedulerProcess] = []
    yield started
    for proc in started:
        if proc.alive:
            proc.kill()


def start(
    scope: Scope, processes: list[SchedulerProcess], tmp_path: Path, name: str = "koord", **config_options: object
) -> SchedulerProcess:
    proc = SchedulerProcess.start(
        scope.plane,
        scheduler_config(scope, **config_options),
        tmp_path,  # type: ignore[arg-type]
        name=name,
    )
    processes.append(proc)
    return proc


def test_binds_500_pods_on_50_nodes_within_capacity(
    scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    # 50 nodes of two sizes; 500 pods need 62% of the cpu, so fit decides where they go.
    for i in range(50):
        scope.add_node(f"n{i}", cpu="2" if i % 2 else "4", memory="4Gi")
    scope.add_pods(scope.pod_body(f"p{i}", cpu="150m" if i % 3 else "300m") for i in range(500))
    proc = start(scope, processes, tmp_path)

    pods = scope.wait_all_bound(500, timeout=90)

    scope.assert_within_capacity(pods)
    assert len({p["spec"]["nodeName"] for p in pods}) == 50  # spread over every node
    assert all(
        any(c["type"] == "PodScheduled" and c["status"] == "True" for c in p["status"].get("conditions", []))
        for p in pods
    )
    assert proc.metric("scheduler_schedule_attempts_total", result="scheduled", profile=scope.scheduler_name) == 500
    wait_until(lambda: len(scope.events(reason="Scheduled")) == 500, timeout=30, what="500 Scheduled events")
    event = scope.events(reason="Scheduled")[0]
    assert event["type"] == "Normal"
    assert event["reportingController"] == scope.scheduler_name
    pod_name = event["regarding"]["name"]
    node_of = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    assert event["note"] == f"Successfully assigned {scope.namespace}/{pod_name} to {node_of[pod_name]}"
    assert proc.terminate() == 0


def test_unschedulable_pod_is_reported_then_scheduled_when_a_node_fits(
    scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    scope.add_node("small", cpu="1")
    scope.add_pods([scope.pod_body("big", cpu="3")])
    start(scope, processes, tmp_path)

    def condition() -> dict[str, str] | None:
        conditions = scope.pod("big")["status"].get("conditions", [])
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)

    wait_until(lambda: condition() is not None, timeout=20, what="PodScheduled condition")
    cond = condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"].startswith("0/") and "Insufficient cpu" in cond["message"]
    wait_until(lambda: bool(scope.events(reason="FailedScheduling")), timeout=10, what="FailedScheduling event")
    failed = scope.events(reason="FailedScheduling")[0]
    assert (failed["type"], failed["action"], failed["regarding"]["name"]) == ("Warning", "Scheduling", "big")
    assert "Insufficient cpu" in failed["note"]

    added = time.monotonic()
    node = scope.add_node("large", cpu="8")
    wait_until(lambda: scope.pod("big")["spec"].get("nodeName") == node, timeout=20, what="big bound to large")
    assert time.monotonic() - added < 15


def test_pods_for_another_scheduler_are_left_alone(
    scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    scope.add_node("n")
    scope.add_pods([scope.pod_body("theirs", scheduler_name="someone-else"), scope.pod_body("ours")])
    start(scope, processes, tmp_path)
    scope.wait_all_bound(1, timeout=20)
    time.sleep(2)
    theirs = scope.pod("theirs")
    assert not theirs["spec"].get("nodeName")
    assert not theirs["status"].get("conditions")
    assert not [e for e in scope.events() if e["regarding"]["name"] == "theirs"]


def test_a_malformed_node_is_logged_and_skipped(
    scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    # The API server validates quantities in node status, so a garbage quantity cannot be stored; a
    # node condition without a type can, and the parser refuses it (status.conditions[0].type).
    bad = scope.node_body(f"{scope.name}-bad")
    bad["status"]["conditions"] = [{"status": "True"}]
    scope.add_node_body(bad)
    for i in range(3):
        scope.add_node(f"good{i}", cpu="2")
    scope.add_pods(scope.pod_body(f"p{i}", cpu="500m") for i in range(12))
    proc = start(scope, processes, tmp_path)

    pods = scope.wait_all_bound(12, timeout=30)

    assert f"{scope.name}-bad" not in {p["spec"]["nodeName"] for p in pods}
    log = proc.log_tail(400)
    assert f"Node {scope.name}-bad ignored (Invalid)" in log
    assert "status.conditions[0].type" in log


def test_sigkill_mid_run_then_restart_leaves_nothing_pending_or_bound_twice(
    scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    for i in range(20):
        scope.add_node(f"n{i}", cpu="4")
    scope.add_pods(scope.pod_body(f"p{i}", cpu="200m") for i in range(300))
    with PodWatch(scope.plane, scope.namespace) as watch:
        # A low qps makes the run last a few seconds, so the kill lands in the middle of it.
        first = start(scope, processes, tmp_path, name="first", qps=60, burst=10)
        wait_until(lambda: scope.bound_count() >= 60, timeout=30, what="first bindings")
        first.kill()
        assert scope.bound_count() < 300, "the run finished before the kill"

        start(scope, processes, tmp_path, name="second")
        pods = scope.wait_all_bound(300, timeout=60)
        time.sleep(1)

    assert watch.rebound() == {}
    assert len(watch.nodes_seen) == 300
    scope.assert_within_capacity(pods)


def test_survives_an_api_server_restart(
    control_plane: ControlPlane, scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    for i in range(10):
        scope.add_node(f"n{i}", cpu="8")
    scope.add_pods(scope.pod_body(f"a{i}") for i in range(50))
    proc = start(scope, processes, tmp_path)
    scope.wait_all_bound(50, timeout=30)

    control_plane.restart_apiserver()
    # Pods created after the restart can only be seen through re-established watches.
    scope.add_pods(scope.pod_body(f"b{i}") for i in range(100))
    pods = scope.wait_all_bound(150, timeout=60)

    assert proc.alive
    scope.assert_within_capacity(pods)
    assert proc.get("/readyz")[0] == 200
    # Every reflector retried during the outage; the log says so once, not once per watch and attempt.
    retries = [
        line
        for line in proc.log_path.read_text().splitlines()
        if "WARNING kubeapi.reflector" in line and "retrying in" in line
    ]
    assert len(retries) <= 1, retries


def test_two_replicas_one_leader_and_failover(scope: Scope, processes: list[SchedulerProcess], tmp_path: Path) -> None:
    scope.add_node("n", cpu="64")
    lease = ("4s", "3s", "500ms")
    a = start(scope, processes, tmp_path, name="a", leader_elect=True, lease=lease)
    b = start(scope, processes, tmp_path, name="b", leader_elect=True, lease=lease)
    scope.add_pods(scope.pod_body(f"p{i}") for i in range(40))
    scope.wait_all_bound(40, timeout=30)

    def scheduled(proc: SchedulerProcess) -> float:
        return proc.metric("scheduler_schedule_attempts_total", result="scheduled", profile=scope.scheduler_name)

    counts = sorted([scheduled(a), scheduled(b)])
    assert counts == [0, 40]
    leader, standby = (a, b) if scheduled(a) else (b, a)
    assert leader.metric("leader_election_master_status", name=scope.scheduler_name) == 1
    assert standby.metric("leader_election_master_status", name=scope.scheduler_name) == 0

    leader.kill()
    killed = time.monotonic()
    scope.add_pods(scope.pod_body(f"q{i}") for i in range(20))
    scope.wait_all_bound(60, timeout=30)
    took = time.monotonic() - killed
    assert scheduled(standby) == 20
    assert took < 4 + 3, f"failover took {took:.1f}s"


def test_namespace_selector_follows_the_watched_namespace_labels(
    scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    """Required pod affinity to cache pods in the namespaces labelled team=<scope>: the Namespace watch
    feeds InterPodAffinity, and relabelling the namespace changes the next decision (cached counts dropped)."""
    team = {"pykoord.test/team": scope.name}
    shop = f"{scope.name}-shop"
    scope.ok(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": shop, "labels": team}},
    )
    try:
        scope.add_node("a")
        node_b = scope.add_node("b")
        cache = scope.pod_body("cache")
        cache["metadata"].update(namespace=shop, labels={"app": "cache"})
        cache["spec"]["nodeName"] = node_b
        scope.ok("POST", f"/api/v1/namespaces/{shop}/pods", cache)

        def near_cache(name: str) -> dict[str, object]:
            body = scope.pod_body(name)
            body["spec"]["affinity"] = {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "cache"}},
                            "namespaceSelector": {"matchLabels": team},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            }
            return body

        scope.add_pods([near_cache("first")])
        start(scope, processes, tmp_path)
        wait_until(lambda: scope.pod("first")["spec"].get("nodeName") == node_b, timeout=30, what="first on b")

        result = scope.plane.request(
            "PATCH",
            f"/api/v1/namespaces/{shop}",
            {"metadata": {"labels": {"pykoord.test/team": "someone-else"}}},
            content_type="application/merge-patch+json",
        )
        assert result.status == 200, result.body[:300]
        time.sleep(1)  # the watch delivers the new labels
        scope.add_pods([near_cache("second")])

        def condition() -> dict[str, str] | None:
            conditions = scope.pod("second")["status"].get("conditions", [])
            return next((c for c in conditions if c["type"] == "PodScheduled"), None)

        wait_until(lambda: condition() is not None, timeout=30, what="second's PodScheduled condition")
        cond = condition()
        assert cond is not None and cond["status"] == "False", cond
        assert "didn't match pod affinity rules" in cond["message"]
        assert not scope.pod("second")["spec"].get("nodeName")
    finally:
        scope.plane.request("DELETE", f"/api/v1/namespaces/{shop}/pods?gracePeriodSeconds=0")
        scope.plane.request("DELETE", f"/api/v1/namespaces/{shop}")
