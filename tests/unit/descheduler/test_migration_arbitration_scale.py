"""Arbitration cost: one pass over many waiting PodMigrationJobs grows linearly with their number (each
waiting job used to scan every job to find the migrating pods)."""

from __future__ import annotations

import asyncio
import time

import pytest

from apis.config.descheduler import MigrationControllerArgs
from apis.scheduling.migration import parse_pod_migration_job
from koord_scheduler.descheduler.migration.api import MemoryMigrationApi
from koord_scheduler.descheduler.migration.arbitration import Arbitrator
from koord_scheduler.descheduler.migration.controller import MigrationController
from koord_scheduler.framework.types import EventType
from tests.builders import make_pod

pytestmark = pytest.mark.slow

T0 = 1767225600.0
WAITING = 10_000
RUNNING = 10
REPLICAS = 5
TIME_BOUND_SECONDS = 2.0
"""10,000 waiting jobs: about 0.3 s on the 2-core development machine under load; the former scan of every
job per waiting job took about 5 s there."""


def _job(name: str, pod: str, *, phase: str = "") -> dict[str, object]:
    job: dict[str, object] = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"podRef": {"namespace": "default", "name": pod, "uid": f"uid-default-{pod}"}},
    }
    if phase:
        job["status"] = {"phase": phase}
        job["spec"]["paused"] = True  # type: ignore[index]  # runs, but this pass leaves it alone
    return job


def _controller(waiting: int) -> MigrationController:
    controller = MigrationController(MemoryMigrationApi(), clock=lambda: T0 + 10)
    controller.arbitrator = Arbitrator.of(MigrationControllerArgs(max_migrating_globally=RUNNING))
    for i in range(waiting + RUNNING):
        pod = (
            make_pod(f"p-{i}")
            .owner("ReplicaSet", f"rs-{i // REPLICAS}")
            .node(f"node-{i % 50}")
            .phase("Running")
            .condition("Ready")
            .build()
        )
        controller.on_pod(EventType.ADDED, None, pod)
    for i in range(RUNNING):
        record = parse_pod_migration_job(_job(f"run-{i}", f"p-{waiting + i}", phase="Running"))
        controller.on_object("PodMigrationJob", EventType.ADDED, None, record)
    for i in range(waiting):
        controller.on_object(
            "PodMigrationJob", EventType.ADDED, None, parse_pod_migration_job(_job(f"w-{i}", f"p-{i}"))
        )
    return controller


def _pass_seconds(waiting: int) -> float:
    controller = _controller(waiting)

    async def reconcile() -> int:
        return await controller.reconcile()

    start = time.perf_counter()
    steps = asyncio.run(reconcile())
    elapsed = time.perf_counter() - start
    assert steps == 0  # every waiting job is held by maxMigratingGlobally
    assert all(controller.jobs[f"w-{i}"].phase == "" for i in range(waiting))
    return elapsed


def test_many_waiting_jobs_are_arbitrated_in_linear_time() -> None:
    elapsed = _pass_seconds(WAITING)
    assert elapsed < TIME_BOUND_SECONDS, f"{WAITING} waiting jobs took {elapsed:.2f}s"


def test_arbitration_grows_linearly() -> None:
    """Four times the jobs: about five times the time (the quadratic scan: about sixteen)."""
    small = min(_pass_seconds(2500) for _ in range(2))
    large = min(_pass_seconds(10_000) for _ in range(2))
    assert large < 10 * small, f"2500 jobs: {small:.3f}s, 10000 jobs: {large:.3f}s"


def test_an_arbitration_pass_over_many_waiting_jobs_is_linear_too() -> None:
    """The interval path (``arbitrationArgs``): one sorted pass over every waiting job."""
    controller = _controller(WAITING)
    start = time.perf_counter()
    assert controller.arbitrate() == 0  # all held by maxMigratingGlobally
    elapsed = time.perf_counter() - start
    assert elapsed < TIME_BOUND_SECONDS, f"{WAITING} waiting jobs took {elapsed:.2f}s"
