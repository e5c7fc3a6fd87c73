"""What each colocation controller wants done for one node: pure decisions over the informers' objects.

Each ``decide_*`` takes the node (None: deleted), the objects the informers hold for it and the current
``slo-controller-config``, and returns the one :class:`Write` that brings the cluster in line, or None.
:mod:`.runner` executes them; the ``noderesource`` decision is in :mod:`.noderesource`. Upstream:
Koordinator ``pkg/slo-controller/{nodeslo,noderesource,nodemetric}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apis.configuration import ColocationStrategy, SloConfig, render_node_slo_spec, resolve_colocation
from apis.core.jsonfields import invalid
from apis.core.paths import api_path
from apis.core.types import Node
from apis.slo.common import API_VERSION, GROUP, VERSION, format_go_duration, parse_go_duration
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.scheduler.controllers.selection import NODEMETRIC, NODESLO

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
    extensions: Any = None
    """``spec.extensions`` as written (None: absent), passed through as Koordinator passes it."""


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def parse_node_slo(obj: Mapping[str, Any]) -> NodeSLORecord:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise invalid("metadata.name", "required").for_object("NodeSLO", "")
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    return NodeSLORecord(name, canonical(spec), spec.get("extensions"))


def passthrough_extensions(existing: Any) -> Json:
    """``spec.extensions`` of the rendered NodeSLO: ``{"Object": {...}}`` with the existing NodeSLO's
    ``Object`` entries kept. Koordinator's ``ExtensionsMap`` has one Go field, ``Object``, with an
    ``inline`` tag encoding/json does not honour, so that is its wire form; keys beside it (and any
    ``Object`` that is not an object) are dropped, as Go's decoder drops them. Its third-party extenders
    (none upstream) would add entries here."""
    kept: Json = {}
    if isinstance(existing, Mapping):
        for key, value in existing.items():
            if isinstance(key, str) and key.lower() == "object" and isinstance(value, Mapping):
                kept = dict(value)
    return {"Object": kept}


# ----- nodeslo -----


def decide_node_slo(node: Node | None, name: str, existing: NodeSLORecord | None, config: SloConfig) -> Write | None:
    """Create the node's NodeSLO, bring its spec to the rendered one (``hostApplications`` from
    ``host-application-config``, ``extensions`` passed through), or delete it with its node.

    Without the ConfigMap an existing NodeSLO is left as it is (someone may have written it by hand);
    a missing one is still created with Koordinator's defaults."""
    if node is None:
        return Write(NODESLO, name, "DELETE", node_slo_path(name)) if existing is not None else None
    spec = render_node_slo_spec(config, node.labels, node.annotations)
    spec["extensions"] = passthrough_extensions(existing.extensions if existing is not None else None)
    if existing is None:
        body = {"apiVersion": API_VERSION, "kind": "NodeSLO", "metadata": {"name": name}, "spec": spec}
        return Write(NODESLO, name, "POST", NODESLOS, body)
    if not config.present or existing.spec == canonical(spec):
        return None
    return Write(
        NODESLO, name, "PATCH", node_slo_path(name), [{"op": "replace", "path": "/spec", "value": spec}], JSON_PATCH
    )


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
        body = {
            "apiVersion": API_VERSION,
            "kind": "NodeMetric",
            "metadata": {"name": name},
            "spec": {"metricCollectPolicy": policy},
        }
        return Write(NODEMETRIC, name, "POST", NODEMETRICS, body)
    if existing.collect_policy == canonical(policy):
        return None
    return Write(
        NODEMETRIC, name, "PATCH", node_metric_path(name), {"spec": {"metricCollectPolicy": policy}}, MERGE_PATCH
    )
