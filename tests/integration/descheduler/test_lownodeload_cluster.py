"""LowNodeLoad end to end on the real API server: koord-scheduler runs the Reservation plugin and the
``reservation``, ``migration`` and ``descheduler`` controllers; the test plays the koordlets (NodeMetric
status), the workload controller (it recreates the evicted pod) and the kubelet (Ready)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRDS = [
    REPO / "deploy" / "crds" / name
    for name in (
        "scheduling.koordinator.sh_reservations.yaml",
        "scheduling.koordinator.sh_podmigrationjobs.yaml",
        "slo.koordinator.sh_nodemetrics.yaml",
    )
]
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
JOBS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
TEST_LABEL = "pykoord.test/scope"
PLUGINS = {
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}


def descheduler_config(scope: Scope) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "deschedulingInterval": "2s",
        "nodeSelector": {"matchLabels": {TEST_LABEL: scope.name}},
        "profiles": [
            {
                "name": "koord-descheduler",
                "plugins": {
                    "balance": {"enabled": [{"name": "LowNodeLoad"}]},
                    "evict": {"enabled": [{"name": "MigrationController"}]},
                },
                "pluginConfig": [
                    {
                        "name": "MigrationController",
                        "args": {
                            "apiVersion": "descheduler/v1alpha2",
                            "kind": "MigrationControllerArgs",
                            "namespaces": {"include": [scope.namespace]},
                            # No kubelet runs for the test's nodes: the evicted pod goes at once.
                            "defaultDeleteOptions": {"gracePeriodSeconds": 0},
                        },
                    },
                    {
                        "name": "LowNodeLoad",
                        "args": {
                            "apiVersion": "descheduler/v1alpha2",
                            "kind": "LowNodeLoadArgs",
                            "lowThresholds": {"cpu": 30},
                            "highThresholds": {"cpu": 60},
                            "anomalyCondition": {"consecutiveAbnormalities": 1},
                        },
                    },
                ],
            }
        ],
    }


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "lnl")
    for crd in CRDS:
        result = control_plane.request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            yaml.safe_load(crd.read_text().split("---", 1)[1]),
        )
        assert result.status in (201, 409), result.body[:300]
    for path in (RESERVATIONS, JOBS, NODEMETRICS):
        wait_until(
            lambda path=path: control_plane.request("GET", path).status == 200,
            timeout=30,  # type: ignore[misc]
            what=f"{path} served",
        )
    yield s
    for job in s.ok("GET", JOBS)["items"]:
        if job["spec"]["podRef"].get("namespace") == s.namespace:
            control_plane.request("DELETE", f"{JOBS}/{job['metadata']['name']}")
            ref = ((job["spec"].get("reservationOptions") or {}).get("reservationRef") or {}).get("name")
            if ref:
                control_plane.request("DELETE", f"{RESERVATIONS}/{ref}")
    for node in s.nodes:
        control_plane.request("DELETE", f"{NODEMETRICS}/{node}")
    s.cleanup()


def report(scope: Scope, node: str, pods: dict[str, str]) -> None:
    """What a koordlet writes: NodeMetric status with each pod's CPU usage."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "updateTime": now,
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "0", "memory": "0"}}},
        "podsMetric": [
            {"namespace": scope.namespace, "name": name, "podUsage": {"resources": {"cpu": cpu}}}
            for name, cpu in pods.items()
        ],
    }
    if scope.plane.request("GET", f"{NODEMETRICS}/{node}").status == 404:
        scope.ok(
            "POST",
            NODEMETRICS,
            {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}, "spec": {}},
        )
    result = scope.plane.request(
        "PATCH", f"{NODEMETRICS}/{node}/status", {"status": status}, content_type="application/merge-patch+json"
    )
    assert result.status == 200, result.body[:300]


def ready(scope: Scope, pod: str) -> None:
    result = scope.plane.request(
        "PATCH",
        f"/api/v1/namespaces/{scope.namespace}/pods/{pod}/status",
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        content_type="application/merge-patch+json",
    )
    assert result.status == 200, result.body[:300]


def jobs_for(scope: Scope) -> list[dict[str, Any]]:
    return [j for j in scope.ok("GET", JOBS)["items"] if j["spec"]["podRef"].get("namespace") == scope.namespace]


def test_hot_node_is_relieved_through_a_reservation(scope: Scope, tmp_path: Path) -> None:
    hot, cool = scope.add_node("hot", cpu="8"), scope.add_node("cool", cpu="8")
    rs = scope.ok(
        "POST",
        f"/apis/apps/v1/namespaces/{scope.namespace}/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": scope.namespace},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        },
    )
    owner = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"], "controller": True}
    ]

    def web(name: str, node: str | None) -> dict[str, Any]:
        body = scope.pod_body(name, cpu="1")
        body["metadata"]["labels"] = {"app": "web"}
        body["metadata"]["ownerReferences"] = owner
        if node:
            body["spec"]["nodeName"] = node
        return body

    scope.add_pods([web(f"web-{i}", hot) for i in range(3)])
    for i in range(3):  # The kubelet reports them Ready (arbitration holds a workload with a pod unavailable).
        ready(scope, f"web-{i}")
    # 3 x 1700m = 5100m of 8 CPUs (64%) on the hot node, above 60%; the cool node idles (under 30%).
    report(scope, hot, {f"web-{i}": "1700m" for i in range(3)})
    report(scope, cool, {})
    config = tmp_path / "descheduler.yaml"
    config.write_text(yaml.safe_dump(descheduler_config(scope)))
    sched_config = scheduler_config(scope)
    sched_config["profiles"][0]["plugins"] = PLUGINS
    proc = SchedulerProcess.start(
        scope.plane,
        sched_config,
        tmp_path,
        extra_args=("--controllers=reservation,migration,descheduler", f"--descheduler-config={config}"),
    )
    try:
        wait_until(lambda: len(jobs_for(scope)) >= 1, timeout=30, what="a PodMigrationJob")
        [job] = jobs_for(scope)
        moved = job["spec"]["podRef"]["name"]
        assert job["metadata"]["annotations"]["koordinator.sh/evict-trigger"] == "LowNodeLoad"
        assert job["metadata"]["annotations"]["koordinator.sh/evict-reason"].startswith("node is overutilized")
        wait_until(
            lambda: scope.plane.request("GET", f"/api/v1/namespaces/{scope.namespace}/pods/{moved}").status == 404,
            timeout=30,
            what=f"{moved} evicted",
        )
        reservation = job["metadata"]["uid"]
        assert scope.ok("GET", f"{RESERVATIONS}/{reservation}")["status"]["nodeName"] == cool
        # The koordlet reports the move; the workload controller recreates the pod.
        report(scope, hot, {f"web-{i}": "1700m" for i in range(3) if f"web-{i}" != moved})
        scope.add_pods([web("web-3", None)])
        wait_until(lambda: scope.pod("web-3")["spec"].get("nodeName") == cool, timeout=30, what="web-3 bound")
        ready(scope, "web-3")
        name = job["metadata"]["name"]
        wait_until(
            lambda: (scope.ok("GET", f"{JOBS}/{name}").get("status") or {}).get("phase") == "Succeeded",
            timeout=30,
            what="job Succeeded",
        )
        # Two more rounds: the hot node is now at 3400m (42%), under its high threshold: nothing more moves.
        time.sleep(5)
        assert len(jobs_for(scope)) == 1, [j["spec"]["podRef"] for j in jobs_for(scope)]
    finally:
        if proc.alive:
            proc.kill()
