"""Value ranges of the ``slo-controller-config`` keys, from Koordinator's validator tags
(``apis/configuration/slo_controller_config.go`` and ``apis/slo/v1alpha1/nodeslo_types.go``), plus the
enumerations the koordlet and the calculation understand.

Koordinator's controller only checks ranges of ``colocation-config`` and leaves the rest to an optional,
off-by-default webhook, so a NodeSLO outside the CRD's bounds is refused by the API server on every
reconcile. Here every key is checked when it is parsed, and a key that fails keeps its last good value.
:func:`check` returns the problems as ``field: message`` strings, the field a dotted JSON path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Range:
    """``lo <= v <= hi`` (``lo < v`` when ``lo_exclusive``); None: unbounded on that side."""

    field: str
    lo: float | None = None
    hi: float | None = None
    lo_exclusive: bool = False


@dataclass(frozen=True, slots=True)
class Below:
    """``lower < upper`` when both are set (Koordinator's ``ltfield`` / ``gtfield`` pairs)."""

    lower: str
    upper: str


@dataclass(frozen=True, slots=True)
class OneOf:
    field: str
    values: tuple[str, ...]


Rule = Range | Below | OneOf

PERCENT = (0, 100)

COLOCATION_RULES: tuple[Rule, ...] = (
    Range("metricAggregateDurationSeconds", 1),
    Range("metricReportIntervalSeconds", 1),
    Range("cpuReclaimThresholdPercent", 0),
    Range("memoryReclaimThresholdPercent", 0),
    Range("degradeTimeMinutes", 1),
    Range("updateTimeThresholdSeconds", 1),
    Range("resourceDiffThreshold", 0, 1, lo_exclusive=True),
    Range("batchCPUThresholdPercent", 0),
    Range("batchMemoryThresholdPercent", 0),
    Range("midCPUThresholdPercent", *PERCENT),
    Range("midMemoryThresholdPercent", *PERCENT),
    Range("midUnallocatedPercent", *PERCENT),
    Range("midStaticCPUReservedPercent", *PERCENT),
    Range("midStaticMemoryReservedPercent", *PERCENT),
    OneOf("cpuCalculatePolicy", ("usage", "request", "maxUsageRequest")),
    OneOf("memoryCalculatePolicy", ("usage", "request", "maxUsageRequest")),
    OneOf("metricMemoryCollectPolicy", ("usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache")),
)

THRESHOLD_RULES: tuple[Rule, ...] = (
    *(
        Range(f, *PERCENT)
        for f in (
            "cpuSuppressThresholdPercent",
            "cpuSuppressMinPercent",
            "memoryEvictThresholdPercent",
            "memoryEvictLowerPercent",
            "cpuEvictBESatisfactionUpperPercent",
            "cpuEvictBESatisfactionLowerPercent",
            "cpuEvictBEUsageThresholdPercent",
            "cpuEvictThresholdPercent",
            "cpuEvictLowerPercent",
        )
    ),
    *(
        Range(f, 0)
        for f in (
            "memoryAllocatableEvictThresholdPercent",
            "memoryAllocatableEvictLowerPercent",
            "cpuAllocatableEvictThresholdPercent",
            "cpuAllocatableEvictLowerPercent",
        )
    ),
    Range("cpuEvictTimeWindowSeconds", 0, lo_exclusive=True),
    Range("allocatableEvictPriorityThreshold", 0, 7999),
    Below("memoryEvictLowerPercent", "memoryEvictThresholdPercent"),
    Below("memoryAllocatableEvictLowerPercent", "memoryAllocatableEvictThresholdPercent"),
    Below("cpuEvictBESatisfactionLowerPercent", "cpuEvictBESatisfactionUpperPercent"),
    Below("cpuEvictLowerPercent", "cpuEvictThresholdPercent"),
    Below("cpuAllocatableEvictLowerPercent", "cpuAllocatableEvictThresholdPercent"),
    OneOf("cpuSuppressPolicy", ("cpuset", "cfsQuota")),
    OneOf("cpuEvictPolicy", ("evictByRealLimit", "evictByAllocatable")),
)

_CLASS_RULES: tuple[Rule, ...] = (
    Range("cpuQOS.groupIdentity", -1, 2),
    Range("cpuQOS.schedIdle", 0, 1),
    *(
        Range(f"memoryQOS.{f}", *PERCENT)
        for f in (
            "minLimitPercent",
            "lowLimitPercent",
            "throttlingPercent",
            "wmarkRatio",
            "pageCacheLimitPercent",
        )
    ),
    Range("memoryQOS.wmarkScalePermill", 1, 1000),
    Range("memoryQOS.wmarkMinAdj", -25, 50),
    Range("memoryQOS.priorityEnable", 0, 1),
    Range("memoryQOS.priority", 0, 12),
    Range("memoryQOS.oomKillGroup", 0, 1),
    Range("resctrlQOS.catRangeStartPercent", *PERCENT),
    Range("resctrlQOS.catRangeEndPercent", *PERCENT),
    Range("resctrlQOS.mbaPercent", *PERCENT),
    Below("resctrlQOS.catRangeStartPercent", "resctrlQOS.catRangeEndPercent"),
)


CPU_BURST_RULES: tuple[Rule, ...] = (
    Range("cpuBurstPercent", 1, 10000),
    Range("cfsQuotaBurstPercent", 100),
    Range("cfsQuotaBurstPeriodSeconds", -1),
    Range("sharePoolThresholdPercent", *PERCENT),
    OneOf("policy", ("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto")),
)

SYSTEM_RULES: tuple[Rule, ...] = (
    Range("minFreeKbytesFactor", 0, lo_exclusive=True),
    Range("watermarkScaleFactor", 0, 400, lo_exclusive=True),
    Range("memcgReapBackGround", 0, 1),
    Range("pageCacheLimitEnabled", 0, 1),
    Range("schedGroupIdentityEnabled", 0, 1),
)


def _rule_under(rule: Rule, prefix: str) -> Rule:
    if isinstance(rule, Range):
        return Range(f"{prefix}.{rule.field}", rule.lo, rule.hi, rule.lo_exclusive)
    if isinstance(rule, Below):
        return Below(f"{prefix}.{rule.lower}", f"{prefix}.{rule.upper}")
    return OneOf(f"{prefix}.{rule.field}", rule.values)


QOS_RULES: tuple[Rule, ...] = tuple(
    _rule_under(rule, cls)
    for cls in ("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot")
    for rule in _CLASS_RULES
)


def _get(obj: Mapping[str, Any], path: str) -> Any:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits: out of any range, as infinity is
        return math.inf if value > 0 else -math.inf


def check(obj: Mapping[str, Any], rules: Sequence[Rule]) -> list[str]:
    """Every rule ``obj`` (wire JSON) breaks, as ``"field: message"``; empty when all hold."""
    problems: list[str] = []
    for rule in rules:
        if isinstance(rule, Range):
            raw = _get(obj, rule.field)
            value = _number(raw)
            if value is None:
                continue
            if isinstance(raw, int) and not -(2**63) <= raw < 2**63:  # Go decodes these fields as int64
                problems.append(f"{rule.field}: {len(str(abs(raw)))} digits do not fit a 64-bit integer")
                continue
            if rule.lo is not None and (value <= rule.lo if rule.lo_exclusive else value < rule.lo):
                bound = "above" if rule.lo_exclusive else "at least"
                problems.append(f"{rule.field}: {_fmt(value)} is out of range (must be {bound} {_fmt(rule.lo)})")
            elif rule.hi is not None and value > rule.hi:
                problems.append(f"{rule.field}: {_fmt(value)} is out of range (must be at most {_fmt(rule.hi)})")
        elif isinstance(rule, Below):
            lower, upper = _number(_get(obj, rule.lower)), _number(_get(obj, rule.upper))
            if lower is not None and upper is not None and not lower < upper:
                problems.append(f"{rule.lower}: {_fmt(lower)} must be below {rule.upper} ({_fmt(upper)})")
        else:
            value = _get(obj, rule.field)
            if value is not None and value not in rule.values:
                problems.append(f"{rule.field}: {value!r} is not one of {', '.join(rule.values)}")
    return problems


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "beyond any number" if value > 0 else "below any number"
    return str(int(value)) if value == int(value) else str(value)
