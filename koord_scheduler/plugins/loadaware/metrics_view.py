"""Per-node load arrays aligned with snapshot positions, and the usage-threshold profiles they use.

Filter and Score read these arrays for all candidate nodes with a few numpy gathers; nothing per node
runs in Python during a cycle. Each row is also kept as a :class:`RowRecord` of plain Python values,
which the per-node Filter and Score read; rewrites reach the arrays lazily (:meth:`LoadView.flush`). A row is
rewritten only when its node's NodeMetric, pods or position change (from
:class:`~koord_scheduler.plugins.loadaware.assign_cache.NodeLoad`).

Each row holds two *views*, indexed by the incoming pod's kind: ``0`` for non-prod pods and ``1`` for
koord-prod pods, because prod pods may be filtered on prod usage (``prodUsageThresholds``) and scored
on it (``scoreAccordingProdUsage``). For each view: the thresholds in force on that node (after the
node's ``scheduling.koordinator.sh/usage-thresholds`` annotation), whether any are set, whether they are
the aggregated ones (for the reason text), and the *base* usage the incoming estimate is added to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import add
from typing import NamedTuple

import numpy as np

from apis.config.loadaware_args import LoadAwareSchedulingArgs
from apis.core import boundedjson
from apis.slo.common import parse_go_duration
from koord_scheduler.plugins.loadaware.assign_cache import NodeLoad
from koord_scheduler.plugins.loadaware.scoring import BoolArray, FloatArray, IntArray

ANNOTATION_CUSTOM_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"
NON_PROD, PROD = 0, 1
_NO_TIME = float("-inf")


@dataclass(frozen=True, slots=True)
class AggregatedProfile:
    thresholds: tuple[int, ...]
    aggregation_type: str
    duration: float
    """Seconds; 0 = the longest window reported."""


@dataclass(frozen=True, slots=True)
class ThresholdProfile:
    """Usage thresholds in force on one node, aligned with the plugin's resources (0 = off).

    ``*_set`` says whether the map was non-empty: Koordinator picks the prod path for a prod pod when the
    prod map is non-empty, even if every value in it is 0.
    """

    usage: tuple[int, ...]
    usage_set: bool
    prod: tuple[int, ...]
    prod_set: bool
    aggregated: AggregatedProfile | None


def _vector(values: Mapping[str, int], resources: Sequence[str]) -> tuple[int, ...]:
    return tuple(int(values.get(r, 0)) for r in resources)


def args_profile(args: LoadAwareSchedulingArgs, resources: Sequence[str]) -> ThresholdProfile:
    aggregated = None
    agg = args.aggregated
    if agg is not None and agg.usage_thresholds and agg.usage_aggregation_type:
        aggregated = AggregatedProfile(
            _vector(agg.usage_thresholds, resources), agg.usage_aggregation_type, float(agg.usage_aggregated_duration)
        )
    return ThresholdProfile(
        _vector(args.usage_thresholds, resources),
        bool(args.usage_thresholds),
        _vector(args.prod_usage_thresholds, resources),
        bool(args.prod_usage_thresholds),
        aggregated,
    )


def node_profile(default: ThresholdProfile, annotation: str | None, resources: Sequence[str]) -> ThresholdProfile:
    """``generateUsageThresholdsFilterProfile``: each non-empty field of the node's annotation replaces
    the plugin-level one; an aggregated block without thresholds or type is dropped; a malformed
    annotation is ignored (the plugin-level profile applies). Resources outside ``resources`` are
    ignored, as Koordinator's vectorizer ignores them."""
    if not annotation:
        return default
    try:
        custom = boundedjson.loads(annotation)
        if not isinstance(custom, dict):
            return default
        usage = _percent_map(custom.get("usageThresholds"))
        prod = _percent_map(custom.get("prodUsageThresholds"))
        aggregated = default.aggregated
        raw_agg = custom.get("aggregatedUsage")
        if isinstance(raw_agg, dict):
            agg_thresholds = _percent_map(raw_agg.get("usageThresholds"))
            agg_type = raw_agg.get("usageAggregationType") or ""
            if agg_thresholds and isinstance(agg_type, str) and agg_type:
                duration_text = raw_agg.get("usageAggregatedDuration") or "0s"
                aggregated = AggregatedProfile(
                    _vector(agg_thresholds, resources), agg_type, parse_go_duration(str(duration_text))
                )
    except (ValueError, TypeError):
        return default
    return ThresholdProfile(
        _vector(usage, resources) if usage else default.usage,
        bool(usage) or default.usage_set,
        _vector(prod, resources) if prod else default.prod,
        bool(prod) or default.prod_set,
        aggregated,
    )


