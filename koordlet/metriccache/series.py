"""One time series in a fixed-size numpy ring buffer, and the window statistics Koordinator computes.

Memory per series is fixed at creation: ``capacity x (8 B time + 4 B value)``; values are float32 (CPU cores
and bytes need far less than 7 significant digits for scheduling decisions), times are exact float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Aggregates of the samples in one window. ``span`` is last - first sample time (cold-start checks)."""

    count: int
    avg: float
    p50: float
    p90: float
    p95: float
    p99: float
    last: float
    first_time: float
    last_time: float

    @property
    def span(self) -> float:
        return self.last_time - self.first_time

    def get(self, aggregation: str) -> float:
        """``avg``, ``p50``, ``p90``, ``p95``, ``p99``, ``last`` or ``count``."""
        return float(getattr(self, aggregation))


def nearest_rank_down(sorted_values: npt.NDArray[np.float64], p: float) -> float:
    """Koordinator's percentile: ``sorted[max(int(n*p) - 1, 0)]`` (nearest rank, rounded down)."""
    n = len(sorted_values)
    return float(sorted_values[max(int(n * p) - 1, 0)])


def window_stats(times: npt.NDArray[np.float64], values: npt.NDArray[np.floating]) -> WindowStats | None:
    """Stats of time-ordered samples; ``None`` when there are none."""
    n = len(values)
    if n == 0:
        return None
    as64 = values.astype(np.float64)
    ordered = np.sort(as64)
    return WindowStats(
        count=n,
        avg=float(as64.mean()),
        p50=nearest_rank_down(ordered, 0.5),
        p90=nearest_rank_down(ordered, 0.9),
        p95=nearest_rank_down(ordered, 0.95),
        p99=nearest_rank_down(ordered, 0.99),
        last=float(as64[-1]),
        first_time=float(times[0]),
        last_time=float(times[-1]),
    )


class RingSeries:
    """Append-only (in time order) samples; the oldest are overwritten when full."""

    __slots__ = ("_size", "_start", "_times", "_values", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._times = np.zeros(capacity, dtype=np.float64)
        self._values = np.zeros(capacity, dtype=np.float32)
        self._start = 0
        self._size = 0

    @property
    def nbytes(self) -> int:
        return int(self._times.nbytes + self._values.nbytes)

    def __len__(self) -> int:
        return self._size

    @property
    def last_time(self) -> float | None:
        if self._size == 0:
            return None
        return float(self._times[(self._start + self._size - 1) % self.capacity])

    def append(self, t: float, value: float) -> bool:
        """Add a sample; a sample not newer than the last one is dropped (returns ``False``)."""
        last = self.last_time
        if last is not None and t <= last:
            return False
        end = (self._start + self._size) % self.capacity
        self._times[end] = t
        self._values[end] = value
        if self._size < self.capacity:
            self._size += 1
        else:
            self._start = (self._start + 1) % self.capacity
        return True

    def ordered(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float32]]:
        """All samples, oldest first (views when not wrapped, copies otherwise)."""
        lo, n, cap = self._start, self._size, self.capacity
        if lo + n <= cap:
            return self._times[lo : lo + n], self._values[lo : lo + n]
        idx = np.r_[lo:cap, 0 : (lo + n) % cap]
        return self._times[idx], self._values[idx]

    def window(self, start: float, end: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float32]]:
        """Samples with ``start <= t <= end``, oldest first."""
        times, values = self.ordered()
        lo = int(np.searchsorted(times, start, side="left"))
        hi = int(np.searchsorted(times, end, side="right"))
        return times[lo:hi], values[lo:hi]
