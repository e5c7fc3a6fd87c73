"""The scheduling monitor: an attempt past ``--scheduling-timeout`` is logged once with its stage and counted
once, whether it is caught by the periodic check (a binding in flight) or when a stage ends (a long
scheduling cycle)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from koord_scheduler.app.serve import ServeError, _options, _parser
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.monitor import (
    STAGE_BIND,
    STAGE_CYCLE,
    STAGE_PERMIT,
    MonitorOptions,
    SchedulingMonitor,
    timeout_line,
)
from koord_scheduler.scheduler.scheduler import SchedulerOptions
from tests.builders import make_pod

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "coscheduling"))
from gang_harness import CONFIG, NOW, gang_pod, node


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def monitor(timeout: float = 30.0) -> tuple[SchedulingMonitor, Clock, CollectorRegistry]:
    clock, registry = Clock(), CollectorRegistry()
    return SchedulingMonitor(MonitorOptions(timeout=timeout), registry, profiles=["p"], clock=clock), clock, registry


def counted(registry: CollectorRegistry, profile: str = "p") -> float:
    value = registry.get_sample_value("scheduler_scheduling_timeout_total", {"profile": profile})
    assert value is not None
    return value


def test_the_series_exists_at_zero_before_any_slow_attempt() -> None:
    _, _, registry = monitor()
    assert counted(registry) == 0.0


def test_a_binding_past_the_timeout_is_reported_once_by_the_check(caplog: pytest.LogCaptureFixture) -> None:
    mon, clock, registry = monitor()
    pod = make_pod("web").uid("u-1").build()
    mon.start(pod, "p")
    mon.stage(pod.key, STAGE_PERMIT)
    clock.now += 30.0
    assert mon.check() == 0, "at the timeout exactly: not yet"
    clock.now += 1.5
    with caplog.at_level(logging.WARNING, logger="koord-scheduler"):
        assert mon.check() == 1
        assert mon.check() == 0
        mon.complete(pod.key)
    assert [r.getMessage() for r in caplog.records] == [
        "!!!CRITICAL TIMEOUT!!! scheduling pod default/web(u-1) took longer (31.5s) than the timeout 30s "
        "(stage: waiting on Permit)"
    ]
    assert counted(registry) == 1.0
    assert mon.in_flight() == 0


def test_a_long_scheduling_cycle_is_reported_when_it_ends() -> None:
    mon, clock, registry = monitor(timeout=1.0)
    pod = make_pod("web").build()
    mon.start(pod, "p")
    clock.now += 2.0
    mon.stage(pod.key, STAGE_BIND)
    assert counted(registry) == 1.0
    clock.now += 5.0
    mon.complete(pod.key)
    assert counted(registry) == 1.0, "one attempt, one count"


def test_an_attempt_that_ends_late_unchecked_is_reported_at_the_end(caplog: pytest.LogCaptureFixture) -> None:
    mon, clock, registry = monitor(timeout=1.0)
    pod = make_pod("web").build()
    mon.start(pod, "p")
    mon.stage(pod.key, STAGE_BIND)
    clock.now += 3.0
    with caplog.at_level(logging.WARNING, logger="koord-scheduler"):
        mon.complete(pod.key)
    assert "(stage: Bind)" in caplog.records[0].getMessage()
    assert counted(registry) == 1.0


def test_a_new_attempt_starts_the_clock_again() -> None:
    mon, clock, registry = monitor(timeout=1.0)
    pod = make_pod("web").build()
    mon.start(pod, "p")
    clock.now += 0.9
    mon.complete(pod.key)
    mon.start(pod, "p")
    clock.now += 0.9
    assert mon.check() == 0
    assert counted(registry) == 0.0


def test_off_follows_nothing_and_registers_nothing() -> None:
    registry = CollectorRegistry()
    mon = SchedulingMonitor(MonitorOptions(timeout=0), registry, profiles=["p"])
    mon.start(make_pod("web").build(), "p")
    assert mon.in_flight() == 0
    assert registry.get_sample_value("scheduler_scheduling_timeout_total", {"profile": "p"}) is None


@pytest.mark.parametrize(
    ("elapsed", "timeout", "want"),
    [
        pytest.param(41.25, 30.0, "took longer (41.2s) than the timeout 30s", id="fraction"),
        pytest.param(90.0, 60.0, "took longer (90s) than the timeout 60s", id="whole"),
        pytest.param(1.5, 0.5, "took longer (1.5s) than the timeout 0.5s", id="sub-second-timeout"),
    ],
)
def test_timeout_line(elapsed: float, timeout: float, want: str) -> None:
    line = timeout_line("ns/p", "u", elapsed=elapsed, timeout=timeout, stage=STAGE_CYCLE)
    assert want in line
    assert line.startswith("!!!CRITICAL TIMEOUT!!! scheduling pod ns/p(u) ")
    assert line.endswith("(stage: scheduling cycle)")


async def test_a_gang_member_waiting_at_permit_is_reported_by_the_scheduler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # p1 is held by a scheduling gate, so p0 waits at Permit for its gang.
    held = json.loads(gang_pod("p1", "g", 2))
    held["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    cluster = MemoryCluster.from_objects(
        [parse_node(json.loads(node("n0")))], [parse_pod(json.loads(gang_pod("p0", "g", 2))), parse_pod(held)]
    )
    scheduler = build_scheduler(
        parse_scheduler_config(CONFIG),
        in_tree_registry(),
        cluster,
        clock=lambda: NOW,
        options=SchedulerOptions(monitor=MonitorOptions(timeout=30.0)),
    )
    clock = Clock()
    scheduler.monitor.clock = clock
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    scheduler.warm_up()
    assert scheduler.schedule_one()
    await asyncio.sleep(0)
    assert scheduler.waiting_pods.get("default/p0") is not None
    clock.now += 45.0
    with caplog.at_level(logging.WARNING, logger="koord-scheduler"):
        assert scheduler.monitor.check() == 1
    assert "scheduling pod default/p0(" in caplog.text and "(stage: waiting on Permit)" in caplog.text
    value = scheduler.metrics.registry.get_sample_value(
        "scheduler_scheduling_timeout_total", {"profile": "default-scheduler"}
    )
    assert value == 1.0
    await scheduler.run_until_idle()  # the wait runs out (virtual time); no second count
    assert scheduler.monitor.in_flight() == 0
    assert (
        scheduler.metrics.registry.get_sample_value(
            "scheduler_scheduling_timeout_total", {"profile": "default-scheduler"}
        )
        == 1.0
    )


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        pytest.param([], MonitorOptions(30.0, 10.0), id="koordinator-defaults"),
        pytest.param(
            ["--scheduling-timeout=2m", "--scheduler-monitor-period=1s"], MonitorOptions(120.0, 1.0), id="go-durations"
        ),
        pytest.param(["--scheduling-timeout=0s"], MonitorOptions(0.0, 10.0), id="off"),
    ],
)
def test_flags(flags: list[str], want: MonitorOptions) -> None:
    assert _options(_parser().parse_args(flags)).monitor == want


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        pytest.param(["--scheduling-timeout=-1s"], "--scheduling-timeout: -1s is negative", id="negative"),
        pytest.param(["--scheduler-monitor-period=0s"], "--scheduler-monitor-period: 0s must be more", id="zero"),
    ],
)
def test_bad_flags(flags: list[str], want: str) -> None:
    with pytest.raises(ServeError, match=want):
        _options(_parser().parse_args(flags))
