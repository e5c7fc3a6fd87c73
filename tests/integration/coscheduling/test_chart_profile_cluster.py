"""Koordinator's chart scheduler configuration, rendered with its default values and unchanged, runs the
koord-scheduler binary against the real API server; under it, job-level preemption evicts lower-priority
pods for a whole gang at once, and an ordinary high-priority pod still preempts.

The configuration file is exactly what the chart renders (scheduler name ``koord-scheduler``, leader
election in ``koordinator-system``); only the kubeconfig comes from the command line. Pods stay on this
test's kwok nodes through a node selector.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "preemption"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "deploy"))

from helm import chart_scheduler_config
from kubesched import REPO, SchedulerProcess, Scope, scheduler_config, wait_until
from test_preemption_cluster import HIGH, LOW, gone, kwok_node, pod

pytestmark = pytest.mark.integration

ANN = "gang.scheduling.koordinator.sh/"
CHART_SCHEDULER = "koord-scheduler"


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    for crd in sorted((REPO / "deploy" / "crds").glob("*.yaml")):
        for body in [d for d in yaml.safe_load_all(crd.read_text()) if d]:
            result = control_plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
            assert result.status in (201, 409), result.body[:300]
    for name, value in ((LOW, 10), (HIGH, 1000)):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        result = control_plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
        assert result.status in (201, 409), result.body[:300]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koordinator-system"}}
    result = control_plane.request("POST", "/api/v1/namespaces", namespace)
    assert result.status in (201, 409), result.body[:300]
    wait_until(
        lambda: control_plane.request("GET", "/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups").status == 200,
        timeout=30,
        what="the PodGroup CRD served",
    )
    s = Scope.create(control_plane, "chartpre")
    yield s
    s.cleanup()


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = chart_scheduler_config()
    assert config["profiles"][0]["schedulerName"] == CHART_SCHEDULER
    proc = SchedulerProcess.start(scope.plane, config, tmp_path, extra_args=("--controllers=reservation",))
    yield proc
    if proc.alive:
        proc.kill()


def chart_pod(
    scope: Scope, name: str, *, cpu: str, priority_class: str, gang: str = "", min_available: int = 0
) -> dict[str, Any]:
    body = pod(scope, name, cpu=cpu, priority_class=priority_class)
    body["spec"]["schedulerName"] = CHART_SCHEDULER
    if gang:
        body["metadata"]["annotations"] = {ANN + "name": gang, ANN + "min-available": str(min_available)}
    return body


def node_of(scope: Scope, name: str) -> str:
    return str(scope.pod(name)["spec"].get("nodeName") or "")


def test_chart_config_unchanged_starts_and_schedules(scope: Scope, scheduler: SchedulerProcess) -> None:
    node = kwok_node(scope, "n1", cpu="2")
    scope.add_pods([chart_pod(scope, "plain", cpu="500m", priority_class=LOW)])
    wait_until(lambda: node_of(scope, "plain") == node, timeout=30, what="the pod bound")
    assert scheduler.alive


def test_gang_preempts_as_a_unit_and_ordinary_pod_still_preempts(scope: Scope, scheduler: SchedulerProcess) -> None:
    nodes = [kwok_node(scope, f"n{i}", cpu="2") for i in range(3)]
    scope.add_pods([chart_pod(scope, f"low{i}", cpu="1500m", priority_class=LOW) for i in range(3)])
    scope.wait_all_bound(3, timeout=30)
    # (v) a gang of three high-priority pods, each needing a whole node: all three victims go at once.
    gang = [chart_pod(scope, f"g{i}", cpu="1500m", priority_class=HIGH, gang="g", min_available=3) for i in range(3)]
    scope.add_pods(gang)
    wait_until(lambda: all(gone(scope, f"low{i}") for i in range(3)), timeout=60, what="the three victims deleted")
    wait_until(lambda: all(node_of(scope, f"g{i}") for i in range(3)), timeout=60, what="the gang bound")
    assert sorted(node_of(scope, f"g{i}") for i in range(3)) == sorted(nodes)
    victims = sorted(e["regarding"]["name"] for e in scope.events(reason="Preempted"))
    assert victims == ["low0", "low1", "low2"]
    # An ordinary high-priority pod still preempts under the chart's profile (no DefaultPreemption there).
    extra = kwok_node(scope, "n3", cpu="2")
    scope.add_pods([chart_pod(scope, "low3", cpu="1500m", priority_class=LOW)])
    wait_until(lambda: node_of(scope, "low3") == extra, timeout=30, what="low3 bound")
    scope.add_pods([chart_pod(scope, "solo", cpu="1500m", priority_class=HIGH)])
    wait_until(lambda: gone(scope, "low3"), timeout=60, what="low3 preempted")
    wait_until(lambda: node_of(scope, "solo") == extra, timeout=60, what="solo bound")
    condition_seen = [e for e in scope.events(reason="Preempted") if e["regarding"]["name"] == "low3"]
    assert condition_seen, "the victim got a Preempted event"


def test_gang_that_cannot_complete_preempts_nobody(scope: Scope, scheduler: SchedulerProcess) -> None:
    for i in range(2):
        kwok_node(scope, f"n{i}", cpu="2")
    scope.add_pods([chart_pod(scope, f"low{i}", cpu="1500m", priority_class=LOW) for i in range(2)])
    scope.wait_all_bound(2, timeout=30)
    scope.add_pods(
        [chart_pod(scope, f"g{i}", cpu="1500m", priority_class=HIGH, gang="g", min_available=3) for i in range(3)]
    )
    wait_until(lambda: len(scope.events(reason="FailedScheduling")) >= 3, timeout=30, what="the gang rejected")
    time.sleep(3)
    assert not gone(scope, "low0") and not gone(scope, "low1")
    assert scope.events(reason="Preempted") == []
    assert all(not node_of(scope, f"g{i}") for i in range(3))


def test_stock_profile_with_default_preemption_evicts_nothing_for_a_gang_that_cannot_complete(
    scope: Scope, tmp_path: Path
) -> None:
    """A stock profile plus Coscheduling keeps DefaultPreemption at PostFilter: a gang member that could
    not complete its gang even after preempting evicts nobody, and a plain pod still preempts."""
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    try:
        for i in range(2):
            kwok_node(scope, f"n{i}", cpu="2")
        scope.add_pods([pod(scope, f"low{i}", cpu="1500m", priority_class=LOW) for i in range(2)])
        scope.wait_all_bound(2, timeout=30)
        members = [pod(scope, f"g{i}", cpu="1500m", priority_class=HIGH) for i in range(3)]
        for body in members:
            body["metadata"]["annotations"] = {ANN + "name": "g", ANN + "min-available": "3"}
        scope.add_pods(members)
        wait_until(
            lambda: any(
                "would not be satisfied even with this pod" in e.get("note", "")
                for e in scope.events(reason="FailedScheduling")
            ),
            timeout=30,
            what=f"a member refused preemption\n{proc.log_tail()}",
        )
        time.sleep(3)
        assert not gone(scope, "low0") and not gone(scope, "low1")
        assert scope.events(reason="Preempted") == []
        assert all(not node_of(scope, f"g{i}") for i in range(3))
        for i in range(3):
            scope.plane.request("DELETE", f"/api/v1/namespaces/{scope.name}/pods/g{i}?gracePeriodSeconds=0")
        scope.add_pods([pod(scope, "solo", cpu="1500m", priority_class=HIGH)])
        wait_until(lambda: gone(scope, "low0") or gone(scope, "low1"), timeout=60, what="a plain pod preempting")
        wait_until(lambda: bool(node_of(scope, "solo")), timeout=60, what="solo bound")
        assert proc.alive
    finally:
        proc.kill()
