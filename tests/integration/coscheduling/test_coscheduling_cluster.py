"""Coscheduling against the real API server: the koord-scheduler binary schedules gangs.

Every gang pod requests 3 cpu on 4-cpu nodes, so one member fits a node.
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


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    docs = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    result = control_plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", docs[0])
    assert result.status in (201, 409), result.body[:300]
    s = Scope.create(control_plane, "gang")
    wait_until(
        lambda: control_plane.request("GET", podgroups_path(s)).status == 200, timeout=30, what="PodGroup CRD served"
    )
    yield s
    s.cleanup()


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}
    # The podgroup controller acts on every PodGroup of the shared cluster; only these tests create any.
    proc = SchedulerProcess.start(scope.plane, config, tmp_path, extra_args=("--controllers=reservation,podgroup",))
    yield proc
    if proc.alive:
        proc.kill()


def podgroups_path(scope: Scope) -> str:
    return f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{scope.namespace}/podgroups"


def member(
    scope: Scope,
    name: str,
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    gated: bool = False,
) -> dict[str, Any]:
    body = scope.pod_body(name, cpu="3")
    body["metadata"]["annotations"] = annotations or {}
    body["metadata"]["labels"] = labels or {}
    if gated:
        body["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    return body


def gang(scope: Scope, names: list[str], gang_name: str, min_available: int, **extra: str) -> list[dict[str, Any]]:
    notes = {ANN + "name": gang_name, ANN + "min-available": str(min_available)}
    notes.update({ANN + k.replace("_", "-"): v for k, v in extra.items()})
    return [member(scope, n, annotations=notes) for n in names]


def bound(scope: Scope) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in scope.pods() if p["spec"].get("nodeName")}


def failed_scheduling(scope: Scope) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for event in scope.events(reason="FailedScheduling"):
        out.setdefault(event["regarding"]["name"], []).append(event.get("note", ""))
    return out


def test_short_gang_binds_none_then_a_new_node_binds_all(scope: Scope, scheduler: SchedulerProcess) -> None:
    # (i) capacity for N-1 members of an N gang: none binds, and each member has an Event saying why.
    scope.add_node("n1")
    scope.add_node("n2")
    names = ["p1", "p2", "p3"]
    scope.add_pods(gang(scope, names, "g", 3))
    wait_until(lambda: set(failed_scheduling(scope)) >= set(names), timeout=30, what="an Event on each member")
    assert bound(scope) == {}
    notes = [n for ns in failed_scheduling(scope).values() for n in ns]
    assert any('GangGroup "' in n and "gets rejected due to member Pod" in n for n in notes), notes
    time.sleep(2)
    assert bound(scope) == {}, "nothing binds while the gang cannot complete"
    # (ii) one more node: all members bind together.
    scope.add_node("n3")
    scope.wait_all_bound(3, timeout=30)
    placed = bound(scope)
    assert len(set(placed.values())) == 3
    for name in names:
        notes_on_pod = scope.pod(name)["metadata"]["annotations"]
        assert notes_on_pod["internal.scheduling.koordinator.sh/bind-gang-group-id"] == f"{scope.namespace}/g"
        assert notes_on_pod["internal.scheduling.koordinator.sh/bind-gang-member-count"] == "3"


def test_strict_timeout_releases_every_assumed_member(scope: Scope, scheduler: SchedulerProcess) -> None:
    # (iii) two members are assumed and wait; the third cannot be tried (a scheduling gate), so the
    # waits run out and both are released: the nodes they held are free for the whole gang afterwards.
    for n in ("n1", "n2", "n3"):
        scope.add_node(n)
    extra = {"waiting_time": "3s"}
    scope.add_pods([*gang(scope, ["p1", "p2"], "g", 3, **extra)])
    held = member(
        scope, "p3", annotations={ANN + "name": "g", ANN + "min-available": "3", ANN + "waiting-time": "3s"}, gated=True
    )
    scope.add_pods([held])
    wait_until(
        lambda: any("timeout" in n for ns in failed_scheduling(scope).values() for n in ns),
        timeout=30,
        what="a Permit timeout",
    )
    assert bound(scope) == {}
    notes = {name: " ".join(ns) for name, ns in failed_scheduling(scope).items()}
    assert "rejected due to timeout after waiting 3s at plugin Coscheduling" in notes["p1"] + notes["p2"]
    pod = scope.pod("p3")
    pod["spec"]["schedulingGates"] = []
    scope.ok("PUT", f"/api/v1/namespaces/{scope.namespace}/pods/p3", pod)
    scope.wait_all_bound(3, timeout=30)


def test_two_gang_groups_bind_together(scope: Scope, scheduler: SchedulerProcess) -> None:
    # (iv) gangs a and b form one group: b's members alone do not bind; all four bind once a is complete.
    for n in ("n1", "n2", "n3", "n4"):
        scope.add_node(n)
    groups = f'["{scope.namespace}/a","{scope.namespace}/b"]'
    scope.add_pods(gang(scope, ["b1", "b2"], "b", 2, groups=groups))
    scope.add_pods(gang(scope, ["a1"], "a", 2, groups=groups))
    time.sleep(3)
    assert bound(scope) == {}, "the group waits for gang a"
    scope.add_pods(gang(scope, ["a2"], "a", 2, groups=groups))
    scope.wait_all_bound(4, timeout=30)
    ids = {
        scope.pod(n)["metadata"]["annotations"]["internal.scheduling.koordinator.sh/bind-gang-group-id"]
        for n in ("a1", "a2", "b1", "b2")
    }
    assert ids == {f"{scope.namespace}/a,{scope.namespace}/b"}


def kwok_node(scope: Scope, name: str) -> str:
    """A node kwok keeps Ready and whose bound pods it runs (phase Running), as a kubelet would."""
    body = scope.node_body(f"{scope.name}-{name}")
    body["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    return scope.add_node_body(body)


def manual_pod(
    scope: Scope, name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """pod-example1/2 of Koordinator's gang-scheduling manual (busybox, 40m cpu, 40Mi)."""
    body = scope.pod_body(name, cpu="40m", memory="40Mi")
    body["metadata"]["labels"] = labels or {}
    body["metadata"]["annotations"] = annotations or {}
    container = body["spec"]["containers"][0]
    container.update(
        {"name": "curlimage", "image": "busybox", "command": ["sleep", "365d"], "imagePullPolicy": "IfNotPresent"}
    )
    container["resources"]["limits"] = {"cpu": "40m", "memory": "40Mi"}
    return body


