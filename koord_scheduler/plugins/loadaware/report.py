"""The ``simulate`` report of LoadAwareScheduling: per node, NodeMetric freshness, reported usage and the
estimate Filter/Score use, next to requests (percent of allocatable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apis.config.loadaware_args import LoadAwareSchedulingArgs
from apis.core.quantity import format_quantity
from apis.core.types import CPU, MEMORY
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.plugins.loadaware.assign_cache import AssignCache

TITLE = "Node load (LoadAwareScheduling; estimated = usage + pods not yet reported)"


def node_load_report(
    snapshot: ClusterSnapshot,
    cache: AssignCache,
    *,
    resources: Sequence[str],
    args: LoadAwareSchedulingArgs,
    now: float,
) -> tuple[str, list[dict[str, Any]]]:
    """One row per node, sorted by name; ``resources`` is the plugin's resource order (``cache``'s)."""
    rows: list[dict[str, Any]] = []
    for info in sorted(snapshot.iter_nodes(), key=lambda i: i.name):
        pos = info.position
        load = cache.get(info.name)
        metric = load.metric if load is not None else None
        row: dict[str, Any] = {"node": info.name, "nodeMetric": freshness(metric, now, args)}
        for resource in (CPU, MEMORY):
            col = snapshot.column(resource)
            allocatable = int(snapshot.allocatable[pos, col]) if col is not None else 0
            requested = int(snapshot.requested[pos, col]) if col is not None else 0
            row[f"{resource} requested"] = amount_text(resource, requested, allocatable)
            if metric is None or load is None:
                row[f"{resource} usage"] = "-"
                row[f"{resource} estimated"] = "-"
                continue
            i = list(resources).index(resource)
            usage = load.node_usage[i]
            row[f"{resource} usage"] = amount_text(resource, usage, allocatable)
            row[f"{resource} estimated"] = amount_text(resource, usage + load.node_delta[i], allocatable)
        row["pods estimated"] = len(load.delta_pods) if load is not None and metric is not None else 0
        rows.append(row)
    return TITLE, rows


def amount_text(resource: str, amount: int, allocatable: int) -> str:
    """``amount`` as a quantity (memory not a whole MiB: in Gi with one decimal), with its percent of
    ``allocatable`` when that is not 0."""
    pct = f" ({100 * amount / allocatable:.0f}%)" if allocatable else ""
    if resource == MEMORY and amount % (1 << 20):
        return f"{amount / (1 << 30):.1f}Gi{pct}"
    return f"{format_quantity(resource, amount)}{pct}"


def freshness(metric: NodeMetricRecord | None, now: float, args: LoadAwareSchedulingArgs) -> str:
    """``missing``, ``expired (...)`` or ``fresh (Ns old)``, by ``nodeMetricExpirationSeconds``."""
    if metric is None:
        return "missing"
    if metric.update_time is None:
        return "expired (no updateTime)"
    age = now - metric.update_time
    if age >= args.node_metric_expiration_seconds:
        return f"expired ({age:.0f}s old)"
    return f"fresh ({age:.0f}s old)"
