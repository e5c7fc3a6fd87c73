"""``koord-scheduler simulate``: schedule a cluster file on the embedded in-memory cluster.

Pending pods pass through the ClusterColocationProfile webhook's offline form first
(koord_scheduler/webhook/offline.py), with the profiles, Namespaces and PriorityClasses of the file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from apis.config import KubeSchedulerConfiguration
from apis.core.quantity import format_quantity
from apis.core.types import CPU, MEMORY
from apis.extension.constants import RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY, RESOURCE_MID_CPU, RESOURCE_MID_MEMORY
from apis.feature_gates import DEFAULT_FEATURE_GATES, SchedulerFeatureGates
from apis.slo.nodemetric_record import parse_node_metric
from koord_scheduler.app.cluster_file import ObjectProblem, load_cluster_file, parse_cluster_text
from koord_scheduler.app.progress import SimulateProgress
from koord_scheduler.app.simulate_colocation import NODE_METRIC, with_mid_resources
from koord_scheduler.framework.registry import Registry
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler, SchedulerOptions
from koord_scheduler.webhook.offline import file_admission


@dataclass(frozen=True, slots=True)
class PodPlacement:
    namespace: str
    name: str
    node: str | None
    message: str


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    name: str
    requested: Mapping[str, int]
    allocatable: Mapping[str, int]
    pods: int
    max_pods: int


@dataclass(slots=True)
class SimulationResult:
    placements: list[PodPlacement] = field(default_factory=list)
    before: list[NodeAllocation] = field(default_factory=list)
    after: list[NodeAllocation] = field(default_factory=list)
    problems: list[ObjectProblem] = field(default_factory=list)
    extra_sections: dict[str, Any] = field(default_factory=dict)
    """Sections plugins contribute (reservations, node usage), keyed by name."""


async def run_simulation(
    cluster_path: str | Path | None,
    config: KubeSchedulerConfiguration,
    registry: Registry,
    *,
    now: float | None,
    cluster_text: str | None = None,
    debug_scores: int = 0,
    debug_filters: bool = False,
    feature_gates: SchedulerFeatureGates = DEFAULT_FEATURE_GATES,
    progress: SimulateProgress | None = None,
) -> tuple[SimulationResult, Scheduler]:
    """Build the scheduler, read the cluster (file or text) with the kinds its plugins watch, schedule.
    ``now`` None: the cluster's own time (:func:`snapshot_time`), else the current time."""
    cluster = MemoryCluster()
    clock = [now if now is not None else 0.0]
    scheduler = build_scheduler(
        config, registry, cluster, clock=lambda: clock[0], options=SchedulerOptions(feature_gates=feature_gates)
    )
    for fwk in scheduler.profiles.values():
        fwk.debug.scores = debug_scores
        fwk.debug.filters = debug_filters
    extenders = scheduler.options.extenders
    if extenders and debug_scores > 0:
        extenders.history = []
        scheduler.simulation_reporters.append(lambda: ("extender verdicts", extenders.verdict_rows()))
    parsers = {k.kind: k.parse for k in scheduler.watched_kinds.values()}
    parsers.setdefault(NODE_METRIC, parse_node_metric)  # read for the mid tier even when no plugin watches it
    if progress is not None:
        progress.reading(Path(cluster_path).name if cluster_path is not None else "the cluster")
    if cluster_text is not None:
        cluster_file = parse_cluster_text(cluster_text, extra_kinds=parsers, admission=file_admission)
    else:
        assert cluster_path is not None
        cluster_file = load_cluster_file(cluster_path, extra_kinds=parsers, admission=file_admission)
    if now is None:
        found = snapshot_time(cluster_file.report_times)
        clock[0] = found if found is not None else time.time()
    nodes = with_mid_resources(cluster_file.nodes, cluster_file.pods, cluster_file.objects.get(NODE_METRIC, ()))
    cluster.load(nodes, cluster_file.pods, cluster_file.objects)
    if progress is not None:
        progress.scheduling(sum(1 for p in cluster_file.pods if not p.node_name and scheduler.responsible_for(p)))
        scheduler.options.on_outcome = progress.outcome
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    result = SimulationResult(problems=list(cluster_file.problems))
    result.before = _allocations(scheduler.cache.snapshot)
    await scheduler.run_until_idle()
    result.after = _allocations(scheduler.cache.snapshot)
    for reporter in scheduler.simulation_reporters:
        title, rows = reporter()
        result.extra_sections[title] = rows
    for pod in cluster_file.pods:
        if pod.node_name:
            continue
        current = cluster.pods.get(pod.key)
        if current is not None and current.node_name:
            result.placements.append(PodPlacement(pod.namespace, pod.name, current.node_name, ""))
            continue
        if not scheduler.responsible_for(pod):
            message = f"not scheduled: no profile serves schedulerName {pod.scheduler_name!r}"
        elif pod.scheduling_gates:
            message = f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]"
        elif current is None:
            message = "deleted"
        else:
            outcome = scheduler.outcomes.get(pod.key)
            if outcome is not None:
                message = outcome.message
            elif pod.key in scheduler.gated_messages:
                # Asked again now: the reason a pod was gated when it arrived may have changed since.
                status = scheduler.profiles[pod.scheduler_name].run_pre_enqueue(current)
                message = f"waiting in PreEnqueue: {status.message or 'admitted, not attempted'}"
            else:
                message = "not attempted"
        result.placements.append(PodPlacement(pod.namespace, pod.name, None, message))
    return result, scheduler


