"""LowNodeLoad relieving hot nodes of real Deployments, on a cluster of its own: kube-apiserver, kwok (10
nodes; pods Running and Ready), kube-controller-manager's Deployment, ReplicaSet and disruption
controllers (evicted pods come back; PodDisruptionBudget status), and koord-scheduler with the Reservation
plugin and ``--controllers=reservation,migration,descheduler``. The test plays the koordlets: each node's
NodeMetric is written every second from the pods bound to it, so usage follows the pods when they move.

Four Deployments of 4 replicas start on 2 of the 10 nodes (8 pods each, 90% CPU; the others idle). Watches
on pods and Reservations check, at every event, that no PodDisruptionBudget and no
``maxUnavailablePerWorkload`` was exceeded, and afterwards that every evicted pod's Reservation was
``Available`` before the eviction and that every replacement was bound into its job's Reservation.
"""

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

from clusterwatch import JOBS, RESERVATIONS, Event, Koordlets, Watch, evictions, first_available, ready
from controlplane import ControlPlane
from kubesched import TEST_LABEL, SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

NODES = 10
REPLICAS = 4
DEPLOYMENTS = ("d0", "d1", "d2", "d3")
WITH_PDB = ("d0", "d1")  # maxUnavailable 1; d2 and d3 rely on maxUnavailablePerWorkload alone
PER_POD_MILLI = 450  # of the kwok nodes' 4 CPUs: 8 pods = 90%, 5 pods = 56%
HIGH = 60
LOW = 30
INTERVAL_S = 15
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


@pytest.fixture(scope="module")
def own_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    previous = os.environ.get("PYKOORD_KCM_FLAGS")
    # kube-controller-manager's --controllers is a list: a second flag adds to the script's own.
    os.environ["PYKOORD_KCM_FLAGS"] = (
        "--controllers=deployment-controller,replicaset-controller,disruption-controller --kube-api-qps=200"
    )
    plane = ControlPlane.up(tmp_path_factory.mktemp("lownodeload-deployments"), kwok_nodes=NODES)
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
    s = Scope.create(own_plane, "lnld")
    for i in range(NODES):
        result = own_plane.request(
            "PATCH",
            f"/api/v1/nodes/kwok-node-{i}",
            {"metadata": {"labels": {TEST_LABEL: s.name}}},
            content_type="application/merge-patch+json",
        )
        assert result.status == 200, result.body[:300]
    yield s


def descheduler_config(scope: Scope) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "deschedulingInterval": f"{INTERVAL_S}s",
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
                            "defaultDeleteOptions": {"gracePeriodSeconds": 0},
                            "maxUnavailablePerWorkload": 1,
                            # The default limiter lets one eviction per workload through every 2.5 minutes;
                            # off, so that the rounds' pace is the arbitration's alone.
                            "objectLimiters": {"workload": {"duration": "0s"}},
                        },
                    },
                    {
                        "name": "LowNodeLoad",
                        "args": {
                            "apiVersion": "descheduler/v1alpha2",
                            "kind": "LowNodeLoadArgs",
                            "lowThresholds": {"cpu": LOW},
                            "highThresholds": {"cpu": HIGH},
                            "anomalyCondition": {"consecutiveAbnormalities": 1},
                        },
                    },
                ],
            }
        ],
    }


def deployment(scope: Scope, name: str) -> dict[str, Any]:
    template = scope.pod_body("unused", cpu="200m")
    template["metadata"] = {"labels": {"app": name}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": scope.namespace},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": name}}, "template": template},
    }


