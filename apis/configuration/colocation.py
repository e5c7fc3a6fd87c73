"""``colocation-config``: Koordinator's ``ColocationStrategy`` and how one node's strategy is resolved.

The wire model (:class:`ColocationStrategyWire`) takes the JSON as written, every field optional; the
resolved :class:`ColocationStrategy` is what the batch resource calculation and the NodeMetric collect
policy read, with Koordinator's defaults (``sloconfig.DefaultColocationStrategy``) filled in.

Resolution for one node (``GetNodeColocationStrategy``), lowest precedence first: the defaults, the
ConfigMap's top-level fields, the first ``nodeConfigs`` entry whose selector matches the node, the node
annotation ``node.koordinator.sh/colocation-strategy`` (a whole strategy as JSON; a bad one is ignored,
as Koordinator ignores it), and the node labels ``node.koordinator.sh/{cpu,memory}-reclaim-ratio`` and
``node.koordinator.sh/mid-static-{cpu,memory}-reserved-ratio`` (a float ratio that replaces the percent
as ``int(ratio * 100)``, so 0.57 gives 56, as Go truncates).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError

from apis.core import boundedjson
from apis.slo.common import WireModel
from apis.slo.nodemetric import AggregatePolicy

ANNOTATION_COLOCATION_STRATEGY = "node.koordinator.sh/colocation-strategy"
LABEL_CPU_RECLAIM_RATIO = "node.koordinator.sh/cpu-reclaim-ratio"
LABEL_MEMORY_RECLAIM_RATIO = "node.koordinator.sh/memory-reclaim-ratio"
LABEL_MID_STATIC_CPU_RESERVED_RATIO = "node.koordinator.sh/mid-static-cpu-reserved-ratio"
LABEL_MID_STATIC_MEMORY_RESERVED_RATIO = "node.koordinator.sh/mid-static-memory-reserved-ratio"
MID_RECLAIM_MODE_STATIC = "static"

CALCULATE_POLICIES = ("usage", "request", "maxUsageRequest")
MEMORY_COLLECT_POLICIES = ("usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache")


class ColocationStrategyWire(WireModel):
    """``configuration.ColocationStrategy`` as JSON (camelCase keys, every field optional)."""

    enable: bool | None = None
    metric_aggregate_duration_seconds: int | None = None
    metric_report_interval_seconds: int | None = None
    metric_aggregate_policy: AggregatePolicy | None = None
    metric_memory_collect_policy: str | None = None
    cpu_reclaim_threshold_percent: int | None = None
    cpu_calculate_policy: str | None = None
    memory_reclaim_threshold_percent: int | None = None
    memory_calculate_policy: str | None = None
    degrade_time_minutes: int | None = None
    update_time_threshold_seconds: int | None = None
    resource_diff_threshold: float | None = None
    batch_cpu_threshold_percent: int | None = Field(default=None, alias="batchCPUThresholdPercent")
    batch_memory_threshold_percent: int | None = Field(default=None, alias="batchMemoryThresholdPercent")
    mid_reclaim_mode: str | None = None
    mid_cpu_threshold_percent: int | None = Field(default=None, alias="midCPUThresholdPercent")
    mid_memory_threshold_percent: int | None = None
    mid_unallocated_percent: int | None = None
    mid_static_cpu_reserved_percent: int | None = Field(default=None, alias="midStaticCPUReservedPercent")
    mid_static_memory_reserved_percent: int | None = None
    extensions: dict[str, Any] | None = None


DEFAULT_COLOCATION_WIRE: dict[str, Any] = {
    "enable": False,
    "metricAggregateDurationSeconds": 300,
    "metricReportIntervalSeconds": 60,
    "metricAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
    "metricMemoryCollectPolicy": "usageWithoutPageCache",
    "cpuReclaimThresholdPercent": 60,
    "cpuCalculatePolicy": "usage",
    "memoryReclaimThresholdPercent": 65,
    "memoryCalculatePolicy": "usage",
    "degradeTimeMinutes": 15,
    "updateTimeThresholdSeconds": 300,
    "resourceDiffThreshold": 0.1,
    "midCPUThresholdPercent": 100,
    "midMemoryThresholdPercent": 100,
    "midUnallocatedPercent": 0,
    "midStaticCPUReservedPercent": 0,
    "midStaticMemoryReservedPercent": 0,
}
"""``sloconfig.DefaultColocationStrategy()`` as JSON: 60 % / 65 % reclaim, 15 min degrade, 300 s / 10 %
update gating, colocation off (the chart's ConfigMap switches it on)."""


@dataclass(frozen=True, slots=True)
class ColocationStrategy:
    """One node's resolved colocation strategy (every field set). Percentages are integer percent."""

    enable: bool = False
    metric_aggregate_duration_seconds: int = 300
    metric_report_interval_seconds: int = 60
    metric_aggregate_durations: tuple[str, ...] = ("5m0s", "10m0s", "30m0s")
    metric_memory_collect_policy: str = "usageWithoutPageCache"
    cpu_reclaim_threshold_percent: int = 60
    cpu_calculate_policy: str = "usage"
    memory_reclaim_threshold_percent: int = 65
    memory_calculate_policy: str = "usage"
    degrade_time_minutes: int = 15
    update_time_threshold_seconds: int = 300
    resource_diff_threshold: float = 0.1
    batch_cpu_threshold_percent: int | None = None
    """Cap on batch-cpu as a percent of capacity; None: no cap."""
    batch_memory_threshold_percent: int | None = None
    mid_reclaim_mode: str = ""
    """``static``: mid = capacity * ``midStatic*ReservedPercent``; anything else: from the koordlet's
    ``prodReclaimableMetric`` (see ``koord_scheduler``'s ``midresource`` controller module)."""
    mid_cpu_threshold_percent: int = 100
    """Cap on mid-cpu as a percent of capacity."""
    mid_memory_threshold_percent: int = 100
    mid_unallocated_percent: int = 0
    """Share of the capacity that prod pods do not request that is added to mid."""
    mid_static_cpu_reserved_percent: int = 0
    mid_static_memory_reserved_percent: int = 0


def default_colocation_strategy() -> ColocationStrategy:
    return ColocationStrategy()


def colocation_from_wire(wire: Mapping[str, Any]) -> ColocationStrategy:
    """A resolved strategy from merged JSON (defaults already overlaid)."""
    durations = (wire.get("metricAggregatePolicy") or {}).get("durations") or ["5m0s", "10m0s", "30m0s"]
    defaults = ColocationStrategy()
    return ColocationStrategy(
        enable=bool(wire.get("enable", defaults.enable)),
        metric_aggregate_duration_seconds=int(wire.get("metricAggregateDurationSeconds", 300)),
        metric_report_interval_seconds=int(wire.get("metricReportIntervalSeconds", 60)),
        metric_aggregate_durations=tuple(str(d) for d in durations),
        metric_memory_collect_policy=str(wire.get("metricMemoryCollectPolicy", defaults.metric_memory_collect_policy)),
        cpu_reclaim_threshold_percent=int(wire.get("cpuReclaimThresholdPercent", 60)),
        cpu_calculate_policy=str(wire.get("cpuCalculatePolicy", "usage")),
        memory_reclaim_threshold_percent=int(wire.get("memoryReclaimThresholdPercent", 65)),
        memory_calculate_policy=str(wire.get("memoryCalculatePolicy", "usage")),
        degrade_time_minutes=int(wire.get("degradeTimeMinutes", 15)),
        update_time_threshold_seconds=int(wire.get("updateTimeThresholdSeconds", 300)),
        resource_diff_threshold=float(wire.get("resourceDiffThreshold", 0.1)),
        batch_cpu_threshold_percent=_optional_int(wire.get("batchCPUThresholdPercent")),
        batch_memory_threshold_percent=_optional_int(wire.get("batchMemoryThresholdPercent")),
        mid_reclaim_mode=str(wire.get("midReclaimMode") or ""),
        mid_cpu_threshold_percent=int(wire.get("midCPUThresholdPercent", 100)),
        mid_memory_threshold_percent=int(wire.get("midMemoryThresholdPercent", 100)),
        mid_unallocated_percent=int(wire.get("midUnallocatedPercent", 0)),
        mid_static_cpu_reserved_percent=int(wire.get("midStaticCPUReservedPercent", 0)),
        mid_static_memory_reserved_percent=int(wire.get("midStaticMemoryReservedPercent", 0)),
    )


def _optional_int(raw: Any) -> int | None:
    return None if raw is None else int(raw)


def strategy_wire(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The known strategy fields of ``raw`` (unknown ones dropped, as Go's decoder drops them).
    Raises ``ValueError`` naming the field when a value has the wrong type."""
    try:
        return ColocationStrategyWire.model_validate(dict(raw)).to_wire()
    except ValidationError as exc:
        raise ValueError(_first_error(exc)) from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err.get("loc", ()))
    return f"{field}: {err.get('msg', 'invalid value')}"


def node_overrides(
    merged: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> dict[str, Any]:
    """Apply the node annotation strategy and the reclaim-ratio labels on top of ``merged`` (JSON)."""
    out = dict(merged)
    text = annotations.get(ANNOTATION_COLOCATION_STRATEGY)
    if text:
        try:
            raw = boundedjson.loads(text)
            if isinstance(raw, dict):
                out = overlay(out, strategy_wire(raw))
        except ValueError:
            pass  # Koordinator logs and ignores a malformed annotation
    for label, field in (
        (LABEL_CPU_RECLAIM_RATIO, "cpuReclaimThresholdPercent"),
        (LABEL_MEMORY_RECLAIM_RATIO, "memoryReclaimThresholdPercent"),
        (LABEL_MID_STATIC_CPU_RESERVED_RATIO, "midStaticCPUReservedPercent"),
        (LABEL_MID_STATIC_MEMORY_RESERVED_RATIO, "midStaticMemoryReservedPercent"),
    ):
        percent = reclaim_percent_from_ratio(labels.get(label))
        if percent is not None:
            out[field] = percent
    return out


def reclaim_percent_from_ratio(text: str | None) -> int | None:
    """``int64(ratio * 100)`` for a non-negative float label value; None for absent or unparsable."""
    if text is None:
        return None
    try:
        ratio = float(text)
    except ValueError:
        return None
    if ratio < 0 or not math.isfinite(ratio):
        return None
    return int(ratio * 100)


def overlay(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Koordinator's ``MergeCfg``: ``patch`` JSON-unmarshalled onto ``base``. Objects merge key by key,
    recursively; arrays and scalars replace; absent (or null) fields of ``patch`` change nothing."""
    merged = dict(base)
    for key, value in patch.items():
        if value is None:
            continue
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = overlay(current, value)
        else:
            merged[key] = value
    return merged
