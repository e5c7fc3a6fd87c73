"""DefaultPreemption against the real API server: the koord-scheduler binary preempts through the API.

Nodes are kwok-managed fake nodes (``kwok.x-k8s.io/node: fake``), so bound pods run and a deleted victim
really goes away (with plain nodes and no kubelet it would stay Terminating forever). Priorities come
from PriorityClasses: the Priority admission plugin rejects a bare ``spec.priority``. There is no
disruption controller, so a PodDisruptionBudget's ``disruptionsAllowed`` stays 0: it protects every pod
it selects.
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import TEST_LABEL, SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

LOW, HIGH = "pykoord-it-preempt-low", "pykoord-it-preempt-high"


class NominationWatch:
    """Records every ``status.nominatedNodeName`` each pod of a namespace was seen with."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.nominated: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> NominationWatch:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        plane = self.scope.plane
        rv = self.scope.ok("GET", f"/api/v1/namespaces/{self.scope.namespace}/pods")["metadata"]["resourceVersion"]
        context = ssl.create_default_context(cafile=str(plane.ca_file))
        while not self._stop.is_set():
            path = f"/api/v1/namespaces/{self.scope.namespace}/pods?watch=1&resourceVersion={rv}&timeoutSeconds=5"
            request = urllib.request.Request(plane.server + path, headers={"Authorization": f"Bearer {plane.token}"})
            try:
                with urllib.request.urlopen(request, context=context, timeout=10) as resp:
                    self._ready.set()
                    for line in resp:
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            break
                        obj = event["object"]
                        rv = obj["metadata"]["resourceVersion"]
                        node = obj.get("status", {}).get("nominatedNodeName")
                        if node:
                            self.nominated.setdefault(obj["metadata"]["name"], set()).add(node)
            except (OSError, ValueError):
                self._stop.wait(0.5)


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "preempt")
    for name, value in ((LOW, 10), (HIGH, 1000)):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        result = control_plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
        assert result.status in (201, 409), result.body[:300]
    yield s
    s.cleanup()


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    proc = SchedulerProcess.start(scope.plane, scheduler_config(scope), tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def kwok_node(scope: Scope, name: str, cpu: str) -> str:
    body = scope.node_body(f"{scope.name}-{name}", cpu=cpu)
    body["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    return scope.add_node_body(body)


def pod(
    scope: Scope,
    name: str,
    *,
    cpu: str,
    priority_class: str,
    labels: dict[str, str] | None = None,
    node: str | None = None,
) -> dict[str, Any]:
    body = scope.pod_body(name, cpu=cpu)
    body["spec"]["priorityClassName"] = priority_class
    body["spec"]["terminationGracePeriodSeconds"] = 0
    if labels:
        body["metadata"]["labels"] = labels
    if node:  # pin to a node through the scheduler (nodeSelector on the hostname), not spec.nodeName
        body["spec"]["nodeSelector"] = {TEST_LABEL: scope.name, "kubernetes.io/hostname": node}
    return body


def gone(scope: Scope, name: str) -> bool:
    return all(p["metadata"]["name"] != name for p in scope.pods())


def test_high_priority_pod_preempts_low_priority_one(scope: Scope, scheduler: SchedulerProcess) -> None:
    node = kwok_node(scope, "n1", cpu="2")
    scope.add_pods([pod(scope, "low", cpu="1500m", priority_class=LOW)])
    scope.wait_all_bound(1, timeout=30)
    with NominationWatch(scope) as watch:
        scope.add_pods([pod(scope, "high", cpu="1500m", priority_class=HIGH)])
        wait_until(lambda: gone(scope, "low"), timeout=60, what="the victim deleted")
        wait_until(lambda: scope.pod("high")["spec"].get("nodeName") == node, timeout=60, what="preemptor bound")
    assert watch.nominated.get("high") == {node}, "status.nominatedNodeName was set to the node"
    preempted = scope.events(reason="Preempted")
    assert [e["regarding"]["name"] for e in preempted] == ["low"]
    assert scheduler.metric("scheduler_preemption_attempts_total") >= 1


def test_pdb_protected_pod_survives_when_another_victim_exists(scope: Scope, scheduler: SchedulerProcess) -> None:
    node = kwok_node(scope, "n1", cpu="2")
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": scope.namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    scope.ok("POST", f"/apis/policy/v1/namespaces/{scope.namespace}/poddisruptionbudgets", pdb)
    scope.add_pods(
        [
            pod(scope, "web", cpu="1", priority_class=LOW, labels={"app": "web"}),
            pod(scope, "batch", cpu="1", priority_class=LOW, labels={"app": "batch"}),
        ]
    )
    scope.wait_all_bound(2, timeout=30)
    scope.add_pods([pod(scope, "high", cpu="1", priority_class=HIGH)])
    wait_until(lambda: scope.pod("high")["spec"].get("nodeName") == node, timeout=60, what="preemptor bound")
    assert gone(scope, "batch"), "the unprotected pod is the victim"
    assert not gone(scope, "web"), "the PDB-protected pod survives"


def test_victim_is_marked_disruption_target_before_it_goes(scope: Scope, scheduler: SchedulerProcess) -> None:
    """A finalizer keeps the victim Terminating, so the condition written before the deletion can be read."""
    node = kwok_node(scope, "n1", cpu="2")
    low = pod(scope, "low", cpu="1500m", priority_class=LOW)
    low["metadata"]["finalizers"] = ["pykoord.test/hold"]
    scope.add_pods([low])
    scope.wait_all_bound(1, timeout=30)
    scope.add_pods([pod(scope, "high", cpu="1500m", priority_class=HIGH)])
    wait_until(lambda: "deletionTimestamp" in scope.pod("low")["metadata"], timeout=60, what="the victim terminating")
    conditions = {c["type"]: c for c in scope.pod("low")["status"].get("conditions", [])}
    target = conditions.get("DisruptionTarget", {})
    assert (target.get("status"), target.get("reason"), target.get("message")) == (
        "True",
        "PreemptionByScheduler",
        f"{scope.scheduler_name}: preempting to accommodate a higher priority pod",
    )
    scheduled = conditions.get("PodScheduled", {})
    assert scheduled.get("status") == "True", "the other conditions are kept"
    assert scheduled.get("lastTransitionTime"), "... whole: merged by type, not rewritten without their times"
    result = scope.plane.request(
        "PATCH",
        f"/api/v1/namespaces/{scope.namespace}/pods/low",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )
    assert result.status == 200, result.body[:300]
    wait_until(lambda: gone(scope, "low"), timeout=60, what="the victim deleted")
    wait_until(lambda: scope.pod("high")["spec"].get("nodeName") == node, timeout=60, what="preemptor bound")