def bind(scope: Scope, pod: str, node: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": scope.namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    scope.ok("POST", f"/api/v1/namespaces/{scope.namespace}/pods/{pod}/binding", body)


class Invariants:
    """Checked at every pod event once armed: per Deployment, at most one pod missing or not Ready."""

    def __init__(self) -> None:
        self.armed = False
        self.violations: list[str] = []
        self.worst: dict[str, int] = dict.fromkeys(DEPLOYMENTS, 0)

    def __call__(self, watch: Watch, event: Event) -> None:
        if not self.armed:
            return
        healthy = dict.fromkeys(DEPLOYMENTS, 0)
        for pod in watch.state.values():
            app = (pod["metadata"].get("labels") or {}).get("app")
            if app in healthy and ready(pod):
                healthy[app] += 1
        for app, count in healthy.items():
            unavailable = REPLICAS - count
            self.worst[app] = max(self.worst[app], unavailable)
            if unavailable > 1:
                self.violations.append(f"rv {event.rv}: {app} has {unavailable} of {REPLICAS} pods unavailable")


def test_hot_nodes_of_deployments_are_relieved(scope: Scope, tmp_path: Path) -> None:
    plane = scope.plane
    nodes = [f"kwok-node-{i}" for i in range(NODES)]
    hot = nodes[:2]
    for name in DEPLOYMENTS:
        scope.ok("POST", f"/apis/apps/v1/namespaces/{scope.namespace}/deployments", deployment(scope, name))
    for name in WITH_PDB:
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": scope.namespace},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}},
        }
        scope.ok("POST", f"/apis/policy/v1/namespaces/{scope.namespace}/poddisruptionbudgets", pdb)
    wait_until(lambda: len(scope.pods()) == REPLICAS * len(DEPLOYMENTS), timeout=120, what="the Deployments' pods")
    # The test places them (no scheduler runs yet): two pods of every Deployment on each hot node.
    for name in DEPLOYMENTS:
        mine = sorted(p["metadata"]["name"] for p in scope.pods() if p["metadata"]["labels"]["app"] == name)
        for i, pod in enumerate(mine):
            bind(scope, pod, hot[i % 2])
    wait_until(
        lambda: sum(ready(p) for p in scope.pods()) == REPLICAS * len(DEPLOYMENTS), timeout=120, what="pods Ready"
    )
    for name in WITH_PDB:
        path = f"/apis/policy/v1/namespaces/{scope.namespace}/poddisruptionbudgets/{name}"
        wait_until(
            lambda path=path: (scope.ok("GET", path).get("status") or {}).get("disruptionsAllowed") == 1,  # type: ignore[misc]
            timeout=60,
            what=f"PDB {name} status",
        )

    invariants = Invariants()
    pods_watch = Watch(plane, f"/api/v1/namespaces/{scope.namespace}/pods", on_event=invariants)
    reservations_watch = Watch(plane, RESERVATIONS)
    with pods_watch as pods, reservations_watch as reservations:
        invariants.armed = True
        koordlets = Koordlets(plane, pods, nodes, per_pod_milli=PER_POD_MILLI)
        koordlets.report_once()
        usage = koordlets.usage_milli()
        assert [usage[n] * 100 // 4000 for n in nodes] == [90, 90] + [0] * (NODES - 2)
        koordlets.start()
        config = tmp_path / "descheduler.yaml"
        config.write_text(yaml.safe_dump(descheduler_config(scope)))
        sched_config = scheduler_config(scope)
        sched_config["profiles"][0]["plugins"] = PLUGINS
        proc = SchedulerProcess.start(
            plane,
            sched_config,
            tmp_path,
            extra_args=("--controllers=reservation,migration,descheduler", f"--descheduler-config={config}"),
        )
        try:
            wait_until(lambda: bool(jobs_for(scope)), timeout=60, what="the first PodMigrationJob")
            first_job = time.monotonic()
            # Within 3 descheduling intervals of the first acting round, no node is above its high threshold.
            wait_until(
                lambda: max(koordlets.usage_milli().values()) * 100 <= HIGH * 4000,
                timeout=3 * INTERVAL_S,
                what=f"every node under {HIGH}% CPU (usage {koordlets.usage_milli()})",
            )
            relieved_after = time.monotonic() - first_job
            # Every job ends Succeeded, the workloads whole again.
            unfinished = ""
            try:
                wait_until(
                    lambda: all(phase(j) in ("Succeeded", "Failed") for j in jobs_for(scope)),
                    timeout=120,
                    what="every job finished",
                )
                wait_until(
                    lambda: sum(ready(p) for p in pods.snapshot().values()) == REPLICAS * len(DEPLOYMENTS),
                    timeout=60,
                    what="the Deployments whole again",
                )
            except AssertionError as exc:
                states = [(j["spec"]["podRef"]["name"], j.get("status")) for j in jobs_for(scope)]
                unfinished = f"{exc}: {states}\n{proc.log_tail(60)}"
            jobs = jobs_for(scope)
        finally:
            if proc.alive:
                proc.kill()
            koordlets.stop()
        evicted = evictions(pods)
        available = first_available(reservations)
        final_pods = pods.snapshot()

    assert not invariants.violations, invariants.violations[:5]
    assert not unfinished, unfinished
    failed = [(j["spec"]["podRef"]["name"], j.get("status")) for j in jobs if phase(j) != "Succeeded"]
    assert not failed, f"{failed}\n{proc.log_tail(80)}"
    assert not koordlets.failures, koordlets.failures[:5]
    moved = {j["spec"]["podRef"]["name"]: j for j in jobs}
    assert 6 <= len(moved) <= 10, sorted(moved)
    # Only migrated pods were evicted, each after its Reservation was Available.
    assert set(evicted) == set(moved), (sorted(evicted), sorted(moved))
    for pod, job in moved.items():
        reservation = job["spec"]["reservationOptions"]["reservationRef"]["name"]
        assert reservation in available, f"{pod} evicted, its Reservation {reservation} never Available"
        assert available[reservation] < evicted[pod], f"{pod} evicted before {reservation} was Available"
        # The replacement was bound into the job's Reservation, on the Reservation's node.
        new_pod = job["status"]["podRef"]["name"]
        replacement = final_pods[new_pod]
        assert reservation in replacement["metadata"]["annotations"][ALLOCATED], (new_pod, reservation)
        assert replacement["spec"]["nodeName"] == job["status"]["nodeName"]
        assert replacement["spec"]["nodeName"] not in hot
    # Each Deployment lost at most one pod at a time, and some lost one: the migrations really overlapped it.
    assert max(invariants.worst.values()) == 1, invariants.worst
    print(f"relieved {relieved_after:.1f}s after the first job; {len(moved)} pods moved")


def jobs_for(scope: Scope) -> list[dict[str, Any]]:
    return [j for j in scope.ok("GET", JOBS)["items"] if j["spec"]["podRef"].get("namespace") == scope.namespace]


def phase(job: dict[str, Any]) -> str:
    return str((job.get("status") or {}).get("phase") or "Pending")
