"""What each colocation controller wants done for one node: pure decisions over the informers' objects.

Each ``decide_*`` takes the node (None: deleted), the objects the informers hold for it and the current
``slo-controller-config``, and returns the one :class:`Write` that brings the cluster in line, or None.
:mod:`.runner` executes them. Upstream: Koordinator ``pkg/slo-controller/{nodeslo,noderesource,nodemetric}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apis.configuration import ColocationStrategy, SloConfig, render_node_slo_spec, resolve_colocation
from apis.core.jsonfields import invalid
from apis.core.paths import api_path
from apis.core.types import Node, Pod
from apis.slo.common import API_VERSION, GROUP, VERSION, format_go_duration, parse_go_duration
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.scheduler.controllers.batch import (
    BATCH_RESOURCES,
    batch_allocatable,
    batch_inputs,
    current_batch,
    is_degraded,
    needs_sync,
    status_consistent,
)
from koord_scheduler.scheduler.controllers.selection import NODEMETRIC, NODERESOURCE, NODESLO

Json = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
NODESLOS = api_path(GROUP, VERSION, "nodeslos")
NODEMETRICS = api_path(GROUP, VERSION, "nodemetrics")


def node_slo_path(name: str) -> str:
    return api_path(GROUP, VERSION, "nodeslos", name=name)


def node_metric_path(name: str) -> str:
    return api_path(GROUP, VERSION, "nodemetrics", name=name)


@dataclass(frozen=True, slots=True)
class Write:
    """One API call: ``verb`` is POST (create), PATCH or DELETE."""

    controller: str
    node: str
    verb: str
    path: str
    body: Any = None
    content_type: str = "application/json"
    note: str = ""
    """Why (the batch calculation for noderesource writes), for logs."""


@dataclass(frozen=True, slots=True)
class NodeSLORecord:
    """A NodeSLO as the nodeslo controller compares it: its name and canonical spec JSON."""

    name: str
    spec: str


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def parse_node_slo(obj: Mapping[str, Any]) -> NodeSLORecord:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise invalid("metadata.name", "required").for_object("NodeSLO", "")
    spec = obj.get("spec")
    return NodeSLORecord(name, canonical(spec if isinstance(spec, Mapping) else {}))


# ----- nodeslo -----


def decide_node_slo(node: Node | None, name: str, existing: NodeSLORecord | None, config: SloConfig) -> Write | None:
    """Create the node's NodeSLO, bring its spec to the rendered one, or delete it with its node.

    Without the ConfigMap an existing NodeSLO is left as it is (someone may have written it by hand);
    a missing one is still created with Koordinator's defaults."""
    if node is None:
        return Write(NODESLO, name, "DELETE", node_slo_path(name)) if existing is not None else None
    spec = render_node_slo_spec(config, node.labels, node.annotations)
    if existing is None:
        body = {"apiVersion": API_VERSION, "kind": "NodeSLO", "metadata": {"name": name}, "spec": spec}
        return Write(NODESLO, name, "POST", NODESLOS, body)
    if not config.present or existing.spec == canonical(spec):
        return None
    return Write(NODESLO, name, "PATCH", node_slo_path(name), [{"op": "replace", "path": "/spec", "value": spec}],
                 JSON_PATCH)


# ----- nodemetric -----


def collect_policy(strategy: ColocationStrategy) -> Json:
    """``spec.metricCollectPolicy`` for a node: from its colocation strategy, or Koordinator's defaults
    when colocation is off for the node (as the nodemetric controller does)."""
    if not strategy.enable:
        strategy = ColocationStrategy()
    durations = []
    for text in strategy.metric_aggregate_durations:
        try:
            durations.append(format_go_duration(int(parse_go_duration(text))))
        except ValueError:
            durations.append(text)
    return {
        "aggregateDurationSeconds": strategy.metric_aggregate_duration_seconds,
        "reportIntervalSeconds": strategy.metric_report_interval_seconds,
        "nodeAggregatePolicy": {"durations": durations},
        "nodeMemoryCollectPolicy": strategy.metric_memory_collect_policy,
    }


def decide_node_metric(
    node: Node | None, name: str, existing: NodeMetricRecord | None, config: SloConfig
) -> Write | None:
    if node is None:
        return Write(NODEMETRIC, name, "DELETE", node_metric_path(name)) if existing is not None else None
    policy = collect_policy(resolve_colocation(config, node.labels, node.annotations))
    if existing is None:
        body = {"apiVersion": API_VERSION, "kind": "NodeMetric", "metadata": {"name": name},
                "spec": {"metricCollectPolicy": policy}}
        return Write(NODEMETRIC, name, "POST", NODEMETRICS, body)
    if existing.collect_policy == canonical(policy):
        return None
    return Write(NODEMETRIC, name, "PATCH", node_metric_path(name), {"spec": {"metricCollectPolicy": policy}},
                 MERGE_PATCH)


# ----- noderesource -----


@dataclass(frozen=True, slots=True)
class BatchDecision:
    write: Write | None
    recheck_at: float | None
    """When to look again even without events (the moment the NodeMetric turns stale)."""


def decide_batch_resources(
    node: Node,
    pods: Iterable[Pod],
    metric: NodeMetricRecord | None,
    config: SloConfig,
    *,
    now: float,
    last_sync: float | None,
    interval_spread: float = 0.0,
) -> BatchDecision:
    """Batch resources for ``node``: computed, or withdrawn (keys removed) when colocation is off for
    the node or its NodeMetric is stale. Written when Koordinator's gate says so (presence changed, a
    change above ``resourceDiffThreshold``, or any change once ``updateTimeThresholdSeconds`` passed
    since the last write) or when kubelet left capacity and allocatable disagreeing. A write that would
    change nothing is never sent. ``interval_spread`` (0 to 1) stretches this node's
    ``updateTimeThresholdSeconds`` by that fraction, so nodes first written together do not all come
    due in the same second ever after."""
    strategy = resolve_colocation(config, node.labels, node.annotations)
    recheck_at = None
    note = ""
    want: tuple[int | None, int | None]
    if not strategy.enable:
        want, note = (None, None), "colocation disabled"
    elif metric is None or is_degraded(metric, now, strategy.degrade_time_minutes):
        want, note = (None, None), "NodeMetric missing or stale (degraded)"
    else:
        result = batch_allocatable(batch_inputs(node, pods, metric), strategy)
        want, note = (result.cpu, result.memory), result.explanation
        assert metric.update_time is not None
        recheck_at = metric.update_time + strategy.degrade_time_minutes * 60 + 1
    current = current_batch(node)
    consistent = status_consistent(node)
    if current == want and consistent:
        return BatchDecision(None, recheck_at)
    interval = strategy.update_time_threshold_seconds * (1 + interval_spread)
    due = last_sync is None or now - last_sync > interval
    if not (due or not consistent or needs_sync(current, want, diff_threshold=strategy.resource_diff_threshold)):
        return BatchDecision(None, recheck_at)
    values = {name: None if amount is None else str(amount) for name, amount in zip(BATCH_RESOURCES, want, strict=True)}
    body = {"status": {"capacity": values, "allocatable": values}}
    path = api_path("", "v1", "nodes", name=node.name, subresource="status")
    write = Write(NODERESOURCE, node.name, "PATCH", path, body, MERGE_PATCH, note)
    return BatchDecision(write, recheck_at)
