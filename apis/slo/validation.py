"""Validation of a NodeSLO against Koordinator's ranges, for whoever consumes one (the koordlet, ``simulate``).

Koordinator states its ranges in the NodeSLO CRD (``minimum`` / ``maximum`` on the percent fields), so the
API server refuses an update that breaks them and the koordlet keeps the spec it had. A cluster running
pykoord may hold a NodeSLO that never went through that schema (an older CRD, a file), so the consumer
checks the same ranges and does the same: the whole NodeSLO is **rejected** and the previous spec stays in
force. Two more rules come from the koordlet's code: an eviction's lower percent must be below its
threshold (the release would be zero or negative otherwise); an unset lower percent is threshold - 2
(defaulted where it is used, not here). Nothing is clamped, since Koordinator clamps none of these.

:class:`NodeSLOValidator` logs each distinct problem once per node, whatever the number of updates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from apis.slo.nodeslo import NodeSLO, NodeSLOSpec

log = logging.getLogger(__name__)

Range = tuple[int, int | None]
"""(minimum, maximum); None: no maximum."""

_PERCENT: Range = (0, 100)
_NON_NEGATIVE: Range = (0, None)

THRESHOLD_RANGES: dict[str, Range] = {
    "cpuSuppressThresholdPercent": _PERCENT,
    "cpuSuppressMinPercent": _PERCENT,
    "memoryEvictThresholdPercent": _PERCENT,
    "memoryEvictLowerPercent": _PERCENT,
    "cpuEvictThresholdPercent": _PERCENT,
    "cpuEvictLowerPercent": _PERCENT,
    "cpuAllocatableEvictThresholdPercent": _NON_NEGATIVE,
    "cpuAllocatableEvictLowerPercent": _NON_NEGATIVE,
    "memoryAllocatableEvictThresholdPercent": _NON_NEGATIVE,
    "memoryAllocatableEvictLowerPercent": _NON_NEGATIVE,
}
"""``spec.resourceUsedThresholdWithBE``: Koordinator's CRD bounds (v1.8.0)."""

CPU_BURST_RANGES: dict[str, Range] = {"cpuBurstPercent": (0, 10000)}
"""``spec.cpuBurstStrategy``."""

QOS_CLASS_RANGES: dict[str, dict[str, Range]] = {
    "memoryQOS": {
        "minLimitPercent": _NON_NEGATIVE,
        "lowLimitPercent": _NON_NEGATIVE,
        "throttlingPercent": _NON_NEGATIVE,
        "wmarkRatio": _PERCENT,
        "wmarkScalePermill": (1, 1000),
        "wmarkMinAdj": (-25, 50),
        "pageCacheLimitPercent": _PERCENT,
    },
    "resctrlQOS": {"catRangeStartPercent": _PERCENT, "catRangeEndPercent": _PERCENT, "mbaPercent": _PERCENT},
}
"""``spec.resourceQOSStrategy.<class>.<section>`` for every class."""

IO_CFG_RANGES: dict[str, Range] = {
    "readIOPS": _NON_NEGATIVE,
    "writeIOPS": _NON_NEGATIVE,
    "readBPS": _NON_NEGATIVE,
    "writeBPS": _NON_NEGATIVE,
    "ioWeightPercent": (1, 100),
    "readLatencyPercent": _PERCENT,
    "writeLatencyPercent": _PERCENT,
    "modelReadBPS": (1, None),
    "modelWriteBPS": (1, None),
    "modelReadSeqIOPS": (1, None),
    "modelWriteSeqIOPS": (1, None),
    "modelReadRandIOPS": (1, None),
    "modelWriteRandIOPS": (1, None),
}
"""``spec.resourceQOSStrategy.<class>.blkioQOS.blocks[].ioCfg``."""

QOS_CLASSES = ("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot")
LOWER_BELOW_THRESHOLD = (
    ("memoryEvictLowerPercent", "memoryEvictThresholdPercent"),
    ("cpuEvictLowerPercent", "cpuEvictThresholdPercent"),
    ("cpuAllocatableEvictLowerPercent", "cpuAllocatableEvictThresholdPercent"),
    ("memoryAllocatableEvictLowerPercent", "memoryAllocatableEvictThresholdPercent"),
)


