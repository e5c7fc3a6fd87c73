"""The migration controller against an in-memory API server: the informers are fed from it after every
pass, and the test plays the scheduler and the workload controller."""

from __future__ import annotations

from typing import Any

from apis.config.descheduler import MigrationControllerArgs
from apis.scheduling.migration import parse_pod_migration_job
from apis.scheduling.record import parse_reservation
from koord_scheduler.descheduler.migration.api import MemoryMigrationApi, eviction_body
from koord_scheduler.descheduler.migration.arbitration import Arbitrator
from koord_scheduler.descheduler.migration.controller import MigrationController, gc_due
from koord_scheduler.framework.types import EventType
from kubeapi.http import ApiError
from tests.builders import make_pod

T0 = 1767225600.0  # 2026-01-01T00:00:00Z


class Clock:
    def __init__(self) -> None:
        self.now = T0 + 10

    def __call__(self) -> float:
        return self.now


def _job(name: str = "job-1", *, ttl: str = "", mode: str = "", pod: str = "web-0") -> dict[str, Any]:
    spec: dict[str, Any] = {"podRef": {"namespace": "default", "name": pod}}
    if ttl:
        spec["ttl"] = ttl
    if mode:
        spec["mode"] = mode
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
    }


class Harness:
    def __init__(self) -> None:
        self.api = MemoryMigrationApi()
        self.clock = Clock()
        self.controller = MigrationController(self.api, clock=self.clock)
        self.api.pods[("default", "web-0")] = (
            make_pod("web-0")
            .owner("ReplicaSet", "web-rs")
            .node("node-a")
            .phase("Running")
            .condition("Ready")
            .label("app", "web")
            .obj()
        )

    def sync(self) -> None:
        """Deliver the API server's state to the informer handlers (deletions included)."""
        c = self.controller
        for key in list(c.pods):
            ns, name = key.split("/", 1)
            if (ns, name) not in self.api.pods:
                c.on_pod(EventType.DELETED, c.pods[key], None)
        for raw in self.api.pods.values():
            c.on_pod(EventType.MODIFIED, None, make_pod_record(raw))
        for name in list(c.reservations):
            if name not in self.api.reservations:
                c.on_object("Reservation", EventType.DELETED, c.reservations[name], None)
        for raw in self.api.reservations.values():
            c.on_object("Reservation", EventType.MODIFIED, None, parse_reservation(raw))
        for name in list(c.jobs):
            if name not in self.api.jobs:
                c.on_object("PodMigrationJob", EventType.DELETED, c.jobs[name], None)
        for raw in self.api.jobs.values():
            c.on_object("PodMigrationJob", EventType.MODIFIED, None, parse_pod_migration_job(raw))

    async def run(self) -> None:
        self.sync()
        await self.controller.reconcile()
        self.sync()

    def job(self, name: str = "job-1") -> dict[str, Any]:
        return self.api.jobs[name]

    def schedule_reservation(self, name: str, node: str) -> None:
        r = self.api.reservations[name]
        r["status"] = {
            "phase": "Available",
            "nodeName": node,
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}],
        }

    def replace_pod(self, reservation: str, *, ready: bool) -> None:
        """The workload controller recreates the pod; the scheduler binds it into the Reservation."""
        node = self.api.reservations[reservation]["status"]["nodeName"]
        builder = make_pod("web-1").owner("ReplicaSet", "web-rs").node(node).phase("Running")
        if ready:
            builder = builder.condition("Ready")
        self.api.pods[("default", "web-1")] = builder.obj()
        status = self.api.reservations[reservation]["status"]
        status["phase"] = "Succeeded"
        status["currentOwners"] = [{"namespace": "default", "name": "web-1", "uid": "uid-default-web-1"}]


def make_pod_record(raw: dict[str, Any]) -> Any:
    from apis.core.parse import parse_pod

    return parse_pod(raw)


def _conditions(job: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in job.get("status", {}).get("conditions", [])}


