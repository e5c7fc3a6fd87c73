"""NUMA-level batch resources: Koordinator's ``BatchResource`` ``calculateOnNUMALevel`` and the
NodeResourceTopology zone update (``UpdateNRTZoneListIfNeeded``), as pure functions.

Koordinator ``pkg/slo-controller/noderesource/plugins/batchresource/plugin.go`` and ``plugins/util``. For a
node whose NodeResourceTopology lists zones that all have ``cpu`` and ``memory``, each zone gets the
node-level formula (:mod:`.batch`) over its own amounts:

- capacity: the zone's ``cpu`` / ``memory`` allocatable; margin from it (``cpuReclaimThresholdPercent``...);
- system usage and reservation: the node's, divided evenly over the zones (rounded up);
- each Running/Pending pod's request and usage: on the NUMA nodes of its
  ``scheduling.koordinator.sh/resource-status`` ``numaNodeResources`` (evenly over those), else evenly over
  all zones; usage of pods the NodeMetric reports but the informer no longer has: evenly over all zones.

The result goes into each zone's resources as ``kubernetes.io/batch-cpu`` (millicores) and
``kubernetes.io/batch-memory`` (bytes), ``capacity`` = ``allocatable`` = ``available``; batch-cpu times the
CPU normalization ratio when it is above 1. A value is rewritten only when it moved by more than
``resourceDiffThreshold``; a missing one is added (resources kept sorted by name); a zone the result does not
name has its batch resources set to 0. Degraded or disabled nodes keep their zones as they are (Koordinator
computes no zone result then). Amounts are divided to the millicore and the byte (Koordinator divides memory
in milli-bytes and rounds at the end: a difference below a byte per term).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from apis.configuration import ColocationStrategy
from apis.configuration.normalization import ANNOTATION_CPU_BASIC_INFO
from apis.core.quantity import milli_value, value
from apis.core.types import CPU, MEMORY, Node, Pod
from apis.extension import PriorityClass
from apis.extension.constants import RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY
from apis.extension.numa import resource_status_of
from apis.extension.qos import QoSClass, qos_class_with_default
from apis.slo.nodemetric_record import NodeMetricRecord
from koord_scheduler.scheduler.controllers.batch import (
    BatchInputs,
    HighPriorityLoad,
    Pair,
    batch_allocatable,
    is_high_priority,
    node_reserved,
    pair_of,
    system_used,
)

_LOW = (PriorityClass.BATCH.value, PriorityClass.FREE.value)
ZONE_RESOURCES = (RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY)


@runtime_checkable
class TopologySource(Protocol):
    """A parsed NodeResourceTopology as the noderesource controller reads it."""

    @property
    def name(self) -> str: ...
    @property
    def cpu_basic_info(self) -> str: ...
    @property
    def zones_json(self) -> str: ...
    @property
    def resource_version(self) -> str: ...


@dataclass(frozen=True, slots=True)
class TopologyRecord:
    """What the controllers keep of a NodeResourceTopology when the scheduler does not watch the kind:
    the ``cpu-basic-info`` annotation, the zones (canonical JSON, kept to write them back) and the
    resourceVersion (the zone write is conditional on it)."""

    name: str
    cpu_basic_info: str = ""
    zones_json: str = "[]"
    resource_version: str = ""


def canonical_zones(zones: Any) -> str:
    return json.dumps(zones if isinstance(zones, list) else [], sort_keys=True, separators=(",", ":"))


def parse_topology_record(obj: Mapping[str, Any]) -> TopologyRecord:
    """Raises ``ValueError`` for an object without a name; the annotation and zones are checked when used,
    so a bad one is reported for its node, not as a bad object."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError("NodeResourceTopology without metadata.name")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    text = annotations.get(ANNOTATION_CPU_BASIC_INFO, "") if isinstance(annotations, Mapping) else ""
    version = meta.get("resourceVersion", "") if isinstance(meta, Mapping) else ""
    return TopologyRecord(
        name,
        text if isinstance(text, str) else "",
        canonical_zones(obj.get("zones")),
        version if isinstance(version, str) else "",
    )


# ----- the calculation -----


@dataclass(frozen=True, slots=True)
class Zone:
    """A zone's name and its cpu (millicores) and memory (bytes) allocatable."""

    name: str
    allocatable: Pair


def _quantity(raw: Any, resource: str) -> int:
    text = str(raw)
    return milli_value(text) if resource == CPU else value(text)


def zones_of(zones_json: str) -> list[Zone] | None:
    """The zones, or None when some zone lacks a cpu or memory allocatable (``isNRTResourcesCreated``) or
    the JSON is not a zone list."""
    try:
        raw = json.loads(zones_json)
    except ValueError:
        return None
    if not isinstance(raw, list) or not raw:
        return None
    out: list[Zone] = []
    for zone in raw:
        if not isinstance(zone, Mapping) or not isinstance(zone.get("name"), str):
            return None
        amounts: dict[str, int] = {}
        for resource in zone.get("resources") or []:
            if isinstance(resource, Mapping) and resource.get("name") in (CPU, MEMORY):
                try:
                    amounts[resource["name"]] = _quantity(resource.get("allocatable", 0), resource["name"])
                except (ValueError, TypeError):
                    return None
        if CPU not in amounts or MEMORY not in amounts:
            return None
        out.append(Zone(zone["name"], Pair(amounts[CPU], amounts[MEMORY])))
    return out