@dataclass(frozen=True, slots=True)
class SLOProblem:
    field: str
    """JSON path from the object root, e.g. ``spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent``."""
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class NodeSLOError(ValueError):
    """A NodeSLO that must not be used; ``problems`` name every field at fault."""

    def __init__(self, name: str, problems: list[SLOProblem]) -> None:
        self.name = name
        self.problems = problems
        super().__init__(f"NodeSLO {name}: " + "; ".join(str(p) for p in problems))


def node_slo_spec_problems(spec: NodeSLOSpec) -> list[SLOProblem]:
    """Every range and ordering rule the spec breaks (empty: usable)."""
    wire = spec.to_wire()
    problems: list[SLOProblem] = []
    thresholds = _section(wire, "resourceUsedThresholdWithBE")
    _check(problems, thresholds, THRESHOLD_RANGES, "spec.resourceUsedThresholdWithBE")
    for lower, threshold in LOWER_BELOW_THRESHOLD:
        low, high = thresholds.get(lower), thresholds.get(threshold)
        if isinstance(low, int) and isinstance(high, int) and low >= high:
            problems.append(
                SLOProblem(f"spec.resourceUsedThresholdWithBE.{lower}", f"{low} must be below {threshold} ({high})")
            )
    _check(problems, _section(wire, "cpuBurstStrategy"), CPU_BURST_RANGES, "spec.cpuBurstStrategy")
    qos = _section(wire, "resourceQOSStrategy")
    for cls in QOS_CLASSES:
        class_cfg = _section(qos, cls)
        for section, ranges in QOS_CLASS_RANGES.items():
            _check(problems, _section(class_cfg, section), ranges, f"spec.resourceQOSStrategy.{cls}.{section}")
        blocks = _section(class_cfg, "blkioQOS").get("blocks") or []
        for i, block in enumerate(blocks):
            path = f"spec.resourceQOSStrategy.{cls}.blkioQOS.blocks[{i}].ioCfg"
            _check(problems, _section(block, "ioCfg"), IO_CFG_RANGES, path)
    return problems


def parse_node_slo(raw: Mapping[str, Any]) -> NodeSLO:
    """A NodeSLO from its raw JSON; raises :class:`NodeSLOError` naming every field at fault (a wrong
    type or a value outside Koordinator's ranges)."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    name = str(meta.get("name") or "<unnamed>") if isinstance(meta, Mapping) else "<unnamed>"
    try:
        slo = NodeSLO.model_validate(dict(raw) if isinstance(raw, Mapping) else raw)
    except ValidationError as err:
        problems = [
            SLOProblem(".".join(str(p) for p in e["loc"]) or "<root>", str(e["msg"]))
            for e in err.errors(include_url=False)
        ]
        raise NodeSLOError(name, problems) from None
    problems = node_slo_spec_problems(slo.spec) if slo.spec is not None else []
    if problems:
        raise NodeSLOError(name, problems)
    return slo


class NodeSLOValidator:
    """Accepts NodeSLO updates for a consumer and keeps the last good one per node.

    :meth:`accept` returns the NodeSLO to use: the new one when valid, else the previous good one (None
    before any), logging each distinct rejection once (a NodeSLO re-delivered every resync does not
    repeat its warning)."""

    def __init__(self) -> None:
        self._good: dict[str, NodeSLO] = {}
        self._logged: dict[str, str] = {}
        self.rejections = 0
        """NodeSLO versions refused so far."""

    def accept(self, raw: Mapping[str, Any]) -> NodeSLO | None:
        try:
            slo = parse_node_slo(raw)
        except NodeSLOError as err:
            self.rejections += 1
            if self._logged.get(err.name) != str(err):
                self._logged[err.name] = str(err)
                log.warning("%s; keeping the previous spec", err)
            return self._good.get(err.name)
        name = slo.metadata.name or "<unnamed>"
        self._good[name] = slo
        self._logged.pop(name, None)
        return slo

    def forget(self, name: str) -> None:
        """The NodeSLO was deleted."""
        self._good.pop(name, None)
        self._logged.pop(name, None)


def _section(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, Mapping) else {}


def _check(problems: list[SLOProblem], values: Mapping[str, Any], ranges: Mapping[str, Range], path: str) -> None:
    for key, (low, high) in ranges.items():
        value = values.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            continue
        if value < low or (high is not None and value > high):
            bounds = f"[{low}, {high}]" if high is not None else f"at least {low}"
            problems.append(SLOProblem(f"{path}.{key}", f"{value} is out of range: must be {bounds}"))
