"""Koordinator's "PodMigrationJob" user manual (koordinator.sh, docs/user-manuals/pod-migration-job.md)
followed as written, on a cluster of its own: kube-apiserver, kwok (the manual's ``node-0`` and ``node-1``;
pods Running and Ready), kube-controller-manager's Deployment and ReplicaSet controllers, and
koord-scheduler with the chart's Reservation plugin (profile ``koord-scheduler``, as the manual's
Deployment names it) and ``--controllers=reservation,migration``, reading the chart's
``koord-descheduler-config``.

As written (the ``pod-demo`` Deployment has one replica, the configuration is the chart's) Koordinator
v1.8 migrates nothing: its arbitration (``arbitrator/filter.go`` ``filterExpectedReplicas``) refuses a
workload of one replica, and the job fails with ``ForbiddenMigratePod``; pykoord does the same
(docs/descheduling.md, "Arbitration and limits"). The manual predates that check. With
``skipCheckExpectedReplicas: true`` its outcome follows. The manual's examples then run one after the
other on the same workload, within five minutes: Koordinator's default workload object limiter lets one
eviction per workload through every 5 minutes, so the configuration also switches it off
(``objectLimiters: {workload: {duration: 0s}}``).

The manual's table prints the phase ``Succeed``; Koordinator v1.8's constant (``PodMigrationJobSucceeded``
in ``apis/scheduling/v1alpha1/pod_migration_job_types.go``) is ``Succeeded``, which is what is asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from clusterwatch import JOBS, RESERVATIONS, Watch, ready
from controlplane import ControlPlane
from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

NODES = ("node-0", "node-1")
NAMESPACE = "default"
JOB = "migrationjob-demo"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"

# Koordinator's chart's koord-descheduler-config (pykoord's chart default): the MigrationController.
CHART_ARGS: dict[str, Any] = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "MigrationControllerArgs",
    "evictionPolicy": "Eviction",
    "namespaces": {"exclude": ["kube-system", "koordinator-system"]},
    "evictQPS": "10",
    "evictBurst": 1,
}
# What the manual's steps need of it (see the module docstring).
FOLLOWED_ARGS: dict[str, Any] = CHART_ARGS | {
    "skipCheckExpectedReplicas": True,
    "objectLimiters": {"workload": {"duration": "0s"}},
}

POD_DEMO = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: pod-demo
  namespace: default
spec:
  progressDeadlineSeconds: 600
  replicas: 1
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      app: pod-demo
  strategy:
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 25%
    type: RollingUpdate
  template:
    metadata:
      creationTimestamp: null
      labels:
        app: pod-demo
      name: stress
    spec:
      containers:
      - args:
        - -c
        - "1"
        command:
        - stress
        image: polinux/stress
        imagePullPolicy: Always
        name: stress
        resources:
          limits:
            cpu: "2"
            memory: 4Gi
          requests:
            cpu: 200m
            memory: 400Mi
      restartPolicy: Always
      schedulerName: koord-scheduler
"""

# The manual's jobs; ``{pod}`` is the pod's real name (the manual's pod-demo-5f9b977566-c7lvk).
QUICK_START = """\
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: migrationjob-demo
spec:
  paused: false
  ttl: 5m
  mode: ReservationFirst
  podRef:
    namespace: default
    name: {pod}
status:
  phase: Pending
"""

MANUAL_CONFIRM = """\
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: migrationjob-demo
spec:
  # paused indicates whether the PodMigrationJob should to work or not.
  paused: true
  # ttl controls the PodMigrationJob timeout duration.
  ttl: 5m
  mode: ReservationFirst
  podRef:
    namespace: default
    name: {pod}
status:
  phase: Pending
"""

EVICT_DIRECTLY = """\
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: migrationjob-demo
spec:
  paused: false
  ttl: 5m
  mode: EvictDirectly
  podRef:
    namespace: default
    name: {pod}
status:
  phase: Pending
"""