def phases(scope: Scope) -> dict[str, str]:
    return {p["metadata"]["name"]: p.get("status", {}).get("phase", "") for p in scope.pods()}


def test_gang_scheduling_manual_pod_group(scope: Scope, scheduler: SchedulerProcess) -> None:
    """Koordinator's gang-scheduling manual, "apply gang through gang crd": PodGroup gang-example with
    minMember 2; pod-example1 stays Pending until pod-example2 exists, then both run, and the PodGroup
    reports phase Running with running 2 and scheduled 2."""
    kwok_node(scope, "n1")
    scope.ok(
        "POST",
        podgroups_path(scope),
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "gang-example", "namespace": scope.namespace},
            "spec": {"scheduleTimeoutSeconds": 100, "minMember": 2},
        },
    )
    label = {"pod-group.scheduling.sigs.k8s.io": "gang-example"}
    scope.add_pods([manual_pod(scope, "pod-example1", labels=label)])
    time.sleep(3)
    assert phases(scope) == {"pod-example1": "Pending"}
    assert bound(scope) == {}
    scope.add_pods([manual_pod(scope, "pod-example2", labels=label)])
    wait_until(
        lambda: phases(scope) == {"pod-example1": "Running", "pod-example2": "Running"},
        timeout=60,
        what="both pods Running",
    )

    def status() -> dict[str, Any]:
        got: dict[str, Any] = scope.ok("GET", f"{podgroups_path(scope)}/gang-example").get("status") or {}
        return got

    wait_until(lambda: status().get("phase") == "Running", timeout=30, what="PodGroup phase Running")
    assert (status()["running"], status()["scheduled"]) == (2, 2)


def test_gang_scheduling_manual_annotations(scope: Scope, scheduler: SchedulerProcess) -> None:
    """The manual's "apply gang through annotation": the same, with gang annotations on the pods."""
    kwok_node(scope, "n1")
    notes = {ANN + "name": "gang-example", ANN + "min-available": "2"}
    scope.add_pods([manual_pod(scope, "pod-example1", annotations=notes)])
    time.sleep(3)
    assert phases(scope) == {"pod-example1": "Pending"}
    scope.add_pods([manual_pod(scope, "pod-example2", annotations=notes)])
    wait_until(
        lambda: phases(scope) == {"pod-example1": "Running", "pod-example2": "Running"},
        timeout=60,
        what="both pods Running",
    )


def test_sigkill_while_the_gang_waits_in_permit_leaves_no_gang_partly_bound(scope: Scope, tmp_path: Path) -> None:
    # (vi) two members are assumed and wait at Permit (the third is held by a scheduling gate) when the
    # scheduler is killed. Nothing was bound; the restarted scheduler holds them at Permit again, binds
    # nothing while the gang is short, and binds all three once the third can be tried.
    for n in ("n1", "n2", "n3"):
        scope.add_node(n)
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}
    notes = {ANN + "name": "g", ANN + "min-available": "3", ANN + "waiting-time": "120s"}
    scope.add_pods([member(scope, n, annotations=notes) for n in ("p1", "p2")])
    scope.add_pods([member(scope, "p3", annotations=notes, gated=True)])
    first = SchedulerProcess.start(scope.plane, config, tmp_path, name="first")
    try:
        wait_until(
            lambda: first.metric("scheduler_cache_size", type="assumed_pods") >= 2,
            timeout=30,
            what="two members assumed, waiting at Permit",
        )
        assert bound(scope) == {}
    finally:
        first.kill()  # SIGKILL
    assert bound(scope) == {}, "a killed scheduler leaves nothing of the gang bound"
    second = SchedulerProcess.start(scope.plane, config, tmp_path, name="second")
    try:
        wait_until(
            lambda: second.metric("scheduler_cache_size", type="assumed_pods") >= 2,
            timeout=30,
            what="the restarted scheduler holds the two members at Permit again",
        )
        time.sleep(2)
        assert bound(scope) == {}, "the restarted scheduler binds no part of the gang"
        pod = scope.pod("p3")
        pod["spec"]["schedulingGates"] = []
        scope.ok("PUT", f"/api/v1/namespaces/{scope.namespace}/pods/p3", pod)
        scope.wait_all_bound(3, timeout=30)
        assert len(set(bound(scope).values())) == 3
    finally:
        second.kill()
