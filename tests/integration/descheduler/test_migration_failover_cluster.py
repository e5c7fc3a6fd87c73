"""A PodMigrationJob survives the loss of its leader, on a cluster of its own: kube-apiserver, kwok (3 nodes;
pods Running and Ready), kube-controller-manager's ReplicaSet and disruption controllers, and koord-scheduler
replicas with leader election running the Reservation plugin and the ``reservation`` and ``migration``
controllers.

The leader is killed twice: once the job's Reservation is Available while a PodDisruptionBudget refuses the
eviction, and again the moment the pod is seen deleted (before its replacement is bound). Watches on pods and
Reservations prove that one pod was evicted, once, that the job made one Reservation, and that nothing is
left holding room after the job's TTL.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from clusterwatch import JOBS, RESERVATIONS, Watch, evictions, first_available, ready
from controlplane import ControlPlane
from kubesched import TEST_LABEL, SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

NODES = 3
LEASE = ("4s", "3s", "500ms")
TTL_S = 60
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
    os.environ["PYKOORD_KCM_FLAGS"] = "--controllers=replicaset-controller,disruption-controller"
    plane = ControlPlane.up(tmp_path_factory.mktemp("migration-failover"), kwok_nodes=NODES)
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
    s = Scope.create(own_plane, "failover")
    for i in range(NODES):
        result = own_plane.request(
            "PATCH",
            f"/api/v1/nodes/kwok-node-{i}",
            {"metadata": {"labels": {TEST_LABEL: s.name}}},
            content_type="application/merge-patch+json",
        )
        assert result.status == 200, result.body[:300]
    yield s


def start_replica(scope: Scope, work: Path, name: str, config_path: Path) -> SchedulerProcess:
    config = scheduler_config(scope, leader_elect=True, lease=LEASE)
    config["profiles"][0]["plugins"] = PLUGINS
    return SchedulerProcess.start(
        scope.plane,
        config,
        work,
        name=name,
        wait_ready=False,
        extra_args=("--controllers=reservation,migration", f"--descheduler-config={config_path}"),
    )


def leader_of(scope: Scope, procs: list[SchedulerProcess]) -> SchedulerProcess | None:
    """The one live replica that says it holds the Lease (None while none or several do)."""
    leaders = [
        p
        for p in procs
        if p.alive
        and p.get("/metrics")[0] == 200
        and p.metric("leader_election_master_status", name=scope.scheduler_name) == 1
    ]
    return leaders[0] if len(leaders) == 1 else None


def test_leader_killed_mid_migration(scope: Scope, tmp_path: Path) -> None:
    plane = scope.plane
    ns = scope.namespace
    config_path = tmp_path / "descheduler.yaml"
    config_path.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\nprofiles:\n"
        "- name: koord-descheduler\n  pluginConfig:\n  - name: MigrationController\n    args:\n"
        "      apiVersion: descheduler/v1alpha2\n      kind: MigrationControllerArgs\n"
        "      defaultDeleteOptions: {gracePeriodSeconds: 0}\n"
    )
    template = scope.pod_body("unused", cpu="1")
    template["metadata"] = {"labels": {"app": "web"}}
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
    }
    scope.ok("POST", f"/apis/apps/v1/namespaces/{ns}/replicasets", replica_set)
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
    }
    scope.ok("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", pdb)
    pdb_path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web"

    procs: list[SchedulerProcess] = []
    pods_watch = Watch(plane, f"/api/v1/namespaces/{ns}/pods")
    with pods_watch as pods, Watch(plane, RESERVATIONS) as reservations:
        try:
            procs += [start_replica(scope, tmp_path, name, config_path) for name in ("a", "b")]
            wait_until(lambda: sum(ready(p) for p in pods.snapshot().values()) == 3, timeout=90, what="3 pods Ready")
            wait_until(
                lambda: (scope.ok("GET", pdb_path).get("status") or {}).get("currentHealthy") == 3,
                timeout=60,
                what="the PDB's status",
            )
            wait_until(lambda: leader_of(scope, procs) is not None, timeout=60, what="a leader")
            target = sorted(pods.snapshot())[0]
            job_name = f"{scope.name}-move"
            job = {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "PodMigrationJob",
                "metadata": {"name": job_name},
                "spec": {"podRef": {"namespace": ns, "name": target}, "ttl": f"{TTL_S}s"},
            }
            created = scope.ok("POST", JOBS, job)
            created_at = time.monotonic()
            reservation = created["metadata"]["uid"]  # named after the job's UID

            # 1. The Reservation is Available; the PDB refuses the eviction (retried). Kill the leader.
            wait_until(lambda: reservation in first_available(reservations), timeout=60, what="Reservation Available")
            events_path = "/apis/events.k8s.io/v1/namespaces/default/events"
            wait_until(
                lambda: any(
                    e.get("regarding", {}).get("name") == job_name and e["type"] == "Warning"
                    for e in plane.request("GET", events_path).json()["items"]
                ),
                timeout=60,
                what="the refused eviction's Warning",
            )
            first_leader = leader_of(scope, procs)
            assert first_leader is not None
            first_leader.kill()
            procs.append(start_replica(scope, tmp_path, "c", config_path))
            plane.request("PATCH", pdb_path, {"spec": {"minAvailable": 2}}, content_type="application/merge-patch+json")

            # 2. The second leader evicts; kill it the moment the pod is seen deleted.
            wait_until(lambda: target in evictions(pods), timeout=90, what=f"{target} evicted by the second leader")
            second_leader = leader_of(scope, procs)
            assert second_leader is not None and second_leader is not first_leader
            second_leader.kill()

            # The third replica takes over: it binds the replacement into the Reservation and ends the job.
            def phase() -> str:
                return str((scope.ok("GET", f"{JOBS}/{job_name}").get("status") or {}).get("phase") or "Pending")

            wait_until(lambda: phase() in ("Succeeded", "Failed"), timeout=120, what="the job finished")
            final = scope.ok("GET", f"{JOBS}/{job_name}")
            assert phase() == "Succeeded", (final.get("status"), [p.log_tail(30) for p in procs if p.alive])
            replacement = pods.snapshot()[final["status"]["podRef"]["name"]]
            assert reservation in replacement["metadata"]["annotations"][ALLOCATED]

            # After the job's TTL: nothing more evicted, and the job's Reservation consumed, no other made.
            time.sleep(max(0.0, created_at + TTL_S + 5 - time.monotonic()))
            assert evictions(pods).keys() == {target}, evictions(pods)
            made = {e.name for e in reservations.history() if e.type == "ADDED"}
            assert made == {reservation}, made
            left = reservations.snapshot().get(reservation)
            assert left is None or (left.get("status") or {}).get("phase") == "Succeeded", (
                left.get("status") if left else None
            )
        finally:
            for proc in procs:
                if proc.alive:
                    proc.kill()
