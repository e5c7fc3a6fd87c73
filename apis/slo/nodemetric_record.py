"""NodeMetric as koord-scheduler reads it: a lean record parsed straight from raw JSON.

The pydantic models in :mod:`apis.slo.nodemetric` are the wire contract (the koordlet writes through them).
The scheduler reads thousands of NodeMetric updates a minute in a large cluster, so it parses only what
LoadAwareScheduling and the colocation controllers read into plain values, with the same quantity rules as
the scheduler's pods (cpu in millicores via ``MilliValue``, everything else via ``Value``). One watch and
one parsed record serve both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.core.errors import ParseError
from apis.core.frozendict import EMPTY, FrozenDict
from apis.core.jsonfields import as_list, as_map, check_item, get_map, get_str, invalid
from apis.core.parse import parse_resource_list, parse_timestamp
from apis.extension import PriorityClass
from apis.slo.common import parse_go_duration

INT64_MAX = 2**63 - 1

DEFAULT_REPORT_INTERVAL_SECONDS = 60.0
"""Koordinator's ``DefaultNodeMetricReportInterval``: the report window when the spec sets none."""

Usage = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class PodUsage:
    usage: Usage
    prod: bool
    """Reported with priority ``koord-prod``."""
    priority: str = field(default="", compare=False)
    """The reported ``priority`` (``koord-prod``, ``koord-batch``...; may be empty)."""
    qos: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class HostAppUsage:
    """One ``status.hostApplicationMetric`` entry."""

    name: str
    usage: Usage
    priority: str = ""


@dataclass(frozen=True, slots=True)
class NodeMetricRecord:
    """One NodeMetric. ``has_node_metric`` is whether ``status.nodeMetric`` is set at all."""

    name: str
    update_time: float | None = None
    """``status.updateTime`` in seconds since the epoch; ``None`` counts as expired."""
    report_interval: float = DEFAULT_REPORT_INTERVAL_SECONDS
    has_node_metric: bool = False
    node_usage: Usage = field(default_factory=FrozenDict)
    system_usage: Usage = field(default_factory=FrozenDict)
    aggregated: Mapping[tuple[str, float], Usage] = field(default_factory=FrozenDict)
    """(aggregation type, duration seconds) → usage, non-empty entries only; duration 0 is the longest
    duration reported for that type (Koordinator's default when no duration is configured)."""
    pods: Mapping[str, PodUsage] = field(default_factory=FrozenDict)
    """``namespace/name`` → reported usage, for pods with a non-empty usage."""
    host_apps: tuple[HostAppUsage, ...] = ()
    prod_reclaimable: Usage = field(default_factory=FrozenDict)
    """``status.prodReclaimableMetric.resource`` (the koordlet's peak predictor); empty when not reported."""
    collect_policy: str = field(default="", compare=False)
    """``spec.metricCollectPolicy`` as canonical JSON (sorted keys); empty when the spec has none."""


def parse_node_metric(obj: Mapping[str, Any]) -> NodeMetricRecord:
    """Raw NodeMetric JSON → :class:`NodeMetricRecord`. Raises :class:`ParseError` naming the field."""
    name = get_str(get_map(obj, "metadata"), "name") if isinstance(obj.get("metadata"), Mapping) else ""
    try:
        if not name:
            raise invalid("metadata.name", "required")
        return _record(obj, name)
    except ParseError as err:
        raise err.for_object("NodeMetric", name) from None


def _record(obj: Mapping[str, Any], name: str) -> NodeMetricRecord:
    spec = get_map(obj, "spec")
    policy = _under(lambda: get_map(spec, "metricCollectPolicy"), "spec")
    interval = policy.get("reportIntervalSeconds")
    if interval is not None and (type(interval) is not int or not 0 <= interval <= INT64_MAX):
        raise invalid("spec.metricCollectPolicy.reportIntervalSeconds", "expected a non-negative 64-bit integer")
    status = get_map(obj, "status")
    update_time = _under(lambda: parse_timestamp(status.get("updateTime")), "status.updateTime")
    info_raw = status.get("nodeMetric")
    info = _under(lambda: as_map(info_raw, ""), "status.nodeMetric")
    return NodeMetricRecord(
        name=name,
        update_time=update_time,
        report_interval=float(interval) if interval else DEFAULT_REPORT_INTERVAL_SECONDS,
        has_node_metric=info_raw is not None,
        node_usage=_resources(info, "nodeUsage", "status.nodeMetric.nodeUsage"),
        system_usage=_resources(info, "systemUsage", "status.nodeMetric.systemUsage"),
        aggregated=_aggregated(info),
        pods=_pods(status),
        host_apps=_host_apps(status),
        prod_reclaimable=_reclaimable(status),
        collect_policy=json.dumps(policy, sort_keys=True, separators=(",", ":")) if policy else "",
    )


