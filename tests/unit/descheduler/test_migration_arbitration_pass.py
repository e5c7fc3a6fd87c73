"""Arbitration on an interval (``arbitrationArgs``): the order of Koordinator's ``arbitrator/sort.go`` and
the controller's pass over the waiting jobs."""

from __future__ import annotations

from apis.config.descheduler import MigrationControllerArgs
from apis.core.types import Pod
from apis.scheduling.migration import PodMigrationJobRecord
from koord_scheduler.descheduler.migration.arbitration import ANNOTATION_PASSED_ARBITRATION, Arbitrator
from koord_scheduler.descheduler.migration.arbitration_order import arbitration_order, batch_job_owner
from koord_scheduler.descheduler.migration.controller import MigrationController
from koord_scheduler.framework.errors import ClusterError
from tests.builders import make_pod
from tests.unit.descheduler.test_migration_controller import Harness, _job

T = 1767225600.0


def job(name: str, created: float) -> PodMigrationJobRecord:
    return PodMigrationJobRecord(name=name, creation_timestamp=T + created)


def web(name: str, *, priority: int = 0, owner: tuple[str, str] = ("ReplicaSet", "rs")) -> Pod:
    return make_pod(name).owner(*owner).node("n").priority(priority).build()


def names(order: list[tuple[PodMigrationJobRecord, Pod | None]]) -> list[str]:
    return [j.name for j, _ in order]


def test_the_newest_job_first_among_equal_pods() -> None:
    pod = web("p")
    got = arbitration_order([(job("old", 1), pod), (job("new", 5), web("q"))], migrating_of=lambda _: 0)
    assert names(got) == ["new", "old"]


def test_the_pod_order_before_the_creation_time() -> None:
    waiting = [(job("low-old", 1), web("a", priority=10)), (job("high-new", 9), web("b", priority=1000))]
    assert names(arbitration_order(waiting, migrating_of=lambda _: 0)) == ["low-old", "high-new"]


def test_a_job_without_its_pod_first() -> None:
    waiting = [(job("with", 9), web("a")), (job("without", 1), None)]
    assert names(arbitration_order(waiting, migrating_of=lambda _: 0)) == ["without", "with"]


def test_jobs_of_one_batch_job_are_put_together() -> None:
    waiting = [
        (job("j1-a", 1), web("a", priority=1, owner=("Job", "j1"))),
        (job("other", 1), web("b", priority=2)),
        (job("j1-c", 1), web("c", priority=3, owner=("Job", "j1"))),
    ]
    assert names(arbitration_order(waiting, migrating_of=lambda _: 0)) == ["j1-a", "j1-c", "other"]


def test_the_batch_job_with_the_most_migrating_first() -> None:
    waiting = [
        (job("j1", 1), web("a", priority=1, owner=("Job", "j1"))),
        (job("j2", 1), web("b", priority=2, owner=("Job", "j2"))),
        (job("rs", 1), web("c", priority=0)),
    ]
    got = arbitration_order(waiting, migrating_of=lambda uid: {"uid-j2": 2, "uid-j1": 1}[uid])
    assert names(got) == ["j2", "j1", "rs"]


def test_batch_job_owner_is_only_a_job() -> None:
    assert batch_job_owner(web("a", owner=("Job", "j"))) == "uid-j"
    assert batch_job_owner(web("a")) == ""
    assert batch_job_owner(None) == ""


def _harness(args: MigrationControllerArgs) -> Harness:
    h = Harness()
    h.controller.arbitrator = Arbitrator.of(args)
    h.controller.arbitration_interval = 0.5
    for i in (1, 2):
        h.api.pods[("default", f"web-{i}")] = (
            make_pod(f"web-{i}").owner("ReplicaSet", "web-rs").node("node-a").phase("Running").condition("Ready").obj()
        )
    return h


def _pending(h: Harness, name: str, pod: str, created: str) -> None:
    body = _job(name, mode="EvictDirectly", pod=pod)
    body["metadata"]["creationTimestamp"] = created
    h.api.jobs[name] = body


async def test_jobs_wait_for_the_pass_then_run_in_its_order() -> None:
    h = _harness(
        MigrationControllerArgs(
            skip_check_expected_replicas=True,
            max_migrating_globally=1,
            max_unavailable_per_workload=3,
            object_limiters={"workload": {"duration": "0s"}},
        )
    )
    _pending(h, "older", "web-1", "2026-01-01T00:00:00Z")
    _pending(h, "newer", "web-2", "2026-01-01T00:00:05Z")
    await h.run()
    phases = {n: h.api.jobs[n].get("status", {}).get("phase", "") for n in ("older", "newer")}
    assert phases == {"older": "", "newer": ""}  # no pass yet: both wait
    assert h.controller.arbitrate() == 1  # the newer first; the older then finds one migrating
    await h.run()
    assert h.api.jobs["newer"]["status"]["phase"] in ("Running", "Succeeded")
    assert h.api.jobs["older"].get("status", {}).get("phase", "") == ""


async def test_a_refused_job_fails_after_the_pass() -> None:
    h = _harness(MigrationControllerArgs())
    h.api.pods[("default", "bare")] = make_pod("bare").node("node-a").phase("Running").obj()
    _pending(h, "bare", "bare", "2026-01-01T00:00:00Z")
    h.sync()
    assert h.controller.arbitrate() == 1
    await h.run()
    status = h.api.jobs["bare"]["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert status["message"].endswith("no controller (a bare pod)")


async def test_a_job_let_through_is_marked_and_a_new_leader_does_not_arbitrate_it_again() -> None:
    args = MigrationControllerArgs(
        skip_check_expected_replicas=True,
        max_migrating_globally=1,
        max_unavailable_per_workload=3,
        object_limiters={"workload": {"duration": "0s"}},
    )
    h = _harness(args)
    _pending(h, "first", "web-1", "2026-01-01T00:00:05Z")
    h.sync()
    assert h.controller.arbitrate() == 1
    h.api.fail["patch_job_status"] = ClusterError("connection refused")  # the leader goes before the job runs
    await h.run()
    assert h.api.jobs["first"]["metadata"]["annotations"] == {ANNOTATION_PASSED_ARBITRATION: "true"}
    assert h.api.jobs["first"].get("status", {}).get("phase", "") == ""
    del h.api.fail["patch_job_status"]

    # A new leader over the same API server: the marked job goes on without a pass, and counts as migrating.
    _pending(h, "second", "web-2", "2026-01-01T00:00:00Z")
    new = MigrationController(h.api, clock=h.clock)
    new.arbitrator = Arbitrator.of(args)
    new.arbitration_interval = 0.5
    h.controller = new
    h.sync()
    assert new.arbitrate() == 0  # "second" waits behind the marked job; "first" is not arbitrated again
    await h.run()
    assert h.api.jobs["first"]["status"]["phase"] in ("Running", "Succeeded")
    assert h.api.jobs["second"].get("status", {}).get("phase", "") == ""
