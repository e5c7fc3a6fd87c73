"""koord-scheduler's answer for one pod on a listed cluster state, computed in-process.

The state (every node, every assigned non-terminal pod, and the other kinds the profile's plugins
watch) is loaded into an embedded :class:`MemoryCluster`, the scheduler is built from the same
``KubeSchedulerConfiguration`` the upstream binary runs (through our config loader and the in-tree
registry), and the pod goes through PreFilter/Filter and, with two or more feasible nodes, PreScore/Score
exactly as ``schedule_pod`` runs them, with nothing sampled (``percentageOfNodesToScore: 100``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apis.config.loader import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis, fit_error_message
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.algorithm import Sampler, find_nodes_that_fit
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster


@dataclass
class Decision:
    """One scheduler's view of one pod: the feasible nodes, and per node each plugin's weighted score
    and the total (empty when fewer than two nodes are feasible: neither scheduler scores then), or the
    FitError message when no node is feasible."""

    feasible: set[str] = field(default_factory=set)
    plugin_scores: dict[str, dict[str, int]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    message: str = ""
    node: str | None = None
    """The node the pod was bound to (upstream only)."""


def koord_decision(
    config: Mapping[str, Any],
    scheduler_name: str,
    *,
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    objects: Mapping[str, Sequence[Mapping[str, Any]]],
    pod: Mapping[str, Any],
) -> Decision:
    return asyncio.run(_decide(config, scheduler_name, nodes=nodes, pods=pods, objects=objects, pod=pod))


async def _decide(
    config: Mapping[str, Any],
    scheduler_name: str,
    *,
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    objects: Mapping[str, Sequence[Mapping[str, Any]]],
    pod: Mapping[str, Any],
) -> Decision:
    cluster = MemoryCluster()
    scheduler = build_scheduler(parse_scheduler_config(dict(config)), in_tree_registry(), cluster)
    watched = scheduler.watched_kinds
    cluster.load(
        [parse_node(n) for n in nodes],
        [parse_pod(p) for p in pods],
        {kind: [(_object_key(o), o) for o in items] for kind, items in objects.items() if kind in watched},
    )
    await cluster.start(scheduler, list(watched.values()))
    fwk = scheduler.profiles[scheduler_name]
    snapshot = scheduler.cache.snapshot
    incoming = parse_pod(pod)
    state = CycleState()
    diagnosis = Diagnosis(num_all_nodes=snapshot.num_nodes)
    incoming, feasible = find_nodes_that_fit(fwk, state, incoming, snapshot, sampler=Sampler(), diagnosis=diagnosis)
    out = Decision(feasible={snapshot.info(int(p)).name for p in feasible.tolist()})
    if len(feasible) == 0:
        # PostFilter's message, as upstream's FitError carries it (DynamicResources' is the only one in the
        # shared profile: preemption is not part of the comparison). Its deallocations are never needed
        # here: no claim is allocated without its pod being bound.
        _, status = fwk.run_post_filter(state, incoming, diagnosis)
        if status.message:
            diagnosis.post_filter_msg = status.message
        out.message = fit_error_message(diagnosis)
    elif len(feasible) > 1:
        incoming, scored = fwk.run_before_score(state, incoming, feasible)
        totals = fwk.run_score_plugins(state, incoming, scored)
        per_plugin = fwk.plugin_scores(state, incoming, scored)
        names = [snapshot.info(int(p)).name for p in scored.tolist()]
        out.totals = {name: int(totals[i]) for i, name in enumerate(names)}
        out.plugin_scores = {
            name: {plugin: int(np.asarray(scores)[i]) for plugin, scores in per_plugin.items()}
            for i, name in enumerate(names)
        }
    await cluster.stop()
    return out


def _object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])
