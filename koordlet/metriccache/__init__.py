"""Time series per (metric, object) with window queries (avg, p50/p90/p95/p99, last, count)."""

from koordlet.metriccache.cache import MetricCache, MetricCacheOptions, MetricKind
from koordlet.metriccache.series import WindowStats, nearest_rank_down, window_stats

__all__ = [
    "MetricCache",
    "MetricCacheOptions",
    "MetricKind",
    "WindowStats",
    "nearest_rank_down",
    "window_stats",
]
