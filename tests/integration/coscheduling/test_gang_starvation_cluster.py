"""A gang that cannot complete, against the real API server, with the pods there before koord-scheduler
starts (a restart or failover with a backlog).

Three 4-cpu nodes; gang ``big`` of three 3-cpu pods (fits); gang ``never`` of four 1-cpu pods with
min-available 4 (3 cpu are left: it can never complete); a plain 1-cpu pod and a PodGroup gang ``small``
of two 500m pods (both fit). The API server lists pods by name, so the first pass tries ``big``, then
``never``, then the others.
"""

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

CRD = REPO / "deploy" / "crds" / "scheduling.sigs.k8s.io_podgroups.yaml"
ANN = "gang.scheduling.koordinator.sh/"
NEVER = [f"never-{i}" for i in range(4)]
FITS = ["plain", "small-0", "small-1"]


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    docs = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    result = control_plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", docs[0])
    assert result.status in (201, 409), result.body[:300]
    s = Scope.create(control_plane, "starve")
    wait_until(
        lambda: control_plane.request("GET", podgroups_path(s)).status == 200, timeout=30, what="PodGroup CRD served"
    )
    yield s
    s.cleanup()


def podgroups_path(scope: Scope) -> str:
    return f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{scope.namespace}/podgroups"


def with_meta(
    body: dict[str, Any], *, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    body["metadata"]["annotations"] = annotations or {}
    body["metadata"]["labels"] = labels or {}
    return body


def create_backlog(scope: Scope) -> None:
    for n in ("n1", "n2", "n3"):
        scope.add_node(n, cpu="4")
    scope.ok(
        "POST",
        podgroups_path(scope),
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "small", "namespace": scope.namespace},
            "spec": {"minMember": 2},
        },
    )
    big = {ANN + "name": "big", ANN + "min-available": "3"}
    never = {ANN + "name": "never", ANN + "min-available": "4"}
    pods = [with_meta(scope.pod_body(f"big-{i}", cpu="3"), annotations=big) for i in range(3)]
    pods += [with_meta(scope.pod_body(n, cpu="1"), annotations=never) for n in NEVER]
    pods.append(scope.pod_body("plain", cpu="1"))
    pods += [
        with_meta(scope.pod_body(f"small-{i}", cpu="500m"), labels={"pod-group.scheduling.sigs.k8s.io": "small"})
        for i in range(2)
    ]
    for body in pods:  # one by one, before the scheduler starts
        scope.add_pods([body])


def node_of(scope: Scope) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in scope.pods()}


def unschedulable_attempts(proc: SchedulerProcess, scope: Scope) -> float:
    return proc.metric("scheduler_schedule_attempts_total", result="unschedulable", profile=scope.scheduler_name)


def test_backlog_with_a_gang_that_cannot_complete(scope: Scope, tmp_path: Path) -> None:
    create_backlog(scope)
    config = scheduler_config(scope)
    config["podInitialBackoffSeconds"], config["podMaxBackoffSeconds"] = 1, 10  # kube-scheduler's defaults
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}
    proc = SchedulerProcess.start(scope.plane, config, tmp_path, extra_args=("--controllers=reservation,podgroup",))
    try:
        ready = time.monotonic()
        # The pods that fit bind within 10 s of the scheduler being ready; `never` holds nothing.
        wait_until(
            lambda: all(node_of(scope)[n] for n in [*FITS, "big-0", "big-1", "big-2"]),
            timeout=10,
            what="plain, small and big bound",
        )
        assert time.monotonic() - ready < 10
        assert not any(node_of(scope)[n] for n in NEVER)

        # The gang is retried as a group with backoff (1, 2, 4, 8, then 10 s), not in a loop, even while
        # the cluster keeps changing: a small pod comes and goes on a node every 500 ms, and each deletion
        # may help the gang (it frees cpu), so it moves the members out of the unschedulable pool. Over
        # 20 s that is at most 6 rounds of 4 attempts (a loop made hundreds of attempts a second).
        before = unschedulable_attempts(proc, scope)
        churn = scope.pod_body("churn", cpu="10m")
        churn["spec"]["nodeName"] = scope.nodes[0]
        path = f"/api/v1/namespaces/{scope.namespace}/pods"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            scope.ok("POST", path, churn)
            time.sleep(0.25)
            scope.ok("DELETE", f"{path}/churn?gracePeriodSeconds=0")
            wait_until(
                lambda: scope.plane.request("GET", f"{path}/churn").status == 404,
                timeout=10,
                interval=0.05,
                what="churn pod gone",
            )
            time.sleep(0.25)
        during = unschedulable_attempts(proc, scope) - before
        assert during <= 4 * 6, f"{during:.0f} unschedulable attempts in 20 s"
        assert not any(node_of(scope)[n] for n in NEVER)

        # Freeing capacity binds the whole gang, by the same process (no restart, no leader change).
        for name in ("big-0", "big-1"):
            scope.ok("DELETE", f"/api/v1/namespaces/{scope.namespace}/pods/{name}?gracePeriodSeconds=0")
        wait_until(lambda: all(node_of(scope).get(n) for n in NEVER), timeout=30, what="gang `never` bound")
        assert proc.alive
    finally:
        proc.kill()