async def test_reservation_first_runs_to_succeeded() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job(ttl="10m")
    await h.run()
    job = h.job()
    assert job["status"]["phase"] == "Running"
    assert job["spec"]["podRef"]["uid"] == "uid-default-web-0"
    reservation = h.api.reservations["uid-job-1"]
    assert job["spec"]["reservationOptions"]["reservationRef"]["name"] == "uid-job-1"
    assert reservation["spec"]["allocateOnce"] is True
    assert reservation["spec"]["ttl"] == "10m"
    assert reservation["spec"]["owners"][0]["controller"]["name"] == "web-rs"
    assert ("evict", "default/web-0") not in h.api.calls, "never evicted before the Reservation is Available"
    assert _conditions(job)["ReservationCreated"] == ("True", "")

    h.schedule_reservation("uid-job-1", "node-b")
    await h.run()
    job = h.job()
    assert job["status"]["nodeName"] == "node-b"
    assert ("evict", "default/web-0") in h.api.calls
    assert _conditions(job)["Eviction"] == ("False", "Evicting")
    assert job["status"]["status"] == "Eviction"

    del h.api.pods[("default", "web-0")]
    await h.run()
    assert _conditions(h.job())["Eviction"] == ("True", "EvictComplete")
    assert _conditions(h.job())["PodBoundReservation"] == ("False", "WaitForPodBindReservation")

    h.replace_pod("uid-job-1", ready=False)
    await h.run()
    job = h.job()
    assert job["status"]["podRef"]["name"] == "web-1"
    assert _conditions(job)["BoundPodReady"] == ("False", "WaitForBoundPodReady")
    assert job["status"]["phase"] == "Running"

    h.api.pods[("default", "web-1")]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    await h.run()
    job = h.job()
    assert job["status"]["phase"] == "Succeeded"
    assert job["status"]["status"] == "Complete"
    assert job["status"]["message"] == 'Bind Pod "default/web-1" in Reservation "uid-job-1"'
    reasons = [e[2] for e in h.api.events]
    assert reasons == [
        "ReservationCreated",
        "ReservationScheduled",
        "Evicting",
        "EvictComplete",
        "WaitForPodBindReservation",
        "PodBoundReservation",
        "WaitForBoundPodReady",
        "BoundPodReady",
        "Complete",
    ]
    assert [c for c in h.api.calls if c[0] == "evict"] == [("evict", "default/web-0")], "evicted exactly once"


async def test_evict_directly() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job(mode="EvictDirectly")
    await h.run()
    assert ("evict", "default/web-0") in h.api.calls
    assert not h.api.reservations
    del h.api.pods[("default", "web-0")]
    await h.run()
    assert h.job()["status"]["phase"] == "Succeeded"
    assert h.job()["status"]["message"] == 'Pod "default/web-0" has been evicted'


async def test_refused_eviction_is_retried_with_a_warning() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job(mode="EvictDirectly")
    h.api.fail["evict"] = ApiError(
        429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget."
    )
    await h.run()
    assert h.job()["status"]["phase"] == "Running"
    assert "Eviction" not in _conditions(h.job())
    assert ("job-1", "Warning", "Evicting") in [e[:3] for e in h.api.events]
    del h.api.fail["evict"]
    h.controller.dirty.add("job-1")
    await h.run()
    assert _conditions(h.job())["Eviction"] == ("False", "Evicting")


async def test_timeout_fails_the_job_and_deletes_its_reservation() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job(ttl="5m")
    await h.run()
    assert "uid-job-1" in h.api.reservations
    h.clock.now = T0 + 301
    h.controller.dirty.add("job-1")
    await h.run()
    status = h.job()["status"]
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed",
        "Timeout",
        "Abort job caused by timeout",
    )
    assert "uid-job-1" not in h.api.reservations
    assert ("job-1", "Warning", "Timeout", "Abort job caused by timeout") in h.api.events


