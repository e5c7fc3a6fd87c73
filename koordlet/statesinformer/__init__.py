"""This node, its pods and its NodeSLO; and the NodeMetric reporter."""

from koordlet.statesinformer.informer import Callback, RegisterType, StatesInformer
from koordlet.statesinformer.nodemetric import NodeMetricReporter, StatusWriter
from koordlet.statesinformer.pods import (
    ContainerMeta,
    NodeInfo,
    PodMeta,
    discover_pods,
    parse_node,
    parse_pod,
)
from koordlet.statesinformer.reporter import UsageSource, UsageWindow, build_node_metric_status

__all__ = [
    "Callback",
    "ContainerMeta",
    "NodeInfo",
    "NodeMetricReporter",
    "PodMeta",
    "RegisterType",
    "StatesInformer",
    "StatusWriter",
    "UsageSource",
    "UsageWindow",
    "build_node_metric_status",
    "discover_pods",
    "parse_node",
    "parse_pod",
]
