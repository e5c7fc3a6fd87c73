"""The NodeMetric kind LoadAwareScheduling watches; the lean record lives in :mod:`apis.slo.nodemetric_record`
so the colocation controllers read the same parsed objects from the same watch."""

from __future__ import annotations

from apis.slo.common import GROUP, VERSION
from apis.slo.nodemetric_record import (
    DEFAULT_REPORT_INTERVAL_SECONDS,
    HostAppUsage,
    NodeMetricRecord,
    PodUsage,
    Usage,
    parse_node_metric,
)
from koord_scheduler.framework.types import ObjectKind

NODE_METRIC_KIND = ObjectKind(
    kind="NodeMetric",
    group=GROUP,
    version=VERSION,
    plural="nodemetrics",
    namespaced=False,
    parse=parse_node_metric,
)
"""Equal to every other ObjectKind built the same way, so the scheduler keeps one NodeMetric watch."""

__all__ = [
    "DEFAULT_REPORT_INTERVAL_SECONDS",
    "NODE_METRIC_KIND",
    "HostAppUsage",
    "NodeMetricRecord",
    "PodUsage",
    "Usage",
    "parse_node_metric",
]
