"""``simulate``'s mid tier: the ``kubernetes.io/mid-{cpu,memory}`` the noderesource controller would give
each node of a cluster file, so koord-mid pods can be simulated without running the controller.

A node gets mid resources when the file has its NodeMetric with a ``prodReclaimableMetric`` and the node's
status does not already list ``mid-cpu``: Koordinator's MidResource formula
(:mod:`koord_scheduler.scheduler.controllers.midresource`) with colocation on and its default thresholds,
over the file's pods on that node. The NodeMetric's age is not checked (a file is a snapshot).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apis.configuration import ColocationStrategy
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, Pod
from apis.extension.constants import RESOURCE_MID_CPU, RESOURCE_MID_MEMORY
from apis.slo.nodemetric_record import parse_node_metric
from koord_scheduler.scheduler.controllers.midresource import mid_allocatable, mid_inputs

NODE_METRIC = "NodeMetric"


def with_mid_resources(
    nodes: Sequence[Node], pods: Iterable[Pod], node_metrics: Iterable[tuple[str, Mapping[str, Any]]]
) -> list[Node]:
    """``nodes`` with the mid resources their NodeMetrics allow (see the module docstring). The metrics are
    raw objects the file loader already validated."""
    metrics = {name: parse_node_metric(raw) for name, raw in node_metrics}
    by_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.node_name:
            by_node.setdefault(pod.node_name, []).append(pod)
    strategy = ColocationStrategy(enable=True)
    out: list[Node] = []
    for node in nodes:
        metric = metrics.get(node.name)
        if metric is None or not metric.prod_reclaimable or RESOURCE_MID_CPU in node.allocatable:
            out.append(node)
            continue
        mid = mid_allocatable(mid_inputs(node, by_node.get(node.name, []), metric), strategy)
        amounts = {RESOURCE_MID_CPU: mid.cpu, RESOURCE_MID_MEMORY: mid.memory}
        out.append(
            dataclasses.replace(
                node,
                allocatable=FrozenDict({**node.allocatable, **amounts}),
                capacity=FrozenDict({**node.capacity, **amounts}),
            )
        )
    return out