async def test_unschedulable_reservation_message_is_copied_and_fails_the_job() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job()
    await h.run()
    message = "0/3 nodes are available: 3 Insufficient cpu."
    h.api.reservations["uid-job-1"]["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": message}],
    }
    await h.run()
    assert _conditions(h.job())["ReservationScheduled"] == ("False", "Unschedulable")
    assert h.job()["status"]["message"] == message
    assert h.job()["status"]["phase"] == "Running", "a pending Reservation is waited for, as Koordinator does"
    h.api.reservations["uid-job-1"]["status"]["phase"] = "Failed"
    await h.run()
    assert (h.job()["status"]["phase"], h.job()["status"]["reason"]) == ("Failed", "Unschedulable")
    assert h.job()["status"]["message"] == message
    assert "uid-job-1" not in h.api.reservations
    assert not [c for c in h.api.calls if c[0] == "evict"]


async def test_pod_deleted_before_eviction_fails_missing_pod() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job()
    await h.run()
    del h.api.pods[("default", "web-0")]
    h.schedule_reservation("uid-job-1", "node-b")
    await h.run()
    status = h.job()["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "MissingPod")
    assert "uid-job-1" not in h.api.reservations
    assert not [c for c in h.api.calls if c[0] == "evict"]


async def test_reservation_on_the_same_node_is_refused() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job()
    await h.run()
    h.schedule_reservation("uid-job-1", "node-a")
    await h.run()
    status = h.job()["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert not [c for c in h.api.calls if c[0] == "evict"]


async def test_bare_pod_is_not_migrated_through_a_reservation() -> None:
    h = Harness()
    h.api.pods[("default", "web-0")] = make_pod("web-0").node("node-a").phase("Running").obj()
    h.api.jobs["job-1"] = _job()
    await h.run()
    status = h.job()["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert not h.api.reservations


async def test_missing_pod_at_start() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job(pod="nope")
    await h.run()
    status = h.job()["status"]
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed",
        "MissingPod",
        'Abort job caused by missing Pod "default/nope"',
    )


async def test_paused_job_is_left_alone() -> None:
    h = Harness()
    raw = _job()
    raw["spec"]["paused"] = True
    h.api.jobs["job-1"] = raw
    await h.run()
    assert "status" not in h.job()
    assert not h.api.calls


async def test_stale_view_never_overwrites_a_newer_job() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job()
    h.sync()
    h.api.jobs["job-1"]["metadata"]["resourceVersion"] = "99"  # someone else wrote meanwhile
    await h.controller.reconcile()
    assert "status" not in h.api.jobs["job-1"]
    assert h.controller.dirty == set() and "job-1" in h.controller._timers  # retried later
    h.controller._timers.pop("job-1").cancel()


async def test_scavenger_deletes_old_jobs_and_their_reservations() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job(ttl="5m")
    await h.run()
    assert h.api.reservations
    h.clock.now = T0 + 5 * 60 + 5 * 60 + 1
    assert gc_due(h.controller.jobs["job-1"], h.clock.now)
    assert await h.controller.scavenge() == 1
    assert not h.api.jobs and not h.api.reservations


def test_gc_due_default_age() -> None:
    job = parse_pod_migration_job(_job())
    assert not gc_due(job, T0 + 29 * 60)
    assert gc_due(job, T0 + 30 * 60)


def test_eviction_body_pins_the_uid() -> None:
    body = eviction_body("default", "web-0", uid="u1", delete_options={"gracePeriodSeconds": 0})
    assert body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-0", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"}},
    }


async def test_timeout_deletes_a_reservation_that_expired_first() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job(ttl="5m")
    await h.run()
    h.api.reservations["uid-job-1"]["status"] = {
        "phase": "Failed",
        "conditions": [{"type": "Ready", "status": "False", "reason": "Expired"}],
    }
    h.clock.now = T0 + 301
    h.controller.dirty.add("job-1")
    await h.run()
    assert h.job()["status"]["reason"] == "Timeout"
    assert "uid-job-1" not in h.api.reservations