def _reclaimable(status: Mapping[str, Any]) -> Usage:
    raw = status.get("prodReclaimableMetric")
    if raw is None:
        return EMPTY
    metric = _under(lambda: as_map(raw, ""), "status.prodReclaimableMetric")
    return _resources(metric, "resource", "status.prodReclaimableMetric.resource")


def _under(read: Any, path: str) -> Any:
    try:
        return read()
    except ParseError as err:
        raise err.under(path) from None


def _resources(container: Mapping[str, Any], key: str, path: str) -> Usage:
    """``container[key].resources`` (a ResourceMap) as scheduler amounts."""
    raw = container.get(key)
    if raw is None:
        return EMPTY
    resource_map = _under(lambda: as_map(raw, ""), path)
    resources: Usage = _under(lambda: parse_resource_list(resource_map.get("resources")), f"{path}.resources")
    return resources


def _aggregated(info: Mapping[str, Any]) -> Mapping[tuple[str, float], Usage]:
    path = "status.nodeMetric.aggregatedNodeUsages"
    items = _under(lambda: as_list(info.get("aggregatedNodeUsages"), ""), path)
    if not items:
        return EMPTY
    out: dict[tuple[str, float], Usage] = {}
    longest: dict[str, float] = {}
    for i, raw in enumerate(items):
        item_path = f"{path}[{i}]"
        item = _under(lambda raw=raw, i=i: check_item(raw, "", i), path)
        duration_text = item.get("duration")
        if type(duration_text) is not str:
            raise invalid(f"{item_path}.duration", "expected a duration string")
        try:
            duration = parse_go_duration(duration_text)
        except ValueError as exc:
            raise invalid(f"{item_path}.duration", str(exc)) from None
        usage = _under(lambda item=item: as_map(item.get("usage"), ""), f"{item_path}.usage")
        for agg_type in usage:
            resources = _resources(usage, agg_type, f"{item_path}.usage.{agg_type}")
            if not resources:
                continue
            out[(str(agg_type), duration)] = resources
            if duration > longest.get(agg_type, 0.0):
                longest[agg_type] = duration
    for agg_type, duration in longest.items():
        out[(agg_type, 0.0)] = out[(agg_type, duration)]
    return FrozenDict(out)


def _pods(status: Mapping[str, Any]) -> Mapping[str, PodUsage]:
    items = _under(lambda: as_list(status.get("podsMetric"), ""), "status.podsMetric")
    if not items:
        return EMPTY
    out: dict[str, PodUsage] = {}
    for i, raw in enumerate(items):
        if raw is None:
            continue
        path = f"status.podsMetric[{i}]"
        item = _under(lambda raw=raw, i=i: check_item(raw, "", i), "status.podsMetric")
        usage = _resources(item, "podUsage", f"{path}.podUsage")
        if not usage:
            continue
        key = f"{get_str(item, 'namespace')}/{get_str(item, 'name')}"
        priority = item.get("priority")
        priority = priority if isinstance(priority, str) else ""
        qos = item.get("qos")
        out[key] = PodUsage(usage, priority == PriorityClass.PROD.value, priority, qos if isinstance(qos, str) else "")
    return FrozenDict(out)


def _host_apps(status: Mapping[str, Any]) -> tuple[HostAppUsage, ...]:
    items = _under(lambda: as_list(status.get("hostApplicationMetric"), ""), "status.hostApplicationMetric")
    out: list[HostAppUsage] = []
    for i, raw in enumerate(items or ()):
        if raw is None:
            continue
        item = _under(lambda raw=raw, i=i: check_item(raw, "", i), "status.hostApplicationMetric")
        usage = _resources(item, "usage", f"status.hostApplicationMetric[{i}].usage")
        priority = item.get("priority")
        out.append(HostAppUsage(get_str(item, "name"), usage, priority if isinstance(priority, str) else ""))
    return tuple(out)