def _percent_map(raw: object) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError("expected an object")
    out: dict[str, int] = {}
    for name, value in raw.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name}: expected an integer")
        out[str(name)] = value
    return out


@dataclass(frozen=True, slots=True)
class ScorePaths:
    """Which base the Score reads, from the plugin args (not per node)."""

    aggregation_type: str = ""
    duration: float = 0.0
    prod_for_prod_pods: bool = False


class FilterView(NamedTuple):
    """What Filter reads of a row for one kind of incoming pod."""

    on: bool
    """Any threshold is set."""
    aggregated: bool
    """The thresholds are the aggregated ones (for the reason text)."""
    thresholds: tuple[int, ...]
    base: list[int]
    """The usage the incoming estimate is added to."""


class RowRecord(NamedTuple):
    """A row as plain Python values, for the per-node Filter and Score. ``filter[view]`` is a
    :class:`FilterView`.
    (A named tuple: Reserve rewrites one per pod.)"""

    has_info: bool
    update_time: float
    """``status.updateTime``; -inf when absent (always expired)."""
    filter: tuple[FilterView, FilterView]
    score_base: tuple[list[int], list[int]]
    one_base: bool
    """Every view (both filter views, both score bases) is the same list (the defaults)."""


class LoadView:
    """Columnar per-node load, indexed by snapshot position. Rows without a NodeMetric are cleared."""

    def __init__(self, resources: Sequence[str], capacity: int) -> None:
        self.resources = tuple(resources)
        width = len(self.resources)
        self.width = width
        self.capacity = 0
        self.has_metric: BoolArray = np.zeros(0, dtype=np.bool_)
        """A NodeMetric exists for the node."""
        self.has_info: BoolArray = np.zeros(0, dtype=np.bool_)
        """Its ``status.nodeMetric`` is set."""
        self.update_time: FloatArray = np.zeros(0, dtype=np.float64)
        """``status.updateTime``; NaN when absent (always expired)."""
        self.filter_on: BoolArray = np.zeros((2, 0), dtype=np.bool_)
        self.filter_aggregated: BoolArray = np.zeros((2, 0), dtype=np.bool_)
        self.filter_thresholds: IntArray = np.zeros((2, 0, width), dtype=np.int64)
        self.filter_base: IntArray = np.zeros((2, 0, width), dtype=np.int64)
        self.score_base: IntArray = np.zeros((2, 0, width), dtype=np.int64)
        self.records: list[RowRecord | None] = []
        """The same rows as Python values, by position (None without a NodeMetric): a list, not a dict,
        because the per-node Filter and Score read one row per cycle, usually of a node not read for a while."""
        self._pending: set[int] = set()
        """Positions whose record is newer than the arrays (see :meth:`flush`)."""
        self.ensure_capacity(capacity)

    def ensure_capacity(self, capacity: int) -> None:
        if capacity <= self.capacity:
            return
        extra = capacity - self.capacity

        def grow(arr: np.ndarray, axis: int, fill: float | bool | int = 0) -> np.ndarray:
            shape = list(arr.shape)
            shape[axis] = extra
            return np.concatenate([arr, np.full(shape, fill, dtype=arr.dtype)], axis=axis)

        self.has_metric = grow(self.has_metric, 0)
        self.has_info = grow(self.has_info, 0)
        self.update_time = grow(self.update_time, 0, np.nan)
        self.filter_on = grow(self.filter_on, 1)
        self.filter_aggregated = grow(self.filter_aggregated, 1)
        self.filter_thresholds = grow(self.filter_thresholds, 1)
        self.filter_base = grow(self.filter_base, 1)
        self.score_base = grow(self.score_base, 1)
        self.records.extend([None] * extra)
        self.capacity = capacity

    def clear(self, pos: int) -> None:
        self.has_metric[pos] = False
        self.has_info[pos] = False
        self.update_time[pos] = np.nan
        self.filter_on[:, pos] = False
        self.records[pos] = None
        self._pending.discard(pos)

    def write(self, pos: int, load: NodeLoad, profile: ThresholdProfile, score: ScorePaths) -> None:
        """Rewrite row ``pos`` from ``load`` (which must have a metric).

        The record is rewritten now; the arrays at the next :meth:`flush` (a Reserve rewrites one row per
        pod, and numpy's per-call overhead made that most of Reserve's cost, while the per-node Filter
        and Score read only the records)."""
        metric = load.metric
        assert metric is not None
        default = _sum(load.node_usage, load.node_delta)
        # The prod base is read only with prod thresholds or scoreAccordingProdUsage.
        prod = _sum(load.prod_usage, load.prod_delta) if profile.prod_set or score.prod_for_prod_pods else default
        non_prod: FilterView
        if profile.aggregated is not None:
            agg = profile.aggregated
            non_prod = FilterView(
                True,
                True,
                agg.thresholds,
                _aggregated_base(load, self.resources, agg.aggregation_type, agg.duration),
            )
        else:
            non_prod = FilterView(profile.usage_set, False, profile.usage, default)
        prod_view = FilterView(True, False, profile.prod, prod) if profile.prod_set else non_prod
        score_default = (
            _aggregated_base(load, self.resources, score.aggregation_type, score.duration)
            if score.aggregation_type
            else default
        )
        score_prod = prod if score.prod_for_prod_pods else score_default
        base = non_prod.base
        self.records[pos] = RowRecord(
            metric.has_node_metric,
            _NO_TIME if metric.update_time is None else metric.update_time,
            (non_prod, prod_view),
            (score_default, score_prod),
            prod_view.base is base and score_default is base and score_prod is base,
        )
        self._pending.add(pos)

    def add_to_base(self, pos: int, amount: Sequence[int]) -> bool:
        """Add ``amount`` to row ``pos``'s base in place, as :meth:`write` would after the node's
        ``node_delta`` (alone) grew by ``amount``; False (nothing changed) unless every view of the row
        reads that one base (no prod thresholds, no aggregation, no prod scoring: the defaults), and the
        caller then rewrites the row. Reserve's path for a pod not yet in ``podsMetric``."""
        record = self.records[pos] if pos < len(self.records) else None
        if record is None or not record.one_base:
            return False
        base = record.filter[NON_PROD].base
        for i, v in enumerate(amount):
            base[i] += v
        self._pending.add(pos)
        return True

    def flush(self) -> None:
        """Write the rows rewritten since the last flush into the arrays (call before reading them).
        One numpy assignment per array for all pending rows (per-row assignments cost ~1 µs each)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, set()
        records = self.records
        rows = [(pos, record) for pos in pending if (record := records[pos]) is not None]
        if not rows:
            return
        idx = np.fromiter((pos for pos, _ in rows), dtype=np.intp, count=len(rows))
        recs = [record for _, record in rows]
        views = [[record.filter[kind] for record in recs] for kind in (NON_PROD, PROD)]
        self.has_metric[idx] = True
        self.has_info[idx] = [record.has_info for record in recs]
        self.update_time[idx] = [np.nan if r.update_time == _NO_TIME else r.update_time for r in recs]
        self.filter_on[:, idx] = [[view.on for view in by_kind] for by_kind in views]
        self.filter_aggregated[:, idx] = [[view.aggregated for view in by_kind] for by_kind in views]
        self.filter_thresholds[:, idx] = _int64([[view.thresholds for view in by_kind] for by_kind in views])
        self.filter_base[:, idx] = _int64([[view.base for view in by_kind] for by_kind in views])
        bases = [[record.score_base[kind] for record in recs] for kind in (NON_PROD, PROD)]
        self.score_base[:, idx] = _int64(bases)


_INT64_MAX = 2**63 - 1


def _int64(rows: Sequence[Sequence[Sequence[int]]]) -> IntArray:
    """``rows`` as int64; a sum past int64 (usage near the limit plus estimates) saturates instead of
    raising, so one extreme NodeMetric cannot fail every cycle."""
    try:
        return np.array(rows, dtype=np.int64)
    except OverflowError:
        saturated: IntArray = np.clip(np.array(rows, dtype=object), -_INT64_MAX, _INT64_MAX).astype(np.int64)
        return saturated


def _sum(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return list(map(add, a, b))  # a few times faster than a comprehension for short vectors


def _aggregated_base(load: NodeLoad, resources: Sequence[str], aggregation_type: str, duration: float) -> list[int]:
    """``aggUsage[type, duration] + nodeDelta``; when that window is missing: ``nodeUsage + nodeDelta``
    for duration 0, else the sum of full estimates (Koordinator's cold-start downgrade, PR #2239)."""
    metric = load.metric
    assert metric is not None
    usage = metric.aggregated.get((aggregation_type, duration))
    if usage is not None:
        return _sum([usage.get(r, 0) for r in resources], load.node_delta)
    if duration == 0:
        return _sum(load.node_usage, load.node_delta)
    return list(load.node_estimated)
