"""The BatchResource values (Koordinator ``runtimehooks/hooks/batchresource``), as pure functions.

A pod labelled ``koordinator.sh/qosClass=BE`` (the label itself; no QoS derivation) that requests reclaimed
resources gets, per pod and per container (``kubernetes.io/batch-cpu`` in millicores, ``batch-memory`` in
bytes):

- ``cpu.shares = min(max(batch-cpu request * 1024 / 1000, 2), 262144)`` (integer division; absent or <= 0
  gives 2). The pod sums its containers' positive requests;
- ``cpu.cfs_quota_us = batch-cpu limit * 100000 / 1000``; <= 0 (no limit) gives -1, a positive quota is
  raised to at least 1000 us. The pod is -1 as soon as one of its containers has no limit. With a node
  CPU normalization ratio > 1 a positive quota becomes ``ceil(quota / ratio)``. When CPU suppress runs
  with policy ``cfsQuota`` (threshold ``enable`` and ``cpuSuppressPolicy: cfsQuota``) every quota is -1:
  the besteffort QoS quota is then the only CPU cap;
- ``memory.limit_in_bytes = batch-memory limit``, -1 without one; the pod is the sum, or -1 as soon as one
  container has no limit.

Where the values come from: a container's own ``batch-*`` requests/limits when it has any, else its entry in
the pod annotation ``node.koordinator.sh/extended-resource-spec``; the pod level covers the containers that
have batch resources (from the spec, or, if none has, the annotation's containers). A pod or container with
neither is left alone (the kubelet's BestEffort values stay). cgroup v2 gets ``cpu.weight``, ``cpu.max`` and
``memory.max`` through the executor's usual conversions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apis.core import boundedjson
from apis.extension import RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY
from apis.slo.nodeslo import NodeSLOSpec
from apis.slo.quantity import int_value
from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.system.resources import DEFAULT_CFS_PERIOD_US, milli_cpu_to_shares

NAME = "BatchResource"
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
CFS_QUOTA_MIN_US = 1000
BATCH_RESOURCES = (RESOURCE_BATCH_CPU, RESOURCE_BATCH_MEMORY)


class ExtendedResourceSpecError(ValueError):
    """The pod's extended-resource-spec annotation is not what the webhook writes."""


@dataclass(frozen=True, slots=True)
class BatchSpec:
    """One container's batch resources; a key is absent when the container does not set it."""

    requests: Mapping[str, int]
    limits: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class BatchRule:
    """Node-wide inputs: whether BE quotas may be set at all, and the CPU normalization ratio (-1: none)."""

    cfs_quota_enabled: bool = True
    normalization_ratio: float = -1.0


@dataclass(frozen=True, slots=True)
class BatchValues:
    """What one cgroup gets (-1: unlimited)."""

    cpu_shares: int
    cfs_quota_us: int
    memory_limit_bytes: int


def batch_spec(requests: Mapping[str, int], limits: Mapping[str, int]) -> BatchSpec | None:
    """The container's own batch resources, or ``None`` when it sets none."""
    req = {k: int(v) for k, v in requests.items() if k in BATCH_RESOURCES}
    lim = {k: int(v) for k, v in limits.items() if k in BATCH_RESOURCES}
    return BatchSpec(req, lim) if req or lim else None