async def test_new_leader_resumes_without_evicting_again() -> None:
    """Leader failover in the middle of a migration: the new leader's controller starts from what the API
    server holds (the job's Eviction condition) and never evicts the pod a second time."""
    h = Harness()
    h.api.jobs["job-1"] = _job(ttl="10m")
    await h.run()
    h.schedule_reservation("uid-job-1", "node-b")
    await h.run()
    assert [c for c in h.api.calls if c[0] == "evict"] == [("evict", "default/web-0")]
    # The old leader is gone; a new one starts with empty caches on the same API server. The pod is still
    # terminating (it has not gone yet).
    h.controller = MigrationController(h.api, clock=h.clock)
    await h.run()
    assert [c for c in h.api.calls if c[0] == "evict"] == [("evict", "default/web-0")]
    del h.api.pods[("default", "web-0")]
    h.replace_pod("uid-job-1", ready=True)
    for _ in range(3):
        h.controller.dirty.add("job-1")
        await h.run()
    assert h.job()["status"]["phase"] == "Succeeded"
    assert [c for c in h.api.calls if c[0] == "evict"] == [("evict", "default/web-0")]


def _replicas(h: Harness, count: int) -> None:
    """``web-rs`` gets ``count`` Ready pods web-0 .. web-<count-1>, each on its own node."""
    for i in range(count):
        h.api.pods[("default", f"web-{i}")] = (
            make_pod(f"web-{i}")
            .owner("ReplicaSet", "web-rs")
            .node(f"node-{i}")
            .phase("Running")
            .condition("Ready")
            .label("app", "web")
            .obj()
        )


async def test_arbitration_fails_a_single_replica_workload() -> None:
    h = Harness()
    h.controller.arbitrator = Arbitrator.of(MigrationControllerArgs())
    h.api.jobs["job-1"] = _job(ttl="10m")
    await h.run()
    job = h.job()
    assert job["status"]["phase"] == "Failed"
    assert job["status"]["reason"] == "ForbiddenMigratePod"
    assert "expects 1 replicas" in job["status"]["message"]
    assert not h.api.reservations


async def test_arbitration_holds_a_job_while_max_unavailable_is_reached() -> None:
    h = Harness()
    _replicas(h, 3)  # maxUnavailablePerWorkload unset: 1 of 3
    h.controller.arbitrator = Arbitrator.of(MigrationControllerArgs(skip_check_expected_replicas=True))
    h.api.jobs["job-1"] = _job("job-1", ttl="10m", pod="web-0")
    h.api.jobs["job-2"] = _job("job-2", ttl="10m", pod="web-1")
    await h.run()
    assert h.job("job-1")["status"]["phase"] == "Running"
    assert h.job("job-2").get("status", {}).get("phase", "Pending") == "Pending", "web-0 is migrating: 1 unavailable"
    assert "uid-job-2" not in h.api.reservations

    h.api.jobs["job-1"]["status"]["phase"] = "Succeeded"
    await h.run()
    await h.run()
    assert h.job("job-2")["status"]["phase"] == "Running"


async def test_object_limiter_holds_the_second_eviction_of_a_workload() -> None:
    h = Harness()
    _replicas(h, 3)
    args = MigrationControllerArgs(
        skip_check_expected_replicas=True, max_unavailable_per_workload=3, max_migrating_per_workload=3
    )
    h.controller.arbitrator = Arbitrator.of(args)
    for i in range(2):
        h.api.jobs[f"job-{i}"] = _job(f"job-{i}", mode="EvictDirectly", pod=f"web-{i}")
    await h.run()
    evicted = [what for call, what in h.api.calls if call == "evict"]
    assert evicted == ["default/web-0"], "the default workload limiter: 3 per 5 minutes, burst 1"
    h.clock.now += 90
    await h.run()
    assert [what for call, what in h.api.calls if call == "evict"] == ["default/web-0"]
    h.clock.now += 11
    await h.run()
    evicted = [what for call, what in h.api.calls if call == "evict"]
    assert evicted == ["default/web-0", "default/web-1"]