def divide(amount: Pair, parts: int) -> Pair:
    """``DivideResourceList``: each resource divided, rounded up."""
    return Pair(math.ceil(amount.cpu / parts), math.ceil(amount.memory / parts)) if parts > 0 else amount


def _pod_numa(pod: Pod) -> list[int]:
    try:
        return [r.node for r in resource_status_of(pod.annotations).numa_node_resources]
    except ValueError:  # a bad annotation: the pod counts as spread over the node (Koordinator logs it)
        return []


def zone_batch(
    node: Node, pods: Iterable[Pod], metric: NodeMetricRecord, zones: Sequence[Zone], strategy: ColocationStrategy
) -> dict[str, Pair]:
    """Batch cpu (millicores) and memory (bytes) per zone name (see the module docstring).

    Shares of pods spread over the whole node are the same in every zone, so they are summed once; only
    pods bound to NUMA nodes are added zone by zone (per pod, each share rounded up, as Koordinator rounds)."""
    count = len(zones)
    # [used cpu, used memory, request cpu, request memory, max cpu, max memory]: every zone, then per zone
    spread = [0] * 6
    per_zone = [[0] * 6 for _ in range(count)]
    seen: set[str] = set()
    for pod in pods:
        if pod.phase not in ("Running", "Pending"):
            continue
        usage_metric = metric.pods.get(pod.key)
        if usage_metric is not None:
            seen.add(pod.key)
        if not is_high_priority(pod):
            continue
        numa = _pod_numa(pod) if pod.annotations else []
        valid = sorted({n for n in numa if 0 <= n < count})
        parts = len(valid) or count
        request = pair_of(pod.requests)
        req_cpu, req_mem = -(-request.cpu // parts), -(-request.memory // parts)
        if usage_metric is None:
            use_cpu, use_mem, max_cpu, max_mem = req_cpu, req_mem, req_cpu, req_mem
        else:
            usage = pair_of(usage_metric.usage)
            use_cpu, use_mem = -(-usage.cpu // parts), -(-usage.memory // parts)
            max_cpu, max_mem = max(use_cpu, req_cpu), max(use_mem, req_mem)
            if qos_class_with_default(pod.labels, pod.qos_class) is QoSClass.LSE:
                use_cpu = req_cpu  # LSE pods do not give back CPU
        shares = (use_cpu, use_mem, req_cpu, req_mem, max_cpu, max_mem)
        for target in [per_zone[n] for n in valid] if valid else (spread,):
            for k in range(6):
                target[k] += shares[k]
    for key, usage_metric in metric.pods.items():
        if key in seen or usage_metric.priority in _LOW:
            continue
        share = divide(pair_of(usage_metric.usage), count)
        for k, amount in ((0, share.cpu), (1, share.memory), (4, share.cpu), (5, share.memory)):
            spread[k] += amount
    system = divide(system_used(metric), count)
    reserved = divide(node_reserved(node), count)
    out: dict[str, Pair] = {}
    for zone, own in zip(zones, per_zone, strict=True):
        a = [spread[k] + own[k] for k in range(6)]
        load = HighPriorityLoad(used=Pair(a[0], a[1]), request=Pair(a[2], a[3]), max_used_request=Pair(a[4], a[5]))
        result = batch_allocatable(BatchInputs(zone.allocatable, reserved, system, load), strategy)
        out[zone.name] = Pair(result.cpu, result.memory)
    return out


# ----- writing it into the zones -----


def _format(resource: str, amount_milli: int) -> str:
    """A quantity string for ``amount_milli`` thousandths of the resource's unit."""
    if amount_milli % 1000 == 0:
        return str(amount_milli // 1000)
    return f"{amount_milli}m"


def _milli(raw: Any) -> int | None:
    try:
        return milli_value(str(raw))
    except (ValueError, TypeError):
        return None


def _differs(old: Any, new_milli: int, threshold: float) -> bool:
    """``IsQuantityDiff`` in milli units (an unreadable old value always differs)."""
    have = _milli(old)
    return have is None or abs(new_milli - have) > have * threshold


def updated_zones(
    zones_json: str, result: Mapping[str, Pair], *, diff_threshold: float, cpu_normalization: float | None
) -> list[Any] | None:
    """The zone list with the batch resources of ``result`` written in, or None when nothing moved enough
    to write (``UpdateNRTZoneListIfNeeded``)."""
    zones = json.loads(zones_json)
    changed = False
    for zone in zones:
        resources: list[Any] = zone.setdefault("resources", [])
        amounts = result.get(zone.get("name"))
        if amounts is None:
            for item in resources:
                if item.get("name") in ZONE_RESOURCES and any(
                    (_milli(item.get(field)) or 0) != 0 for field in ("capacity", "allocatable", "available")
                ):
                    item["capacity"] = item["allocatable"] = item["available"] = "0"
                    changed = True
            continue
        cpu_milli = amounts.cpu * 1000
        if cpu_normalization is not None and cpu_normalization > 1:
            cpu_milli = int(cpu_milli * cpu_normalization)
        for name, milli in ((RESOURCE_BATCH_CPU, cpu_milli), (RESOURCE_BATCH_MEMORY, amounts.memory * 1000)):
            text = _format(name, milli)
            item = next((r for r in resources if r.get("name") == name), None)
            if item is None:
                resources.append({"name": name, "capacity": text, "allocatable": text, "available": text})
                resources.sort(key=lambda r: str(r.get("name", "")))
                changed = True
                continue
            for field in ("capacity", "allocatable", "available"):
                if _differs(item.get(field), milli, diff_threshold):
                    item[field] = text
                    changed = True
    return zones if changed else None
