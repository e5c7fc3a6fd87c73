"""The metric cache: time series per (metric kind, object) with window queries, plus a small KV store.

Layout: collectors stamp every sample of a tick with the same time, so the cache keeps **one** ring of tick
times and a float32 matrix ``[series, slot]`` aligned to it (NaN = no sample of that series in that
tick). A sample then costs 4 bytes, and starting a tick clears one column for all series in one numpy
operation. Retention is by capacity (``retention / collect_interval`` ticks, 30 min at 1 s by default), so
memory is bounded by the number of live series. Series of objects that stopped reporting (deleted pods)
are dropped by :meth:`MetricCache.gc` once their newest sample is older than the retention.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from koordlet.metriccache.series import WindowStats, window_stats
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
    POD_MEMORY_USAGE_WITH_PAGE_CACHE = "pod_memory_usage_with_page_cache"
    POD_CPU_THROTTLED = "pod_cpu_throttled"
    CONTAINER_CPU_USAGE = "container_cpu_usage"
    CONTAINER_MEMORY_USAGE = "container_memory_usage"
    CONTAINER_CPU_THROTTLED = "container_cpu_throttled"
    NODE_PSI = "node_psi"
    POD_PSI = "pod_psi"
    RESCTRL_LLC = "resctrl_resource_llc"
    """Key ``<group>/<cache id>``: LLC occupancy bytes of a resctrl group."""
    RESCTRL_MB = "resctrl_resource_mb"
    """Key ``<group>/<cache id>/<mbm_local_bytes|mbm_total_bytes>``: the counter as read."""
    CONTAINER_CPI = "container_cpi"
    """Key ``<container id>/<cycles|instructions>``: counts over the CPI window."""
    NODE_COLD_PAGE_SIZE = "node_memory_cold_page_size"
    POD_COLD_PAGE_SIZE = "pod_memory_cold_page_size"
    """Key ``<pod uid>``; containers use ``CONTAINER_COLD_PAGE_SIZE`` with the container id."""
    CONTAINER_COLD_PAGE_SIZE = "container_memory_cold_page_size"
    NODE_MEMORY_WITH_HOT_PAGE = "node_memory_with_hot_page_usage"
    HOST_APP_CPU_USAGE = "host_application_cpu_usage"
    """Key: the NodeSLO ``hostApplications[].name``."""
    HOST_APP_MEMORY_USAGE = "host_application_memory_usage"
    POD_MEMORY_WITH_HOT_PAGE = "pod_memory_with_hot_page_usage"


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

    _INITIAL_ROWS = 64

    def __init__(self, options: MetricCacheOptions | None = None, *, clock: Clock = wall_clock) -> None:
        self.options = options or MetricCacheOptions()
        self._clock = clock
        capacity = self.options.capacity
        self._times = np.full(capacity, -np.inf, dtype=np.float64)
        self._head = -1
        self._count = 0
        self._order: npt.NDArray[np.intp] | None = None
        self._values = np.full((self._INITIAL_ROWS, capacity), np.nan, dtype=np.float32)
        self._last_time = np.full(self._INITIAL_ROWS, -np.inf, dtype=np.float64)
        self._last_value = np.zeros(self._INITIAL_ROWS, dtype=np.float64)
        self._rows: dict[SeriesKey, int] = {}
        self._free: list[int] = list(range(self._INITIAL_ROWS - 1, -1, -1))
        self._kv: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._collected: list[Callable[[float], None]] = []

    # -- layout helpers (call with the lock held) ---------------------------------------------

    def _slot(self, t: float) -> int | None:
        capacity = self.options.capacity
        if self._head >= 0 and t == self._times[self._head]:
            return self._head
        if self._head < 0 or t > self._times[self._head]:
            self._head = (self._head + 1) % capacity
            self._times[self._head] = t
            self._values[:, self._head] = np.nan
            self._count = min(self._count + 1, capacity)
            self._order = None
            return self._head
        match = np.flatnonzero(self._times == t)  # a late sample for a tick we still hold
        return int(match[0]) if len(match) else None

    def _row(self, key: SeriesKey) -> int:
        row = self._rows.get(key)
        if row is not None:
            return row
        if not self._free:
            old = len(self._values)
            grown = np.full((old * 2, self.options.capacity), np.nan, dtype=np.float32)
            grown[:old] = self._values
            self._values = grown
            self._last_time = np.concatenate([self._last_time, np.full(old, -np.inf)])
            self._last_value = np.concatenate([self._last_value, np.zeros(old)])
            self._free.extend(range(old * 2 - 1, old - 1, -1))
        row = self._free.pop()
        self._rows[key] = row
        return row

    def _ordered_slots(self) -> npt.NDArray[np.intp]:
        if self._order is None:
            capacity = self.options.capacity
            first = (self._head - self._count + 1) % capacity
            self._order = (first + np.arange(self._count)) % capacity
        return self._order

    # -- API -----------------------------------------------------------------------------------

    def append(self, kind: MetricKind, key: str, t: float, value: float) -> None:
        with self._lock:
            slot = self._slot(t)
            if slot is None:
                return  # older than everything we keep
            row = self._row((kind, key))
            self._values[row, slot] = value
            if t >= self._last_time[row]:
                self._last_time[row] = t
                self._last_value[row] = value

    def append_many(self, samples: Iterable[tuple[MetricKind, str, float, float]]) -> None:
        for kind, key, t, value in samples:
            self.append(kind, key, t, value)

    def query(self, kind: MetricKind, key: str, start: float, end: float) -> WindowStats | None:
        """Stats of ``kind``/``key`` over ``[start, end]``; ``None`` if no sample falls in it."""
        with self._lock:
            row = self._rows.get((kind, key))
            if row is None:
                return None
            slots = self._ordered_slots()
            times = self._times[slots]
            lo = int(np.searchsorted(times, start, side="left"))
            hi = int(np.searchsorted(times, end, side="right"))
            values = self._values[row, slots[lo:hi]]
            present = ~np.isnan(values)
            return window_stats(times[lo:hi][present], values[present])

    def last(self, kind: MetricKind, key: str, max_age: float) -> float | None:
        """The newest value if it is at most ``max_age`` seconds old (strategies' "last within 2 s")."""
        with self._lock:
            row = self._rows.get((kind, key))
            if row is None or self._clock() - self._last_time[row] > max_age:
                return None
            return float(self._last_value[row])

    # -- the "collected" signal ------------------------------------------------------------------

    def subscribe_collected(self, callback: Callable[[float], None]) -> Callable[[], None]:
        """Call ``callback(t)`` each time a collect tick stamped ``t`` is complete (see
        :meth:`notify_collected`), so a consumer decides on fresh samples instead of on its own timer.
        Returns the function that unsubscribes. Callbacks run in the collector's thread: keep them short."""
        with self._lock:
            self._collected.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._collected:
                    self._collected.remove(callback)

        return unsubscribe

    def notify_collected(self, t: float) -> None:
        """The collectors have appended every sample of the tick stamped ``t``. A raising subscriber is
        dropped from this call only (the collectors never fail because of a consumer)."""
        with self._lock:
            callbacks = list(self._collected)
        for callback in callbacks:
            try:
                callback(t)
            except Exception:  # a consumer's bug must not stop collection
                logging.getLogger(__name__).exception("collected-signal subscriber failed")

    def keys(self, kind: MetricKind) -> list[str]:
        with self._lock:
            return [key for k, key in self._rows if k is kind]

    def gc(self) -> int:
        """Drop series whose newest sample is older than the retention. Returns how many were dropped."""
        cutoff = self._clock() - self.options.retention_seconds
        with self._lock:
            stale = [k for k, row in self._rows.items() if self._last_time[row] < cutoff]
            for k in stale:
                row = self._rows.pop(k)
                self._values[row] = np.nan
                self._last_time[row] = -np.inf
                self._free.append(row)
        return len(stale)

    def series_count(self) -> int:
        return len(self._rows)

    def nbytes(self) -> int:
        """Bytes held by sample buffers: the value matrix (allocated rows) plus the shared time ring."""
        with self._lock:
            return int(self._values.nbytes + self._times.nbytes + self._last_time.nbytes + self._last_value.nbytes)

    def bytes_per_series(self) -> float:
        """Marginal cost of one more series: one float32 per slot plus its last-sample bookkeeping."""
        return float(self.options.capacity * 4 + 16)

    def kv_get(self, key: str) -> Any:
        return self._kv.get(key)

    def kv_set(self, key: str, value: Any) -> None:
        self._kv[key] = value
