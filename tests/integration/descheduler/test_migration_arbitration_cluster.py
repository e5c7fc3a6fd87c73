"""Arbitration against a real cluster of its own: kube-apiserver, kwok (nodes, and pods Running and Ready),
kube-controller-manager's ReplicaSet and disruption controllers (evicted pods come back; PDB status), and
koord-scheduler with the ``migration`` controller. Two PodMigrationJobs of one three-replica workload never
run at once (``maxUnavailablePerWorkload`` defaults to 1), a job the arbitration let through carries the
``passed-arbitration`` annotation and a new leader runs such a job without arbitrating it again, and an
eviction a PodDisruptionBudget forbids waits until the budget allows it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from controlplane import ControlPlane
from kubesched import TEST_LABEL, SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

JOBS = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
NODES = 3
PASSED = "descheduler.koordinator.sh/passed-arbitration"


@pytest.fixture(scope="module")
def own_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    previous = os.environ.get("PYKOORD_KCM_FLAGS")
    # kube-controller-manager's --controllers is a list: a second flag adds to the script's own.
    os.environ["PYKOORD_KCM_FLAGS"] = "--controllers=replicaset-controller,disruption-controller"
    plane = ControlPlane.up(tmp_path_factory.mktemp("arbitration-cluster"), kwok_nodes=NODES)
    try:
        plane.start_controller_manager()
        yield plane
    finally:
        if previous is None:
            os.environ.pop("PYKOORD_KCM_FLAGS", None)
        else:
            os.environ["PYKOORD_KCM_FLAGS"] = previous
        plane.down()


@pytest.fixture
def scope(own_plane: ControlPlane) -> Iterator[Scope]:
    s = Scope.create(own_plane, "arb")
    for i in range(NODES):
        result = own_plane.request(
            "PATCH",
            f"/api/v1/nodes/kwok-node-{i}",
            {"metadata": {"labels": {TEST_LABEL: s.name}}},
            content_type="application/merge-patch+json",
        )
        assert result.status == 200, result.body[:300]
    yield s


def migration_config(path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerConfiguration",
                "profiles": [
                    {
                        "name": "koord-descheduler",
                        "pluginConfig": [
                            {
                                "name": "MigrationController",
                                "args": {
                                    "apiVersion": "descheduler/v1alpha2",
                                    "kind": "MigrationControllerArgs",
                                    "defaultJobMode": "EvictDirectly",
                                    "defaultDeleteOptions": {"gracePeriodSeconds": 0},
                                    # Off, so that the second job is held by maxUnavailablePerWorkload only.
                                    "objectLimiters": {"workload": {"duration": "0s"}},
                                },
                            }
                        ],
                    }
                ],
            }
        )
    )
    return path


def replica_set(scope: Scope, replicas: int) -> None:
    labels = {"app": "web"}
    template = scope.pod_body("unused", cpu="3")
    template["metadata"] = {"labels": labels}
    scope.ok(
        "POST",
        f"/apis/apps/v1/namespaces/{scope.namespace}/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": scope.namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template},
        },
    )


def ready_pods(scope: Scope) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in scope.pods()
        if p["metadata"].get("deletionTimestamp") is None
        and any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions", []))
    )


def job_body(scope: Scope, name: str, pod: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": f"{scope.name}-{name}"},
        "spec": {"podRef": {"namespace": scope.namespace, "name": pod}, "ttl": "5m"},
    }


def phase(scope: Scope, name: str) -> str:
    job = scope.ok("GET", f"{JOBS}/{scope.name}-{name}")
    return str((job.get("status") or {}).get("phase") or "Pending")


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = migration_config(tmp_path / "descheduler.yaml")
    proc = SchedulerProcess.start(
        scope.plane,
        scheduler_config(scope),
        tmp_path,
        extra_args=("--controllers=migration", f"--descheduler-config={config}"),
    )
    yield proc
    if proc.alive:
        proc.kill()


def cordon(scope: Scope, node: str, *, unschedulable: bool) -> None:
    result = scope.plane.request(
        "PATCH",
        f"/api/v1/nodes/{node}",
        {"spec": {"unschedulable": unschedulable}},
        content_type="application/merge-patch+json",
    )
    assert result.status == 200, result.body[:300]


def pod_exists(scope: Scope, name: str) -> bool:
    return scope.plane.request("GET", f"/api/v1/namespaces/{scope.namespace}/pods/{name}").status == 200


def test_max_unavailable_per_workload_and_pdb(scope: Scope, scheduler: SchedulerProcess, tmp_path: Path) -> None:
    replica_set(scope, 3)  # 3 CPUs each: one pod per 4-CPU node
    wait_until(lambda: len(ready_pods(scope)) == 3, timeout=60, what="3 web pods Ready")
    first, second, _ = ready_pods(scope)
    node = scope.pod(first)["spec"]["nodeName"]

    # The replacement of the first pod cannot be placed while its node is cordoned: one pod unavailable.
    cordon(scope, node, unschedulable=True)
    scope.ok("POST", JOBS, job_body(scope, "a", first))
    wait_until(lambda: phase(scope, "a") == "Succeeded", timeout=30, what="job a Succeeded")
    assert len(ready_pods(scope)) == 2
    # The arbitration marked the job it let through, as Koordinator's arbitrator does.
    annotations = scope.ok("GET", f"{JOBS}/{scope.name}-a")["metadata"].get("annotations") or {}
    assert annotations.get(PASSED) == "true", annotations
    # maxUnavailablePerWorkload (unset: 1 of 3): the second job waits while the workload has a pod unavailable.
    scope.ok("POST", JOBS, job_body(scope, "b", second))
    time.sleep(5)
    assert phase(scope, "b") == "Pending", scheduler.log_tail(30)
    assert pod_exists(scope, second)

    # A new leader finds the second job marked as let through (as a leader that passed it and died before
    # running it leaves it): it runs it without arbitrating it again, the workload's limit notwithstanding.
    scheduler.kill()
    marked = scope.plane.request(
        "PATCH",
        f"{JOBS}/{scope.name}-b",
        {"metadata": {"annotations": {PASSED: "true"}}},
        content_type="application/merge-patch+json",
    )
    assert marked.status == 200, marked.body[:300]
    config = migration_config(tmp_path / "descheduler.yaml")
    successor = SchedulerProcess.start(
        scope.plane,
        scheduler_config(scope),
        tmp_path,
        name="successor",
        extra_args=("--controllers=migration", f"--descheduler-config={config}"),
    )
    try:
        wait_until(lambda: phase(scope, "b") == "Succeeded", timeout=60, what="the marked job b Succeeded")
        cordon(scope, node, unschedulable=False)
        wait_until(lambda: len(ready_pods(scope)) == 3, timeout=60, what="the workload whole again")
        _pdb_refuses_then_allows(scope)
    finally:
        successor.kill()


def _pdb_refuses_then_allows(scope: Scope) -> None:
    # A PodDisruptionBudget that allows no disruption: the eviction is refused and retried.
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": scope.namespace},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
    }
    scope.ok("POST", f"/apis/policy/v1/namespaces/{scope.namespace}/poddisruptionbudgets", pdb)
    pdb_path = f"/apis/policy/v1/namespaces/{scope.namespace}/poddisruptionbudgets/web"
    wait_until(
        lambda: (scope.ok("GET", pdb_path).get("status") or {}).get("currentHealthy") == 3,
        timeout=30,
        what="the disruption controller's PDB status",
    )
    target = ready_pods(scope)[0]
    scope.ok("POST", JOBS, job_body(scope, "c", target))
    time.sleep(6)  # two retries of a refused eviction
    assert phase(scope, "c") == "Running"
    assert target in ready_pods(scope), "the PDB allows no disruption: the pod stays"
    events = scope.plane.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events").json()["items"]
    refused = [e for e in events if e.get("regarding", {}).get("name") == f"{scope.name}-c" and e["type"] == "Warning"]
    assert refused and "Failed evict Pod" in refused[0]["note"], refused

    scope.plane.request("PATCH", pdb_path, {"spec": {"minAvailable": 2}}, content_type="application/merge-patch+json")
    wait_until(lambda: phase(scope, "c") == "Succeeded", timeout=60, what="job c Succeeded once the PDB allows it")
