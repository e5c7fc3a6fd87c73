"""The metric cache: time series per (metric kind, object) with window queries, plus a small KV store.

Retention is by capacity: each series keeps ``retention / collect_interval`` samples (30 min at 1 s by
default), so memory is bounded by the number of live series. Series of objects that stopped reporting
(deleted pods) are dropped by :meth:`MetricCache.gc` once their newest sample is older than the retention.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from koordlet.metriccache.series import RingSeries, WindowStats, window_stats
from koordlet.system.clock import Clock, wall_clock


class MetricKind(StrEnum):
    """Series names (Koordinator's ``MetricKind``). The object key says which pod/container/BE resource."""

    NODE_CPU_USAGE = "node_cpu_usage"
    NODE_MEMORY_USAGE = "node_memory_usage"
    NODE_MEMORY_USAGE_WITH_PAGE_CACHE = "node_memory_usage_with_page_cache"
    SYS_CPU_USAGE = "sys_cpu_usage"
    SYS_MEMORY_USAGE = "sys_memory_usage"
    NODE_BE = "node_be"
    POD_CPU_USAGE = "pod_cpu_usage"
    POD_MEMORY_USAGE = "pod_memory_usage"
    POD_CPU_THROTTLED = "pod_cpu_throttled"
    CONTAINER_CPU_USAGE = "container_cpu_usage"
    CONTAINER_MEMORY_USAGE = "container_memory_usage"
    CONTAINER_CPU_THROTTLED = "container_cpu_throttled"
    NODE_PSI = "node_psi"
    POD_PSI = "pod_psi"


@dataclass(frozen=True, slots=True)
class MetricCacheOptions:
    retention_seconds: float = 1800.0
    """Koordinator keeps 12 h in a TSDB; every window it actually queries is <= 30 min."""
    collect_interval_seconds: float = 1.0
    slack: float = 1.05
    """Extra capacity so jitter in the collect ticks never shortens the 30-min window."""

    @property
    def capacity(self) -> int:
        return math.ceil(self.retention_seconds / self.collect_interval_seconds * self.slack) + 1


SeriesKey = tuple[MetricKind, str]


class MetricCache:
    """Thread-safe (one lock): collectors append from the event loop, reporters may query from threads."""

    def __init__(self, options: MetricCacheOptions | None = None, *, clock: Clock = wall_clock) -> None:
        self.options = options or MetricCacheOptions()
        self._clock = clock
        self._series: dict[SeriesKey, RingSeries] = {}
        self._kv: dict[str, Any] = {}
        self._lock = threading.Lock()

    def append(self, kind: MetricKind, key: str, t: float, value: float) -> None:
        with self._lock:
            series = self._series.get((kind, key))
            if series is None:
                series = self._series[(kind, key)] = RingSeries(self.options.capacity)
            series.append(t, value)

    def append_many(self, samples: Iterable[tuple[MetricKind, str, float, float]]) -> None:
        for kind, key, t, value in samples:
            self.append(kind, key, t, value)

    def query(self, kind: MetricKind, key: str, start: float, end: float) -> WindowStats | None:
        """Stats of ``kind``/``key`` over ``[start, end]``; ``None`` if no sample falls in it."""
        with self._lock:
            series = self._series.get((kind, key))
            if series is None:
                return None
            times, values = series.window(start, end)
            return window_stats(times, values)

    def last(self, kind: MetricKind, key: str, max_age: float) -> float | None:
        """The newest value if it is at most ``max_age`` seconds old (strategies' "last within 2 s")."""
        now = self._clock()
        stats = self.query(kind, key, now - max_age, now)
        return None if stats is None else stats.last

    def keys(self, kind: MetricKind) -> list[str]:
        with self._lock:
            return [key for k, key in self._series if k is kind]

    def gc(self) -> int:
        """Drop series whose newest sample is older than the retention. Returns how many were dropped."""
        cutoff = self._clock() - self.options.retention_seconds
        with self._lock:
            stale = [k for k, s in self._series.items() if (s.last_time or 0.0) < cutoff]
            for k in stale:
                del self._series[k]
        return len(stale)

    def series_count(self) -> int:
        return len(self._series)

    def nbytes(self) -> int:
        """Bytes held by sample buffers (not counting the per-series Python object, about 250 B)."""
        with self._lock:
            return sum(s.nbytes for s in self._series.values())

    def kv_get(self, key: str) -> Any:
        return self._kv.get(key)

    def kv_set(self, key: str, value: Any) -> None:
        self._kv[key] = value