RESERVATION_REF = """\
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: migrationjob-demo
spec:
  paused: false
  ttl: 5m
  mode: ReservationFirst
  podRef:
    namespace: default
    name: {pod}
  reservationOptions:
    # the reservation-0 created before creating PodMigrationJob
    reservationRef:
      name: reservation-0
status:
  phase: Pending
"""

GRACEFUL = """\
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: PodMigrationJob
metadata:
  name: migrationjob-demo
spec:
  paused: true
  ttl: 5m
  mode: ReservationFirst
  podRef:
    namespace: default
    name: {pod}
  deleteOptions:
    gracePeriodSeconds: 60
status:
  phase: Pending
"""

PLUGINS = {
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}


@dataclass
class Manual:
    """The cluster the manual runs on: its nodes, the ``pod-demo`` pods' watch and koord-scheduler."""

    plane: ControlPlane
    scope: Scope
    work: Path
    pods: Watch
    procs: list[SchedulerProcess] = field(default_factory=list)
    args: dict[str, Any] = field(default_factory=dict)

    def use(self, args: dict[str, Any]) -> SchedulerProcess:
        """koord-scheduler running with MigrationControllerArgs ``args`` (restarted when they change)."""
        if self.procs and self.procs[-1].alive and self.args == args:
            return self.procs[-1]
        if self.procs and self.procs[-1].alive:
            self.procs[-1].terminate()
        descheduler = {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerConfiguration",
            "profiles": [
                {
                    "name": "koord-descheduler",
                    "plugins": {"evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "MigrationController"}]}},
                    "pluginConfig": [{"name": "MigrationController", "args": args}],
                }
            ],
        }
        name = f"koord-{len(self.procs)}"
        path = self.work / f"{name}-descheduler.yaml"
        path.write_text(yaml.safe_dump(descheduler))
        config = scheduler_config(self.scope)
        config["profiles"][0]["schedulerName"] = "koord-scheduler"
        config["profiles"][0]["plugins"] = PLUGINS
        proc = SchedulerProcess.start(
            self.plane,
            config,
            self.work,
            name=name,
            verbosity=4,
            extra_args=("--controllers=reservation,migration", f"--descheduler-config={path}"),
        )
        self.procs.append(proc)
        self.args = args
        return proc

    def live_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.pods.snapshot().values() if not p["metadata"].get("deletionTimestamp")]

    def running_pod(self) -> dict[str, Any]:
        """The Deployment's one pod, once it is Running and Ready (the manual's ``kubectl get pod -o wide``)."""
        wait_until(
            lambda: len(self.live_pods()) == 1 and ready(self.live_pods()[0]), timeout=120, what="pod-demo Ready"
        )
        [pod] = self.live_pods()
        return pod

    def create_job(self, manifest: str, pod: str) -> dict[str, Any]:
        """``kubectl create -f migrationjob-demo.yaml`` after any earlier job of that name is gone."""
        self.plane.request("DELETE", f"{JOBS}/{JOB}")
        wait_until(lambda: self.plane.request("GET", f"{JOBS}/{JOB}").status == 404, timeout=30, what="old job gone")
        created: dict[str, Any] = self.scope.ok("POST", JOBS, yaml.safe_load(manifest.format(pod=pod)))
        return created

    def job(self) -> dict[str, Any]:
        found: dict[str, Any] = self.scope.ok("GET", f"{JOBS}/{JOB}")
        return found

    def status(self) -> dict[str, Any]:
        return self.job().get("status") or {}

    def wait_phase(self, phase: str, *, timeout: float = 90) -> dict[str, Any]:
        proc = self.procs[-1]
        try:
            wait_until(lambda: self.status().get("phase") == phase, timeout=timeout, what=f"job {phase}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {self.status()}\n{proc.log_tail(60)}") from None
        return self.status()

    def patch_job(self, body: dict[str, Any], *, status: bool = False) -> None:
        path = f"{JOBS}/{JOB}" + ("/status" if status else "")
        result = self.plane.request("PATCH", path, body, content_type="application/merge-patch+json")
        assert result.status == 200, result.body[:300]

    def events(self, job: dict[str, Any]) -> dict[str, str]:
        """The job's Events (``kubectl describe podmigrationjob``): reason -> message."""
        items = self.scope.ok("GET", f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events")["items"]
        return {
            e["reason"]: e.get("note", "")
            for e in items
            if e.get("regarding", {}).get("kind") == "PodMigrationJob"
            and e["regarding"].get("uid") == job["metadata"]["uid"]
        }

    def reservations(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.scope.ok("GET", RESERVATIONS)["items"]
        return items

    def kubectl(self, *args: str) -> str:
        result = subprocess.run(
            [str(self.plane.binaries.kubectl), f"--kubeconfig={self.plane.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout


def holds(check: Callable[[], bool], *, seconds: float, what: str) -> None:
    """``check`` stays true for ``seconds`` (several of the controller's 500ms arbitration passes)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), what
        time.sleep(0.2)


def other(node: str) -> str:
    [target] = [n for n in NODES if n != node]
    return target


@pytest.fixture(scope="module")
def manual(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manual]:
    previous = os.environ.get("PYKOORD_KCM_FLAGS")
    os.environ["PYKOORD_KCM_FLAGS"] = "--controllers=deployment-controller,replicaset-controller"
    work = tmp_path_factory.mktemp("pmj-manual")
    # One kwok node starts kwok; it is replaced by the manual's two nodes.
    plane = ControlPlane.up(work / "plane", kwok_nodes=1)
    try:
        plane.start_controller_manager()
        scope = Scope(plane, "manual")
        plane.request("DELETE", "/api/v1/nodes/kwok-node-0")
        for node in NODES:
            body = scope.node_body(node, cpu="4", memory="16Gi")
            body["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
            scope.add_node_body(body)
        with Watch(plane, f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3Dpod-demo") as pods:
            state = Manual(plane, scope, work, pods)
            try:
                state.use(CHART_ARGS)
                # 1. kubectl create -f pod-demo.yaml
                scope.ok("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", yaml.safe_load(POD_DEMO))
                yield state
            finally:
                for proc in state.procs:
                    if proc.alive:
                        proc.kill()
    finally:
        if previous is None:
            os.environ.pop("PYKOORD_KCM_FLAGS", None)
        else:
            os.environ["PYKOORD_KCM_FLAGS"] = previous
        plane.down()


def test_quick_start(manual: Manual) -> None:
    # 2. The pod runs on one of the nodes (the manual's node-0).
    original = manual.running_pod()
    name, source = original["metadata"]["name"], original["spec"]["nodeName"]
    target = other(source)

    # 3. As written, with the chart's configuration: a one-replica workload is refused.
    manual.use(CHART_ARGS)
    manual.create_job(QUICK_START, name)
    refused = manual.wait_phase("Failed")
    assert refused["reason"] == "ForbiddenMigratePod", refused
    assert refused["message"].startswith(
        f'Pod "{NAMESPACE}/{name}" is forbidden to migrate because it does not meet the requirements: '
        "its workload expects 1 replicas"
    ), refused
    assert manual.live_pods()[0]["metadata"]["uid"] == original["metadata"]["uid"]
    assert not manual.reservations()

    # The same job with the expected-replicas check skipped: the manual's outcome.
    manual.use(FOLLOWED_ARGS)
    created = manual.create_job(QUICK_START, name)
    assert created["spec"]["paused"] is False and created["spec"]["ttl"] == "5m"
    final = manual.wait_phase("Succeeded")
    job = manual.job()
    new = manual.running_pod()
    new_name = new["metadata"]["name"]
    assert new_name != name
    assert new["metadata"]["ownerReferences"][0]["uid"] == original["metadata"]["ownerReferences"][0]["uid"]
    assert new["spec"]["nodeName"] == target
    reservation = job["spec"]["reservationOptions"]["reservationRef"]["name"]
    assert reservation == job["metadata"]["uid"]
    assert reservation in new["metadata"]["annotations"][ALLOCATED]
    assert final["status"] == "Complete"
    assert final["nodeName"] == target
    assert final["podRef"]["name"] == new_name
    # The Reservation (allocateOnce) is Succeeded once the new pod was bound into it.
    got = manual.scope.ok("GET", f"{RESERVATIONS}/{reservation}")
    assert got["status"]["phase"] == "Succeeded", got["status"]
    assert got["status"]["nodeName"] == target

    # 5. kubectl get podmigrationjob migrationjob-demo
    header, row = manual.kubectl("get", "podmigrationjob", JOB).splitlines()
    columns = dict(zip(header.split(), row.split(), strict=True))
    columns.pop("AGE")
    assert columns == {
        "NAME": JOB,
        "PHASE": "Succeeded",
        "STATUS": "Complete",
        "NODE": target,
        "RESERVATION": reservation,
        "PODNAMESPACE": NAMESPACE,
        "POD": name,
        "NEWPOD": new_name,
        "TTL": "5m",
    }

    # 6. The Events of `kubectl describe podmigrationjob`. The manual shows an older release's
    # `Try to evict Pod "..."`; Koordinator v1.8 (migration/controller.go) says "evicted from node ... by the
    # reason ...", the reason being the job's evict-reason or evict-trigger annotation (none here).
    notes = manual.events(job)
    pod_key = f'"{NAMESPACE}/{name}"'
    assert notes.get("ReservationCreated") == f'Successfully create Reservation "{reservation}"', notes
    assert notes.get("ReservationScheduled") == f'Assigned Reservation "{reservation}" to node "{target}"', notes
    assert notes.get("Evicting") == f'Pod {pod_key} evicted from node "{source}" by the reason ""', notes
    assert notes.get("EvictComplete") == f"Pod {pod_key} has been evicted", notes
    assert notes.get("Complete") == f'Bind Pod "{NAMESPACE}/{new_name}" in Reservation "{reservation}"', notes


def test_paused_until_confirmed(manual: Manual) -> None:
    manual.use(FOLLOWED_ARGS)
    pod = manual.running_pod()
    manual.create_job(MANUAL_CONFIRM, pod["metadata"]["name"])
    before = {r["metadata"]["name"] for r in manual.reservations()}
    holds(
        lambda: not manual.status().get("phase") and {r["metadata"]["name"] for r in manual.reservations()} == before,
        seconds=4,
        what="a paused job does nothing",
    )
    assert [p["metadata"]["uid"] for p in manual.live_pods()] == [pod["metadata"]["uid"]]
    # Confirmed: spec.paused set to false.
    manual.patch_job({"spec": {"paused": False}})
    final = manual.wait_phase("Succeeded")
    assert final["status"] == "Complete"
    assert final["nodeName"] == other(pod["spec"]["nodeName"])
    assert manual.running_pod()["metadata"]["name"] == final["podRef"]["name"] != pod["metadata"]["name"]


def test_refused_by_failing_the_job(manual: Manual) -> None:
    manual.use(FOLLOWED_ARGS)
    pod = manual.running_pod()
    manual.create_job(MANUAL_CONFIRM, pod["metadata"]["name"])
    before = {r["metadata"]["name"] for r in manual.reservations()}
    # Refused: status.phase set to Failed; then unpausing it changes nothing (the job is finished).
    manual.patch_job({"status": {"phase": "Failed"}}, status=True)
    manual.patch_job({"spec": {"paused": False}})
    holds(
        lambda: (
            manual.status().get("phase") == "Failed"
            and {r["metadata"]["name"] for r in manual.reservations()} == before
            and [p["metadata"]["uid"] for p in manual.live_pods()] == [pod["metadata"]["uid"]]
        ),
        seconds=4,
        what="a refused job evicts nothing and reserves nothing",
    )
    assert "reservationOptions" not in manual.job()["spec"]
    assert not manual.events(manual.job())


def test_evict_directly(manual: Manual) -> None:
    manual.use(FOLLOWED_ARGS)
    pod = manual.running_pod()
    before = {r["metadata"]["name"] for r in manual.reservations()}
    manual.create_job(EVICT_DIRECTLY, pod["metadata"]["name"])
    final = manual.wait_phase("Succeeded")
    assert final["status"] == "Complete"
    assert final["message"] == f'Pod "{NAMESPACE}/{pod["metadata"]["name"]}" has been evicted'
    assert "reservationOptions" not in manual.job()["spec"]
    assert {r["metadata"]["name"] for r in manual.reservations()} == before
    notes = manual.events(manual.job())
    assert "Evicting" in notes and "EvictComplete" in notes and "ReservationCreated" not in notes, notes
    replacement = manual.running_pod()
    assert replacement["metadata"]["name"] != pod["metadata"]["name"]
    assert ALLOCATED not in (replacement["metadata"].get("annotations") or {})


def test_reserved_resources_from_a_reservation_ref(manual: Manual) -> None:
    manual.use(FOLLOWED_ARGS)
    pod = manual.running_pod()
    target = other(pod["spec"]["nodeName"])
    template = yaml.safe_load(POD_DEMO)["spec"]["template"]
    template["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [target]}]}]
            }
        }
    }
    manual.plane.request("DELETE", f"{RESERVATIONS}/reservation-0")
    wait_until(
        lambda: manual.plane.request("GET", f"{RESERVATIONS}/reservation-0").status == 404,
        timeout=30,
        what="no reservation-0",
    )
    reservation = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "reservation-0"},
        "spec": {
            "template": template,
            "owners": [{"labelSelector": {"matchLabels": {"app": "pod-demo"}}}],
            "ttl": "1h",
            "allocateOnce": True,
        },
    }
    manual.scope.ok("POST", RESERVATIONS, reservation)
    wait_until(
        lambda: (
            (manual.scope.ok("GET", f"{RESERVATIONS}/reservation-0").get("status") or {}).get("phase") == "Available"
        ),
        timeout=60,
        what="reservation-0 Available",
    )
    before = {r["metadata"]["name"] for r in manual.reservations()}
    manual.create_job(RESERVATION_REF, pod["metadata"]["name"])
    final = manual.wait_phase("Succeeded")
    assert final["nodeName"] == target
    assert {r["metadata"]["name"] for r in manual.reservations()} == before, "no Reservation of its own"
    new = manual.running_pod()
    assert new["metadata"]["name"] == final["podRef"]["name"] != pod["metadata"]["name"]
    assert new["spec"]["nodeName"] == target
    assert "reservation-0" in new["metadata"]["annotations"][ALLOCATED]
    got = manual.scope.ok("GET", f"{RESERVATIONS}/reservation-0")
    assert got["status"]["phase"] == "Succeeded", got["status"]
    assert "scheduling.koordinator.sh/reservation-order" in got["metadata"]["labels"]
    notes = manual.events(manual.job())
    assert notes.get("Complete") == f'Bind Pod "{NAMESPACE}/{new["metadata"]["name"]}" in Reservation "reservation-0"'


def test_graceful_eviction(manual: Manual) -> None:
    manual.use(FOLLOWED_ARGS)
    pod = manual.running_pod()
    name = pod["metadata"]["name"]
    manual.create_job(GRACEFUL, name)  # paused, as the manual's example
    manual.patch_job({"spec": {"paused": False}})
    final = manual.wait_phase("Succeeded")
    assert final["status"] == "Complete"
    # The eviction's DeleteOptions reached the pod: its graceful deletion took the job's 60 seconds.
    # (kwok then removes it at once, which the API server records as a grace period of 0.)
    graces = [
        e.obj["metadata"].get("deletionGracePeriodSeconds")
        for e in manual.pods.history()
        if e.name == name and e.obj["metadata"].get("deletionTimestamp")
    ]
    assert graces and graces[0] == 60, graces