def snapshot_time(report_times: Sequence[str]) -> float | None:
    """The moment a cluster file shows: the newest NodeMetric ``status.updateTime`` in it (what the koordlets
    last reported), or None when it has none. ``simulate`` runs at this time unless ``--now`` says
    otherwise, so a dumped cluster's NodeMetrics are as fresh as they were when it was dumped."""
    newest: float | None = None
    for stamp in report_times:
        try:
            at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue  # the NodeMetric's own parser reports it
        newest = at if newest is None or at > newest else newest
    return newest


def _allocations(snapshot: ClusterSnapshot) -> list[NodeAllocation]:
    out: list[NodeAllocation] = []
    for info in snapshot.iter_nodes():
        pos = info.position
        requested = {n: int(snapshot.requested[pos, i]) for i, n in enumerate(snapshot.resource_names)}
        allocatable = {n: int(snapshot.allocatable[pos, i]) for i, n in enumerate(snapshot.resource_names)}
        keep = [n for n in snapshot.resource_names if allocatable[n] or requested[n]]
        out.append(
            NodeAllocation(
                info.name,
                {n: requested[n] for n in keep},
                {n: allocatable[n] for n in keep},
                int(snapshot.pod_count[pos]),
                int(snapshot.allowed_pods[pos]),
            )
        )
    return sorted(out, key=lambda a: a.name)


def to_json(result: SimulationResult) -> str:
    after = {a.name: a for a in result.after}
    doc: dict[str, Any] = {
        "pods": [
            {"namespace": p.namespace, "name": p.name, "node": p.node, "message": p.message} for p in result.placements
        ],
        "nodes": [
            {
                "name": b.name,
                "requested": {k: _fmt(k, v) for k, v in after[b.name].requested.items()},
                "allocatable": {k: _fmt(k, v) for k, v in b.allocatable.items()},
                "requestedBefore": {k: _fmt(k, v) for k, v in b.requested.items()},
                "pods": after[b.name].pods,
                "podsBefore": b.pods,
                "maxPods": b.max_pods,
            }
            for b in result.before
            if b.name in after
        ],
        "problems": [str(p) for p in result.problems],
    }
    doc.update(result.extra_sections)
    return json.dumps(doc, indent=2)


COLOCATION_COLUMNS = {
    RESOURCE_BATCH_CPU: "BATCH-CPU",
    RESOURCE_BATCH_MEMORY: "BATCH-MEMORY",
    RESOURCE_MID_CPU: "MID-CPU",
    RESOURCE_MID_MEMORY: "MID-MEMORY",
}
"""Extra node-table columns, shown when some node has the resource."""


def to_text(result: SimulationResult) -> str:
    lines: list[str] = []
    scheduled = sum(1 for p in result.placements if p.node)
    lines.append(f"Scheduled {scheduled} of {len(result.placements)} pending pods.")
    lines.append("")
    rows = [("POD", "NODE", "REASON")] + [
        (f"{p.namespace}/{p.name}", p.node or "<none>", p.message) for p in result.placements
    ]
    lines.extend(_table(rows))
    lines.append("")
    lines.append("Node allocation (requested / allocatable), before -> after:")
    after = {a.name: a for a in result.after}
    tiers = [r for r in COLOCATION_COLUMNS if any(r in b.allocatable for b in result.before)]
    node_rows = [("NODE", "CPU", "MEMORY", *(COLOCATION_COLUMNS[r] for r in tiers), "PODS")]
    for b in result.before:
        a = after.get(b.name, b)
        node_rows.append(
            (
                b.name,
                _pair(CPU, b, a),
                _pair(MEMORY, b, a),
                *(_pair(r, b, a) for r in tiers),
                f"{b.pods} -> {a.pods} / {b.max_pods}",
            )
        )
    lines.extend(_table(node_rows))
    for title, section in result.extra_sections.items():
        if isinstance(section, list) and section and isinstance(section[0], Mapping):
            lines.append("")
            lines.append(f"{title}:")
            keys = list(section[0].keys())
            header = tuple(k.upper() for k in keys)
            lines.extend(_table([header] + [tuple(_cell(r.get(k)) for k in keys) for r in section]))
    if result.problems:
        lines.append("")
        lines.append(f"{len(result.problems)} problem(s) in the input:")
        lines.extend(f"  {p}" for p in result.problems)
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "<none>"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def _pair(resource: str, before: NodeAllocation, after: NodeAllocation) -> str:
    alloc = before.allocatable.get(resource, 0)
    return (
        f"{_fmt(resource, before.requested.get(resource, 0))} -> "
        f"{_fmt(resource, after.requested.get(resource, 0))} / {_fmt(resource, alloc)} "
        f"({_pct(after.requested.get(resource, 0), alloc)})"
    )


def _pct(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def _fmt(resource: str, amount: int) -> str:
    """batch-memory and mid-memory are bytes, shown as memory is; batch-cpu and mid-cpu stay millicores."""
    return format_quantity(MEMORY if resource in (RESOURCE_BATCH_MEMORY, RESOURCE_MID_MEMORY) else resource, amount)


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = np.max(np.array([[len(c) for c in r] for r in rows]), axis=0).tolist()
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
