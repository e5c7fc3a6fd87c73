"""The MigrationController's evictors and ``nodeFit`` against the real API server.

- ``evictionPolicy: Delete`` deletes the job's pod although a PodDisruptionBudget forbids its eviction
  (the Eviction API is refused for the same workload), and a job labelled
  ``koordinator.sh/evict-policy: SoftEviction`` only annotates its pod.
- ``nodeFit: true``: the ``descheduler`` controller (PodLifeTime) plans a job for the pod that fits the
  other node and none for the pod that does not.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import TEST_LABEL, SchedulerProcess, Scope, scheduler_config, wait_until

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
SOFT_EVICTION = "scheduling.koordinator.sh/soft-eviction"


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "evictors")
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
    control_plane.request("DELETE", f"/apis/policy/v1/namespaces/{s.namespace}/poddisruptionbudgets/web")
    s.cleanup()


def config(scope: Scope, migration_args: dict[str, Any], **top: Any) -> dict[str, Any]:
    args = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "MigrationControllerArgs",
        "namespaces": {"include": [scope.namespace]},
        "defaultDeleteOptions": {"gracePeriodSeconds": 0},  # no kubelet: a deleted pod goes at once
        **migration_args,
    }
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        **top,
        "profiles": [{"name": "koord-descheduler", "pluginConfig": [{"name": "MigrationController", "args": args}]}],
    }


def start(scope: Scope, tmp_path: Path, body: dict[str, Any], controllers: str) -> SchedulerProcess:
    path = tmp_path / "descheduler.yaml"
    path.write_text(yaml.safe_dump(body))
    return SchedulerProcess.start(
        scope.plane,
        scheduler_config(scope),
        tmp_path,
        extra_args=(f"--controllers={controllers}", f"--descheduler-config={path}"),
    )


def workload(scope: Scope, node: str, pods: dict[str, str]) -> None:
    """A ReplicaSet and its Ready pods (name -> CPU request) bound to ``node``."""
    rs = scope.ok(
        "POST",
        f"/apis/apps/v1/namespaces/{scope.namespace}/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": scope.namespace},
            "spec": {
                "replicas": len(pods),
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        },
    )
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"]}
    bodies = []
    for name, cpu in pods.items():
        body = scope.pod_body(name, cpu=cpu)
        body["metadata"]["labels"] = {"app": "web"}
        body["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
        body["spec"]["nodeName"] = node
        bodies.append(body)
    scope.add_pods(bodies)
    for name in pods:
        result = scope.plane.request(
            "PATCH",
            f"/api/v1/namespaces/{scope.namespace}/pods/{name}/status",
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            content_type="application/merge-patch+json",
        )
        assert result.status == 200, result.body[:300]


def pod_exists(scope: Scope, name: str) -> bool:
    return scope.plane.request("GET", f"/api/v1/namespaces/{scope.namespace}/pods/{name}").status == 200


def job_body(scope: Scope, name: str, pod: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": f"{scope.name}-{name}", "labels": labels or {}},
        "spec": {
            "podRef": {"namespace": scope.namespace, "name": pod},
            "mode": "EvictDirectly",
            "ttl": "5m",
            "deleteOptions": {"gracePeriodSeconds": 0},
        },
    }


def phase(scope: Scope, name: str) -> str:
    return str((scope.ok("GET", f"{JOBS}/{scope.name}-{name}").get("status") or {}).get("phase", ""))


def test_delete_evictor_and_soft_eviction(scope: Scope, tmp_path: Path) -> None:
    n1 = scope.add_node("n1", cpu="8")
    workload(scope, n1, {"web-0": "1", "web-1": "1", "web-2": "1"})
    scope.ok(
        "POST",
        f"/apis/policy/v1/namespaces/{scope.namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    # The budget forbids evicting any of the pods through the Eviction API.
    refused = scope.plane.request(
        "POST",
        f"/api/v1/namespaces/{scope.namespace}/pods/web-2/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-2", "namespace": scope.namespace}},
    )
    assert refused.status == 429, refused.body[:300]

    args = {
        "evictionPolicy": "Delete",
        "skipEvictionGates": ["ExpectedReplicas", "MaxUnavailablePerWorkload"],
        "objectLimiters": {"workload": {"duration": "0s"}},
    }
    proc = start(scope, tmp_path, config(scope, args), "migration")
    try:
        scope.ok("POST", JOBS, job_body(scope, "delete", "web-0"))
        wait_until(lambda: phase(scope, "delete") == "Succeeded", timeout=30, what="the Delete job Succeeded")
        assert not pod_exists(scope, "web-0")

        labels = {"koordinator.sh/evict-policy": "SoftEviction"}
        scope.ok("POST", JOBS, job_body(scope, "soft", "web-1", labels=labels))
        wait_until(
            lambda: SOFT_EVICTION in (scope.pod("web-1")["metadata"].get("annotations") or {}),
            timeout=30,
            what="web-1 annotated for soft eviction",
        )
        spec = json.loads(scope.pod("web-1")["metadata"]["annotations"][SOFT_EVICTION])
        assert spec["reason"] == "NotSet" and spec["deleteOptions"] == {"gracePeriodSeconds": 0}
        time.sleep(2)
        assert pod_exists(scope, "web-1"), "SoftEviction leaves the pod to its controller"
        assert phase(scope, "soft") == "Running"
    finally:
        if proc.alive:
            proc.kill()


def test_node_fit_plans_only_the_pod_that_fits_another_node(scope: Scope, tmp_path: Path) -> None:
    n1 = scope.add_node("n1", cpu="8")
    scope.add_node("n2", cpu="2")
    workload(scope, n1, {"big": "3", "small": "1"})
    body = config(
        scope,
        {"nodeFit": True},
        deschedulingInterval="1s",
        nodeSelector={"matchLabels": {TEST_LABEL: scope.name}},
    )
    body["profiles"][0]["plugins"] = {
        "deschedule": {"enabled": [{"name": "PodLifeTime"}]},
        "evict": {"enabled": [{"name": "MigrationController"}]},
    }
    body["profiles"][0]["pluginConfig"].append({"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 1}})
    proc = start(scope, tmp_path, body, "descheduler")

    def planned() -> list[str]:
        items = scope.ok("GET", JOBS)["items"]
        return sorted(j["spec"]["podRef"]["name"] for j in items if j["spec"]["podRef"]["namespace"] == scope.namespace)

    try:
        wait_until(lambda: planned() == ["small"], timeout=30, what="a job for the pod that fits n2")
        time.sleep(3)  # a few more rounds
        assert planned() == ["small"], f"{planned()}\n{proc.log_tail(40)}"
    finally:
        if proc.alive:
            proc.kill()
