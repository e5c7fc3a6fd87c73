"""The ``noderesource`` controller's decision for one node: which of its calculate plugins run, what each
wants on the Node, and whether that is worth a write.

Koordinator ``pkg/slo-controller/noderesource`` runs a list of plugins (``--noderesource-plugins``, all
on by default) and writes their results in one status update. Here:

- ``CPUNormalization`` and ``ResourceAmplification`` (:mod:`.normalization`): the node annotations
  ``node.koordinator.sh/cpu-normalization-ratio`` and ``resource-amplification-ratio``;
- ``MidResource`` (:mod:`.midresource`): ``kubernetes.io/mid-{cpu,memory}``;
- ``BatchResource`` (:mod:`.batch`): ``kubernetes.io/batch-{cpu,memory}``, batch-cpu multiplied by the
  CPU normalization ratio computed in the same pass when it is above 1 (``ceil``, as Koordinator rounds).

Mid and batch are withdrawn (the keys removed from capacity and allocatable) when colocation is off for
the node or its NodeMetric is missing or stale, and otherwise written equal into capacity and
allocatable. With colocation off the normalization ratio is left as it is and the amplification ratio
is removed (Koordinator's reset). Status changes are sent only when Koordinator's gates say so: the time
gate (``updateTimeThresholdSeconds`` since the last write) or a plugin's diff gate (a key appears or
goes, or moves by more than ``resourceDiffThreshold``), or when kubelet left capacity and allocatable
disagreeing; annotation changes are sent when the ratio moves by more than 0.01 (normalization) or its
text changes (amplification). Both go in one merge patch of ``/status`` (the API server keeps the
metadata of a status write). A write that would change nothing is never sent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from apis.configuration import ColocationStrategy, SloConfig, resolve_colocation
from apis.configuration.normalization import (
    ANNOTATION_CPU_NORMALIZATION_RATIO,
    ANNOTATION_RESOURCE_AMPLIFICATION_RATIO,
    CPU_NORMALIZATION_KEY,
    RESOURCE_AMPLIFICATION_KEY,
    cpu_normalization_from_wire,
    resource_amplification_from_wire,
)
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
from koord_scheduler.scheduler.controllers.normalization import (
    amplification_ratios,
    decide_cpu_normalization,
    format_amplification,
    normalization_needs_sync,
    parse_ratio,
)
from koord_scheduler.scheduler.controllers.nrt_batch import TopologySource, updated_zones, zone_batch, zones_of
from koord_scheduler.scheduler.controllers.selection import (
    BATCH_RESOURCE,
    CPU_NORMALIZATION,
    MID_RESOURCE,
    NODERESOURCE,
    NODERESOURCE_PLUGINS,
    RESOURCE_AMPLIFICATION,
)

PLUGIN_RESOURCES: dict[str, tuple[str, str]] = {
    BATCH_RESOURCE: (RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY),
    MID_RESOURCE: (RESOURCE_MID_CPU, RESOURCE_MID_MEMORY),
}
MANAGED_RESOURCES = tuple(name for plugin in NODERESOURCE_PLUGINS for name in PLUGIN_RESOURCES.get(plugin, ()))
"""Every Node status key the controller may write or remove."""


@dataclass(frozen=True, slots=True)
class NodeResourceDecision:
    write: Write | None
    recheck_at: float | None
    """When to look again even without events (the moment the NodeMetric turns stale)."""
    zone_write: Write | None = None
    """The NodeResourceTopology zones' batch resources (:mod:`.nrt_batch`), when they moved enough."""


Amounts = dict[str, int | None]


