"""Two jobs of one workload, each with its own Reservation: the replacement of the pod the first job
evicted is bound into the second job's Reservation before the second job evicts. As in Koordinator
(``controller.go`` ``abortJobIfReservationBoundByAnotherPod`` and ``waitForPodBindReservation``), the
second job fails without evicting and the first waits in ``WaitForPodBindReservation`` until its ttl,
then fails with ``Timeout`` and deletes its Reservation. The scheduler makes this rare: a replacement
prefers the Reservation with the lowest ``reservation-order``, and a job labels its Reservation so only just
before it evicts, so a Reservation whose job has not evicted yet is the last choice."""

from __future__ import annotations

from apis.scheduling.constants import LABEL_RESERVATION_ORDER as ORDER
from tests.builders import make_pod
from tests.unit.descheduler.test_migration_controller import T0, Harness, _conditions, _job


async def test_replacement_in_the_other_jobs_reservation_ends_at_the_ttl() -> None:
    h = Harness()
    h.api.pods[("default", "web-2")] = (
        make_pod("web-2").owner("ReplicaSet", "web-rs").node("node-a").phase("Running").condition("Ready").obj()
    )
    h.api.jobs["job-1"] = _job("job-1", ttl="5m")
    h.api.jobs["job-2"] = _job("job-2", ttl="5m", pod="web-2")
    await h.run()
    h.schedule_reservation("uid-job-1", "node-b")
    await h.run()
    assert ("evict", "default/web-0") in h.api.calls
    del h.api.pods[("default", "web-0")]
    # The replacement goes into job-2's Reservation as it becomes Available, before job-2 evicts web-2.
    h.schedule_reservation("uid-job-2", "node-c")
    h.replace_pod("uid-job-2", ready=True)
    await h.run()

    job2 = h.job("job-2")["status"]
    assert (job2["phase"], job2["reason"], job2["message"]) == (
        "Failed",
        "ForbiddenMigratePod",
        "Reservation is already bound by another Pod",
    )
    assert ("evict", "default/web-2") not in h.api.calls
    assert h.job("job-1")["status"]["phase"] == "Running"
    assert _conditions(h.job("job-1"))["PodBoundReservation"] == ("False", "WaitForPodBindReservation")

    h.clock.now = T0 + 301  # past job-1's ttl
    h.controller.dirty.add("job-1")
    await h.run()
    job1 = h.job("job-1")["status"]
    assert (job1["phase"], job1["reason"]) == ("Failed", "Timeout")
    assert "uid-job-1" not in h.api.reservations


async def test_the_reservation_is_ordered_just_before_the_eviction() -> None:
    h = Harness()
    h.api.jobs["job-1"] = _job("job-1", ttl="5m")
    await h.run()
    assert ORDER not in h.api.reservations["uid-job-1"]["metadata"].get("labels", {})
    h.schedule_reservation("uid-job-1", "node-b")
    await h.run()
    assert h.api.reservations["uid-job-1"]["metadata"]["labels"][ORDER] == str(int(h.clock.now * 1000))
    calls = [c for c in h.api.calls if c[0] in ("label_reservation", "evict")]
    assert calls == [("label_reservation", "uid-job-1"), ("evict", "default/web-0")]
