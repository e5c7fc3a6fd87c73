"""The descheduler controller: a round over what the informers delivered becomes PodMigrationJobs."""

from __future__ import annotations

import argparse
import asyncio
import itertools
from pathlib import Path

import pytest

from apis.config.descheduler import parse_descheduler_config
from apis.scheduling.migration import parse_pod_migration_job
from apis.slo.nodemetric_record import parse_node_metric
from koord_scheduler.app.cluster_file import load_cluster_file
from koord_scheduler.app.controller_flags import ControllerFlagError, add_controller_flags, controller_flags
from koord_scheduler.descheduler.controller import DeschedulerController
from koord_scheduler.descheduler.migration.api import MemoryMigrationApi
from koord_scheduler.descheduler.migration.controller import EvictLimiter
from koord_scheduler.descheduler.round import Descheduler, RoundPlan
from koord_scheduler.framework.types import EventType

REPO = Path(__file__).resolve().parents[3]
CLUSTER = REPO / "config" / "simulate" / "descheduling-cluster.yaml"
CONFIG = REPO / "config" / "descheduler" / "descheduler-config.yaml"
NOW = 1767227401.0


def _controller(text: str, *, interval: float = 60.0) -> tuple[DeschedulerController, MemoryMigrationApi]:
    config, args = parse_descheduler_config(text)
    api = MemoryMigrationApi()
    controller = DeschedulerController(
        Descheduler(config, args, clock=lambda: NOW), api, interval=interval, clock=lambda: NOW
    )
    cluster = load_cluster_file(CLUSTER, {"NodeMetric": parse_node_metric})
    for node in cluster.nodes:
        controller.on_node(EventType.ADDED, None, node)
    for pod in cluster.pods:
        controller.on_pod(EventType.ADDED, None, pod)
    for _, raw in cluster.objects["NodeMetric"]:
        controller.on_object("NodeMetric", EventType.ADDED, None, parse_node_metric(raw))
    return controller, api


async def test_rounds_run_on_the_shared_loop_timer_and_a_failed_round_does_not_end_the_controller() -> None:
    """Nothing before ``ready()``; the first round at once, then one per interval (the loop's ``due()``
    timer, not its idle wake-ups); a round that raises is counted by the loop and the next runs on time."""
    controller, _ = _controller(CONFIG.read_text(), interval=0.1)
    listed = False
    controller.ready = lambda: listed
    started: list[float] = []
    plain = controller.run_once

    async def run_once() -> RoundPlan:
        started.append(controller.loop.clock())
        if len(started) == 2:
            raise RuntimeError("boom")
        return await plain()

    controller.run_once = run_once  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    await asyncio.sleep(0.2)
    assert started == []
    listed = True
    for _ in range(400):
        await asyncio.sleep(0.01)
        if len(started) >= 4:
            break
    stop.set()
    await asyncio.wait_for(task, 5)
    assert len(started) >= 4
    gaps = [b - a for a, b in itertools.pairwise(started)]
    assert all(gap >= 0.099 for gap in gaps), gaps
    assert controller.loop.failures == 1
    assert controller.rounds == len(started) - 1


async def test_interval_zero_runs_one_round_only() -> None:
    controller, _ = _controller(CONFIG.read_text(), interval=0.0)
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    for _ in range(100):
        await asyncio.sleep(0.01)
        if controller.rounds:
            break
    await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert controller.rounds == 1
    assert controller.due() is None


async def test_round_creates_jobs_then_skips_pods_already_migrating() -> None:
    controller, api = _controller(CONFIG.read_text())
    await controller.run_once()
    jobs = [parse_pod_migration_job(j) for j in api.jobs.values()]
    assert sorted(f"{j.pod_namespace}/{j.pod_name}" for j in jobs) == ["default/api-0", "default/web-3"]
    assert all(j.mode == "ReservationFirst" and j.ttl_seconds == 300.0 for j in jobs)
    for job in jobs:
        controller.on_object("PodMigrationJob", EventType.ADDED, None, job)
    plan = await controller.run_once()
    assert "default/web-3" not in {m.key for m in plan.migrations}


async def test_dry_run_creates_nothing() -> None:
    controller, api = _controller(CONFIG.read_text().replace("dryRun: false", "dryRun: true"))
    plan = await controller.run_once()
    assert len(plan.migrations) == 2
    assert api.jobs == {} and api.calls == []


async def test_migration_controller_dry_run_creates_nothing() -> None:
    text = CONFIG.read_text().replace(
        "      evictionPolicy: Eviction\n", "      evictionPolicy: Eviction\n      dryRun: true\n"
    )
    assert "dryRun: true" in text
    controller, api = _controller(text)
    plan = await controller.run_once()
    assert len(plan.migrations) == 2
    assert api.jobs == {} and api.calls == []


def test_evict_limiter() -> None:
    now = [0.0]
    limiter = EvictLimiter(2.0, 1, clock=lambda: now[0])
    assert limiter.wait() == 0.0
    assert limiter.wait() == pytest.approx(0.5)
    now[0] = 0.5
    assert limiter.wait() == 0.0


def _flags(*argv: str) -> object:
    parser = argparse.ArgumentParser()
    add_controller_flags(parser, bool)
    parser.add_argument("--reservation-controller", default=True)
    return controller_flags(parser.parse_args(list(argv)))


def test_descheduler_needs_a_valid_config(tmp_path: Path) -> None:
    with pytest.raises(ControllerFlagError, match="descheduler needs --descheduler-config"):
        _flags("--controllers=descheduler")
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.read_text().replace("highThresholds:", "highThreshold:"))
    with pytest.raises(ControllerFlagError, match=r"args\.highThreshold: Unknown field"):
        _flags("--controllers=descheduler", f"--descheduler-config={bad}")
    _flags("--controllers=descheduler,migration", f"--descheduler-config={CONFIG}")
