"""Koordinator's ``slo.koordinator.sh/v1alpha1`` API: NodeMetric and NodeSLO, wire-compatible."""

from apis.slo.common import (
    API_VERSION,
    GROUP,
    VERSION,
    ObjectMeta,
    ResourceMap,
    format_go_duration,
    parse_go_duration,
)
from apis.slo.nodemetric import (
    AggregatedUsage,
    NodeMetric,
    NodeMetricCollectPolicy,
    NodeMetricInfo,
    NodeMetricSpec,
    NodeMetricStatus,
    PodMetricInfo,
    ReclaimableMetric,
    ResolvedCollectPolicy,
    resolve_collect_policy,
)
from apis.slo.nodeslo import NodeSLO, NodeSLOSpec, default_node_slo_spec, merge_node_slo_spec
from apis.slo.quantity import Quantity, format_binary, format_milli, int_value, milli_value, parse_quantity
from apis.slo.validation import NodeSLOError, NodeSLOValidator, SLOProblem, node_slo_spec_problems, parse_node_slo

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "AggregatedUsage",
    "NodeMetric",
    "NodeMetricCollectPolicy",
    "NodeMetricInfo",
    "NodeMetricSpec",
    "NodeMetricStatus",
    "NodeSLO",
    "NodeSLOError",
    "NodeSLOSpec",
    "NodeSLOValidator",
    "ObjectMeta",
    "PodMetricInfo",
    "Quantity",
    "ReclaimableMetric",
    "ResolvedCollectPolicy",
    "ResourceMap",
    "SLOProblem",
    "default_node_slo_spec",
    "format_binary",
    "format_go_duration",
    "format_milli",
    "int_value",
    "merge_node_slo_spec",
    "milli_value",
    "node_slo_spec_problems",
    "parse_go_duration",
    "parse_node_slo",
    "parse_quantity",
    "resolve_collect_policy",
]
