"""Pure maths of the BE throttle report."""

from __future__ import annotations

from collections.abc import Iterable


def be_throttled_ratio(pod_ratios: Iterable[float | None]) -> float | None:
    """Mean of the BE pods' latest throttled ratios (nr_throttled/nr_periods), ignoring pods without data.

    ``None`` when no BE pod has a recent sample. A plain mean, not period-weighted: each pod counts once, so
    one tiny pod cannot hide behind a big one.
    """
    values = [r for r in pod_ratios if r is not None]
    if not values:
        return None
    return sum(values) / len(values)