def wanted_resources(
    node: Node,
    pods: Iterable[Pod],
    metric: NodeMetricRecord | None,
    config: SloConfig,
    *,
    now: float,
    plugins: frozenset[str],
    cpu_normalization: float | None = None,
    strategy: ColocationStrategy | None = None,
) -> tuple[Amounts, list[str], float | None]:
    """What each enabled resource plugin wants in the node's status (None: the key removed), the notes
    saying why, and when the NodeMetric turns stale (None when it already has or colocation is off).
    ``cpu_normalization`` (when above 1) multiplies batch-cpu."""
    strategy = strategy or resolve_colocation(config, node.labels, node.annotations)
    names = [name for plugin in NODERESOURCE_PLUGINS if plugin in plugins for name in PLUGIN_RESOURCES.get(plugin, ())]
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
        if cpu_normalization is not None and cpu_normalization > 1:
            want[RESOURCE_BATCH_CPU] = normalized(batch.cpu, cpu_normalization)
            notes.append(f"batch-cpu {want[RESOURCE_BATCH_CPU]} after the cpu normalization ratio {cpu_normalization}")
    return want, notes, recheck_at


def normalized(batch_cpu: int, ratio: float) -> int:
    """batch-cpu times the normalization ratio: ``MultiplyMilliQuant`` then ``Value()`` (rounded up)."""
    return math.ceil(int(batch_cpu * 1000 * ratio) / 1000)


Annotations = dict[str, str | None]


def wanted_annotations(
    node: Node,
    config: SloConfig,
    *,
    plugins: frozenset[str],
    cpu_basic_info: str | None,
    strategy: ColocationStrategy | None = None,
) -> tuple[Annotations, list[str], float | None]:
    """What the CPUNormalization and ResourceAmplification plugins want in the node's annotations (None:
    removed; a key left out: left as it is), the notes, and the normalization ratio computed now."""
    strategy = strategy or resolve_colocation(config, node.labels, node.annotations)
    want: Annotations = {}
    notes: list[str] = []
    ratio: float | None = None
    if CPU_NORMALIZATION in plugins and strategy.enable:
        cpu_strategy = cpu_normalization_from_wire(config.key(CPU_NORMALIZATION_KEY).for_node(node.labels))
        decision = decide_cpu_normalization(cpu_strategy, node.labels, cpu_basic_info)
        notes.append(decision.note)
        if decision.ratio is not None:
            want[ANNOTATION_CPU_NORMALIZATION_RATIO] = decision.ratio
            ratio = float(decision.ratio)
    if RESOURCE_AMPLIFICATION in plugins:
        want[ANNOTATION_RESOURCE_AMPLIFICATION_RATIO] = None
        if strategy.enable:
            amp_strategy = resource_amplification_from_wire(
                config.key(RESOURCE_AMPLIFICATION_KEY).for_node(node.labels)
            )
            try:
                current = (
                    ratio
                    if ratio is not None
                    else parse_ratio(node.annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO))
                )
                ratios = amplification_ratios(amp_strategy, current)
            except ValueError as exc:
                notes.append(f"resource amplification: {exc}")
            else:
                want[ANNOTATION_RESOURCE_AMPLIFICATION_RATIO] = format_amplification(ratios) if ratios else None
    return want, notes, ratio


