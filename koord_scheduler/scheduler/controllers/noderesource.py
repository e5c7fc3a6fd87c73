"""The ``noderesource`` controller's decision for one node: which of its calculate plugins run, what each
wants on the Node, and whether that is worth a write.

Koordinator ``pkg/slo-controller/noderesource`` runs a list of plugins (``--noderesource-plugins``, all
on by default) and writes their results in one status update. Here:

- ``BatchResource`` (:mod:`.batch`): ``kubernetes.io/batch-{cpu,memory}``;
- ``MidResource`` (:mod:`.midresource`): ``kubernetes.io/mid-{cpu,memory}``.

Both are withdrawn (the keys removed from capacity and allocatable) when colocation is off for the node
or its NodeMetric is missing or stale, and otherwise written equal into capacity and allocatable. The
write is one merge patch of ``/status``; it is sent only when Koordinator's gates say so: the time gate
(``updateTimeThresholdSeconds`` since the last write) or a plugin's diff gate (a key appears or goes,
or moves by more than ``resourceDiffThreshold``), or when kubelet left capacity and allocatable
disagreeing. A write that would change nothing is never sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from apis.configuration import SloConfig, resolve_colocation
from apis.core.paths import api_path
from apis.core.types import Node, Pod
from apis.extension.constants import (
    RESOURCE_BATCH_CPU,
    RESOURCE_BATCH_MEMORY,
    RESOURCE_MID_CPU,
    RESOURCE_MID_MEMORY,
)
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.scheduler.controllers.batch import batch_allocatable, batch_inputs, is_degraded, needs_sync
from koord_scheduler.scheduler.controllers.decide import MERGE_PATCH, Write
from koord_scheduler.scheduler.controllers.midresource import mid_allocatable, mid_inputs
from koord_scheduler.scheduler.controllers.selection import (
    BATCH_RESOURCE,
    MID_RESOURCE,
    NODERESOURCE,
    NODERESOURCE_PLUGINS,
)

PLUGIN_RESOURCES: dict[str, tuple[str, str]] = {
    BATCH_RESOURCE: (RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY),
    MID_RESOURCE: (RESOURCE_MID_CPU, RESOURCE_MID_MEMORY),
}
MANAGED_RESOURCES = tuple(name for plugin in NODERESOURCE_PLUGINS for name in PLUGIN_RESOURCES[plugin])
"""Every Node status key the controller may write or remove."""


@dataclass(frozen=True, slots=True)
class NodeResourceDecision:
    write: Write | None
    recheck_at: float | None
    """When to look again even without events (the moment the NodeMetric turns stale)."""


Amounts = dict[str, int | None]


def wanted_resources(
    node: Node,
    pods: Iterable[Pod],
    metric: NodeMetricRecord | None,
    config: SloConfig,
    *,
    now: float,
    plugins: frozenset[str],
) -> tuple[Amounts, list[str], float | None]:
    """What each enabled plugin wants in the node's status (None: the key removed), the notes saying
    why, and when the NodeMetric turns stale (None when it already has or colocation is off)."""
    strategy = resolve_colocation(config, node.labels, node.annotations)
    names = [name for plugin in NODERESOURCE_PLUGINS if plugin in plugins for name in PLUGIN_RESOURCES[plugin]]
    if not strategy.enable:
        return dict.fromkeys(names), ["colocation disabled"], None
    if metric is None or is_degraded(metric, now, strategy.degrade_time_minutes):
        return dict.fromkeys(names), ["NodeMetric missing or stale (degraded)"], None
    assert metric.update_time is not None
    recheck_at = metric.update_time + strategy.degrade_time_minutes * 60 + 1
    pods = list(pods)
    want: Amounts = {}
    notes: list[str] = []
    if MID_RESOURCE in plugins:
        mid = mid_allocatable(mid_inputs(node, pods, metric), strategy)
        want[RESOURCE_MID_CPU], want[RESOURCE_MID_MEMORY] = mid.cpu, mid.memory
        notes.append(mid.explanation)
    if BATCH_RESOURCE in plugins:
        batch = batch_allocatable(batch_inputs(node, pods, metric), strategy)
        want[RESOURCE_BATCH_CPU], want[RESOURCE_BATCH_MEMORY] = batch.cpu, batch.memory
        notes.append(batch.explanation)
    return want, notes, recheck_at


def decide_node_resources(
    node: Node,
    pods: Iterable[Pod],
    metric: NodeMetricRecord | None,
    config: SloConfig,
    *,
    now: float,
    last_sync: float | None,
    interval_spread: float = 0.0,
    plugins: frozenset[str] = frozenset(NODERESOURCE_PLUGINS),
) -> NodeResourceDecision:
    """The status write for ``node`` (see the module docstring). ``interval_spread`` (0 to 1) stretches
    this node's ``updateTimeThresholdSeconds`` by that fraction, so nodes first written together do not
    all come due in the same second ever after."""
    want, notes, recheck_at = wanted_resources(node, pods, metric, config, now=now, plugins=plugins)
    names = list(want)
    current = tuple(node.allocatable.get(name) for name in names)
    wanted = tuple(want[name] for name in names)
    consistent = all(node.capacity.get(name) == node.allocatable.get(name) for name in names)
    if current == wanted and consistent:
        return NodeResourceDecision(None, recheck_at)
    strategy = resolve_colocation(config, node.labels, node.annotations)
    interval = strategy.update_time_threshold_seconds * (1 + interval_spread)
    due = last_sync is None or now - last_sync > interval
    if not (due or not consistent or needs_sync(current, wanted, diff_threshold=strategy.resource_diff_threshold)):
        return NodeResourceDecision(None, recheck_at)
    values = {name: None if amount is None else str(amount) for name, amount in want.items()}
    body = {"status": {"capacity": values, "allocatable": values}}
    path = api_path("", "v1", "nodes", name=node.name, subresource="status")
    return NodeResourceDecision(
        Write(NODERESOURCE, node.name, "PATCH", path, body, MERGE_PATCH, "; ".join(notes)), recheck_at
    )