def _resource_list(raw: object, where: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ExtendedResourceSpecError(f"{where}: want an object of quantities")
    out: dict[str, int] = {}
    for name, amount in raw.items():
        if name not in BATCH_RESOURCES:
            continue
        try:
            out[name] = int_value(amount)
        except (TypeError, ValueError) as err:
            raise ExtendedResourceSpecError(f"{where}[{name!r}]: {err}") from err
    return out


def parse_extended_resource_spec(text: str) -> dict[str, BatchSpec]:
    """``{"containers": {name: {"requests": {...}, "limits": {...}}}}`` → container name → BatchSpec."""
    try:
        data = boundedjson.loads(text)
    except ValueError as err:
        raise ExtendedResourceSpecError(f"not JSON: {err}") from err
    containers = data.get("containers") if isinstance(data, dict) else None
    if not isinstance(containers, dict):
        raise ExtendedResourceSpecError('want {"containers": {name: {requests, limits}}}')
    out: dict[str, BatchSpec] = {}
    for name, entry in containers.items():
        if not isinstance(entry, dict):
            raise ExtendedResourceSpecError(f"containers[{name!r}]: want an object")
        out[name] = BatchSpec(
            _resource_list(entry.get("requests"), f"containers[{name!r}].requests"),
            _resource_list(entry.get("limits"), f"containers[{name!r}].limits"),
        )
    return out


def milli_cpu_to_quota(milli: int, period_us: int = DEFAULT_CFS_PERIOD_US) -> int:
    """Koordinator's ``MilliCPUToQuota``: ``milli * period / 1000``; <= 0 is -1, else at least 1000 us."""
    quota = milli * period_us // 1000
    if quota <= 0:
        return -1
    return max(quota, CFS_QUOTA_MIN_US)


def scale_quota(quota: int, rule: BatchRule) -> int:
    """A positive quota divided (rounded up) by a normalization ratio above 1; -1 when quotas are off."""
    if not rule.cfs_quota_enabled:
        return -1
    if quota > 0 and rule.normalization_ratio > 1.0:
        return math.ceil(quota / rule.normalization_ratio)
    return quota


def container_values(spec: BatchSpec, rule: BatchRule) -> BatchValues:
    cpu_request = spec.requests.get(RESOURCE_BATCH_CPU, 0)
    cpu_limit = spec.limits.get(RESOURCE_BATCH_CPU, 0)
    memory_limit = spec.limits.get(RESOURCE_BATCH_MEMORY, 0)
    return BatchValues(
        cpu_shares=milli_cpu_to_shares(max(cpu_request, 0)),
        cfs_quota_us=scale_quota(milli_cpu_to_quota(max(cpu_limit, 0)), rule),
        memory_limit_bytes=memory_limit if memory_limit > 0 else -1,
    )


def _sum_limits(specs: Sequence[BatchSpec], resource: str) -> int:
    """The sum of the containers' limits, or -1 as soon as one has none (or a non-positive one)."""
    total = 0
    for spec in specs:
        value = spec.limits.get(resource, -1)
        if value <= 0:
            return -1
        total += value
    return total


def pod_values(specs: Sequence[BatchSpec], rule: BatchRule) -> BatchValues:
    """The pod level over the containers that have batch resources."""
    request = sum(v for s in specs if (v := s.requests.get(RESOURCE_BATCH_CPU, 0)) > 0)
    cpu_limit = _sum_limits(specs, RESOURCE_BATCH_CPU)
    memory_limit = _sum_limits(specs, RESOURCE_BATCH_MEMORY)
    return BatchValues(
        cpu_shares=milli_cpu_to_shares(request),
        cfs_quota_us=scale_quota(milli_cpu_to_quota(cpu_limit), rule),
        memory_limit_bytes=memory_limit,
    )


def batch_rule(slo: NodeSLOSpec, node_annotations: Mapping[str, str]) -> BatchRule:
    """The rule from the merged NodeSLO and the node's ``cpu-normalization-ratio`` annotation (a missing,
    unparsable or non-positive ratio means no normalization)."""
    threshold = slo.resource_used_threshold_with_be
    quota_off = bool(threshold and threshold.enable and threshold.cpu_suppress_policy == "cfsQuota")
    ratio = -1.0
    raw = node_annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if raw is not None:
        try:
            ratio = float(raw)
        except ValueError:
            ratio = -1.0
        if not ratio > 0 or math.isinf(ratio):
            ratio = -1.0
    return BatchRule(cfs_quota_enabled=not quota_off, normalization_ratio=ratio)


@dataclass(frozen=True, slots=True)
class BatchContainer:
    """A container as the plan sees it: its cgroup dir (``None`` before it runs) and batch spec."""

    name: str
    cgroup_dir: str | None
    spec: BatchSpec | None


def resolve_specs(
    containers: Sequence[tuple[str, str | None, BatchSpec | None]], annotation: Mapping[str, BatchSpec] | None
) -> tuple[list[BatchContainer], list[BatchSpec] | None]:
    """Each container's spec (its own, else the annotation's entry) and the pod level's specs (the
    containers with their own batch resources, else every annotation entry; ``None`` if neither)."""
    resolved = [
        BatchContainer(name, cgroup_dir, own if own is not None else (annotation or {}).get(name))
        for name, cgroup_dir, own in containers
    ]
    own_specs = [own for _, _, own in containers if own is not None]
    if own_specs:
        return resolved, own_specs
    if annotation:
        return resolved, list(annotation.values())
    return resolved, None


def _updates(rel_dir: str, values: BatchValues) -> list[ResourceUpdate]:
    return [
        ResourceUpdate("cpu.shares", rel_dir, str(values.cpu_shares), NAME),
        ResourceUpdate("cpu.cfs_quota_us", rel_dir, str(values.cfs_quota_us), NAME),
        ResourceUpdate("memory.limit_in_bytes", rel_dir, str(values.memory_limit_bytes), NAME),
    ]


def batch_plan(
    pod_dir: str, containers: Sequence[BatchContainer], pod_specs: Sequence[BatchSpec] | None, rule: BatchRule
) -> list[list[ResourceUpdate]]:
    """``[[pod updates], [container updates]]`` for one BE pod (for the executor's leveled apply)."""
    pod_level = _updates(pod_dir, pod_values(pod_specs, rule)) if pod_specs is not None else []
    container_level = [
        update
        for c in containers
        if c.cgroup_dir is not None and c.spec is not None
        for update in _updates(c.cgroup_dir, container_values(c.spec, rule))
    ]
    return [pod_level, container_level]
