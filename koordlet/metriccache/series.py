"""The window statistics Koordinator computes over one series (avg, nearest-rank-down percentiles, last).

The samples themselves live in the metric cache's shared tick ring (``koordlet.metriccache.cache``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


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
