"""The over-use revoke decision (Koordinator's QuotaOverUsedRevokeController), as pure functions."""

from __future__ import annotations

import pytest

from koord_scheduler.quota.revoke import Assigned, OverUseMonitor, fits, pods_to_revoke


def pod(key: str, cpu: int, *, priority: int = 0, start: float = 0.0, np: bool = False) -> Assigned:
    return Assigned(key, priority, start, {"cpu": cpu}, non_preemptible=np)


@pytest.mark.parametrize(
    ("used", "runtime", "pods", "revoked"),
    [
        pytest.param({"cpu": 6}, {"cpu": 8}, [pod("a", 6)], [], id="fits-nothing-revoked"),
        pytest.param(
            {"cpu": 10},
            {"cpu": 8},
            [pod("hi", 4, priority=10), pod("lo", 2, priority=1), pod("mid", 4, priority=5)],
            ["lo"],
            id="lowest-priority-first",
        ),
        pytest.param(
            {"cpu": 10},
            {"cpu": 8},
            [pod("old", 2, start=1.0), pod("new", 2, start=2.0), pod("big", 6, priority=9)],
            ["new"],
            id="equal-priority-started-last-first",
        ),
        pytest.param(
            {"cpu": 10},
            {"cpu": 5},
            [pod("small", 1, priority=1), pod("large", 5, priority=2), pod("keep", 4, priority=3)],
            ["large"],
            id="taken-pods-given-back-most-important-first",
        ),
        pytest.param(
            {"cpu": 10},
            {"cpu": 3},
            [pod("np", 6, np=True), pod("a", 4, priority=1)],
            ["a"],
            id="non-preemptible-skipped-and-still-over-all-taken-revoked",
        ),
        pytest.param({"cpu": 10}, {"memory": 1}, [pod("a", 10)], [], id="runtime-resources-only"),
    ],
)
def test_pods_to_revoke(
    used: dict[str, int], runtime: dict[str, int], pods: list[Assigned], revoked: list[str]
) -> None:
    assert pods_to_revoke(used, runtime, pods) == revoked


@pytest.mark.parametrize(
    ("used", "runtime", "expected"),
    [
        pytest.param({"cpu": 2}, {"cpu": 2}, True, id="equal"),
        pytest.param({"cpu": 3}, {"cpu": 2}, False, id="above"),
        pytest.param({"cpu": 3}, {"memory": 2}, True, id="resource-not-in-runtime"),
        pytest.param({}, {"cpu": 2}, True, id="nothing-used"),
    ],
)
def test_fits(used: dict[str, int], runtime: dict[str, int], expected: bool) -> None:
    assert fits(used, runtime) is expected


def test_monitor_waits_for_the_delay_then_restarts_its_clock() -> None:
    monitor = OverUseMonitor(last_under_used=0.0)
    over, under, runtime = {"cpu": 9}, {"cpu": 1}, {"cpu": 8}
    assert not monitor.due(over, runtime, now=100.0, delay=120.0)
    assert monitor.due(over, runtime, now=121.0, delay=120.0)
    assert not monitor.due(over, runtime, now=200.0, delay=120.0), "the clock restarted at 121"
    assert not monitor.due(under, runtime, now=300.0, delay=120.0)
    assert not monitor.due(over, runtime, now=400.0, delay=120.0), "under at 300: only 100 s over"
    assert monitor.due(over, runtime, now=421.0, delay=120.0)