def meta_changes(node: Node, want: Annotations) -> Annotations:
    """The annotations to write: a normalization ratio that moved by more than 0.01 or appears, an
    amplification text that differs."""
    changes: Annotations = {}
    for key, value in want.items():
        have = node.annotations.get(key)
        if key == ANNOTATION_CPU_NORMALIZATION_RATIO:
            if normalization_needs_sync(have, value):
                changes[key] = value
        elif have != value:
            changes[key] = value
    return changes


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
    cpu_basic_info: str | None = None,
    topology: TopologySource | None = None,
) -> NodeResourceDecision:
    """The writes for ``node`` (see the module docstring): its status and annotations, and its
    NodeResourceTopology's zone batch resources. ``topology`` is that NodeResourceTopology (its
    ``cpu-basic-info`` stands for ``cpu_basic_info``). ``interval_spread`` (0 to 1) stretches this node's
    ``updateTimeThresholdSeconds`` by that fraction, so nodes first written together do not all come due
    in the same second ever after."""
    if topology is not None:
        cpu_basic_info = topology.cpu_basic_info or None
    pods = list(pods)
    strategy = resolve_colocation(config, node.labels, node.annotations)
    zone_write = decide_zone_batch(
        node,
        pods,
        metric,
        config,
        now=now,
        plugins=plugins,
        topology=topology,
        cpu_basic_info=cpu_basic_info,
        strategy=strategy,
    )
    annotations, meta_notes, ratio = wanted_annotations(
        node, config, plugins=plugins, cpu_basic_info=cpu_basic_info, strategy=strategy
    )
    meta = meta_changes(node, annotations)
    want, notes, recheck_at = wanted_resources(
        node, pods, metric, config, now=now, plugins=plugins, cpu_normalization=ratio, strategy=strategy
    )
    names = list(want)
    current = tuple(node.allocatable.get(name) for name in names)
    wanted = tuple(want[name] for name in names)
    consistent = all(node.capacity.get(name) == node.allocatable.get(name) for name in names)
    status = not (current == wanted and consistent)
    if status:
        interval = strategy.update_time_threshold_seconds * (1 + interval_spread)
        due = last_sync is None or now - last_sync > interval
        diff = needs_sync(current, wanted, diff_threshold=strategy.resource_diff_threshold)
        status = due or not consistent or diff
    if not status and not meta:
        return NodeResourceDecision(None, recheck_at, zone_write)
    body: dict[str, object] = {}
    if meta:
        body["metadata"] = {"annotations": meta}
    if status:
        values = {name: None if amount is None else str(amount) for name, amount in want.items()}
        body["status"] = {"capacity": values, "allocatable": values}
    path = api_path("", "v1", "nodes", name=node.name, subresource="status")
    note = "; ".join(meta_notes + notes if status else meta_notes)
    write = Write(NODERESOURCE, node.name, "PATCH", path, body, MERGE_PATCH, note)
    return NodeResourceDecision(write, recheck_at, zone_write)


def nrt_path(name: str) -> str:
    return api_path("topology.node.k8s.io", "v1alpha1", "noderesourcetopologies", name=name)


def decide_zone_batch(
    node: Node,
    pods: Iterable[Pod],
    metric: NodeMetricRecord | None,
    config: SloConfig,
    *,
    now: float,
    plugins: frozenset[str],
    topology: TopologySource | None,
    cpu_basic_info: str | None,
    strategy: ColocationStrategy | None = None,
) -> Write | None:
    """The merge patch of the NodeResourceTopology's zones (conditional on its resourceVersion), or None:
    no NRT, zones without cpu and memory, colocation off, a stale NodeMetric, or nothing moved enough."""
    if BATCH_RESOURCE not in plugins or topology is None or metric is None:
        return None
    strategy = strategy or resolve_colocation(config, node.labels, node.annotations)
    if not strategy.enable or is_degraded(metric, now, strategy.degrade_time_minutes):
        return None
    zones = zones_of(topology.zones_json)
    if zones is None:
        return None
    result = zone_batch(node, pods, metric, zones, strategy)
    ratio = None
    if CPU_NORMALIZATION in plugins:
        cpu_strategy = cpu_normalization_from_wire(config.key(CPU_NORMALIZATION_KEY).for_node(node.labels))
        decided = decide_cpu_normalization(cpu_strategy, node.labels, cpu_basic_info).ratio
        ratio = float(decided) if decided is not None else None
    updated = updated_zones(
        topology.zones_json, result, diff_threshold=strategy.resource_diff_threshold, cpu_normalization=ratio
    )
    if updated is None:
        return None
    body: dict[str, object] = {"zones": updated}
    if topology.resource_version:
        body["metadata"] = {"resourceVersion": topology.resource_version}
    note = ", ".join(f"{name} batch-cpu {amount.cpu} batch-memory {amount.memory}" for name, amount in result.items())
    return Write(NODERESOURCE, node.name, "PATCH", nrt_path(node.name), body, MERGE_PATCH, f"zones: {note}")
