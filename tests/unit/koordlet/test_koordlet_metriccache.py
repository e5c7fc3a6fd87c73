import sys
import tracemalloc

import numpy as np
import pytest

from koordlet.metriccache import (
    MetricCache,
    MetricCacheOptions,
    MetricKind,
    WindowStats,
    window_stats,
)
from koordlet.system.clock import FakeClock


@pytest.mark.parametrize(
    ("values", "want"),
    [
        # nearest rank rounded down: idx = int(n*p) - 1, clamped at 0
        pytest.param([5.0], {"p50": 5.0, "p90": 5.0, "p99": 5.0, "avg": 5.0}, id="single"),
        pytest.param([1.0, 2.0], {"p50": 1.0, "p90": 1.0, "p99": 1.0, "avg": 1.5}, id="two-rounds-down"),
        pytest.param(list(range(1, 11)), {"p50": 5.0, "p90": 9.0, "p95": 9.0, "p99": 9.0, "avg": 5.5}, id="one-to-ten"),
        pytest.param(
            list(range(100, 0, -1)),
            {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0},
            id="hundred-unsorted",
        ),
    ],
)
def test_percentiles(values: list[float], want: dict[str, float]) -> None:
    times = np.arange(len(values), dtype=np.float64)
    stats = window_stats(times, np.array(values, dtype=np.float32))
    assert stats is not None
    assert {k: stats.get(k) for k in want} == want


def test_window_stats_empty() -> None:
    assert window_stats(np.array([]), np.array([], dtype=np.float32)) is None


def test_cache_query_window_and_last() -> None:
    clock = FakeClock(1000.0)
    cache = MetricCache(MetricCacheOptions(retention_seconds=60), clock=clock)
    for i in range(30):
        cache.append(MetricKind.POD_CPU_USAGE, "uid-1", clock.advance(1.0), float(i))
    stats = cache.query(MetricKind.POD_CPU_USAGE, "uid-1", clock() - 9.5, clock())
    assert stats == WindowStats(
        count=10,
        avg=24.5,
        p50=24.0,
        p90=28.0,
        p95=28.0,
        p99=28.0,
        last=29.0,
        first_time=1021.0,
        last_time=1030.0,
    )
    assert stats.span == 9.0
    assert cache.last(MetricKind.POD_CPU_USAGE, "uid-1", max_age=2.0) == 29.0
    clock.advance(5.0)
    assert cache.last(MetricKind.POD_CPU_USAGE, "uid-1", max_age=2.0) is None
    assert cache.query(MetricKind.POD_CPU_USAGE, "other", 0, clock()) is None
    assert cache.keys(MetricKind.POD_CPU_USAGE) == ["uid-1"]


def test_retention_is_capacity_bounded() -> None:
    clock = FakeClock(0.0)
    cache = MetricCache(MetricCacheOptions(retention_seconds=1800, collect_interval_seconds=1.0), clock=clock)
    for _ in range(4000):
        cache.append(MetricKind.NODE_CPU_USAGE, "", clock.advance(1.0), 1.0)
    stats = cache.query(MetricKind.NODE_CPU_USAGE, "", 0, clock())
    assert stats is not None and 1800 <= stats.count <= cache.options.capacity
    assert stats.span >= 1800


def test_gc_drops_stale_series() -> None:
    clock = FakeClock(0.0)
    cache = MetricCache(MetricCacheOptions(retention_seconds=60), clock=clock)
    cache.append(MetricKind.POD_CPU_USAGE, "gone", clock.advance(1.0), 1.0)
    clock.advance(30)
    cache.append(MetricKind.POD_CPU_USAGE, "alive", clock(), 1.0)
    clock.advance(40)
    assert cache.gc() == 1
    assert cache.keys(MetricKind.POD_CPU_USAGE) == ["alive"]


def test_bytes_per_series() -> None:
    """30 min at 1 s: 1891 slots x 4 B (float32 on a shared time axis) = 7.6 KB per series."""
    cache = MetricCache()
    n = 1024  # a power of two: rows are allocated by doubling
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(n):
        cache.append(MetricKind.POD_CPU_USAGE, f"uid-{i}", 1.0, 1.0)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    per_series = sum(s.size_diff for s in after.compare_to(before, "filename")) / n
    print(f"bytes/series: marginal {cache.bytes_per_series():.0f}, measured {per_series:.0f}", file=sys.stderr)
    assert cache.bytes_per_series() == cache.options.capacity * 4 + 16
    assert per_series < cache.bytes_per_series() + 512
