"""What koordlet sets on a container at its creation: the reconcilers' own decisions, asked per container.

Each runtime-hook gate has one policy function in its qosmanager package, and the periodic reconciler
(``--runtime-hooks-reconcile-interval``) applies it to every running container. This module asks the same
functions about one container the runtime is about to create (or update) and gathers the answers into a
:class:`ContainerResources`, which the NRI plugin turns into an adjustment. Nothing here reads files or
talks to the runtime: the node-wide inputs come in a :class:`HookRules` snapshot.

Gates, in the order their answers are merged (a later one never overrides a field an earlier one set):

- ``CPUSetAllocator``: ``cpuset.cpus`` from :func:`~koordlet.qosmanager.plugins.cpuset.policy.container_cpuset`;
  no CFS quota (``-1``) for a pod with a bound cpuset (``unset_cfs_quota``);
- ``BatchResource``: ``cpu.shares``, CFS quota and memory limit of a BE container from its batch requests
  and limits (``container_values``), the container's own ``kubernetes.io/batch-*`` first, else its entry in
  the ``node.koordinator.sh/extended-resource-spec`` annotation;
- ``CPUNormalization``: an LS (or unlabelled) container's positive CFS quota from the kubelet divided by
  the node's ``cpu-normalization-ratio`` when it is above 1 (``scale_quota``), cpuset pods excepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from apis.extension import LABEL_POD_QOS
from apis.extension.numa import AnnotationError, resource_status_of
from koordlet.qosmanager.featuregates import FeatureGates
from koordlet.qosmanager.plugins.batchresource.policy import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    BatchRule,
    ExtendedResourceSpecError,
    batch_spec,
    container_values,
    parse_extended_resource_spec,
    scale_quota,
)
from koordlet.qosmanager.plugins.cpuset.policy import CPUSetRule, container_cpuset, unset_cfs_quota
from koordlet.statesinformer.pods import ContainerMeta, PodMeta

BATCH_RESOURCE = "BatchResource"
CPUSET_ALLOCATOR = "CPUSetAllocator"
CPU_NORMALIZATION = "CPUNormalization"
HOOK_GATES = (CPUSET_ALLOCATOR, BATCH_RESOURCE, CPU_NORMALIZATION)
"""The gates whose decisions are delivered at creation, in merge order."""


class HookError(ValueError):
    """A pod's own data makes a decision impossible (a malformed annotation); the message names it."""


@dataclass(frozen=True, slots=True)
class KubeletResources:
    """What the kubelet asked the runtime for (the NRI container's ``linux.resources``); ``None``: unset."""

    cpu_shares: int | None = None
    cfs_quota: int | None = None
    cfs_period: int | None = None
    memory_limit: int | None = None
    cpuset_cpus: str = ""


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """koordlet's values for one container; ``None`` leaves the kubelet's value. ``decided_by`` maps each
    set field to the gate that set it (for logs and tests)."""

    cpu_shares: int | None = None
    cfs_quota: int | None = None
    memory_limit: int | None = None
    cpuset_cpus: str | None = None
    decided_by: Mapping[str, str] = field(default_factory=dict)

    def empty(self) -> bool:
        return not self.decided_by

    def merged(self, gate: str, **values: int | str | None) -> ContainerResources:
        """These values where this result has none yet (the first gate to decide a field keeps it)."""
        fresh = {k: v for k, v in values.items() if v is not None and getattr(self, k) is None}
        if not fresh:
            return self
        return replace(self, **fresh, decided_by={**self.decided_by, **dict.fromkeys(fresh, gate)})  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class HookRules:
    """The node-wide inputs of one decision: the gates and each gate's rule (``None``: not known yet, e.g.
    the CPU topology is still unreadable; that gate then decides nothing)."""

    gates: FeatureGates
    batch: BatchRule = field(default_factory=BatchRule)
    cpuset: CPUSetRule | None = None
    normalization_ratio: float = -1.0


def _container(pod: PodMeta, name: str) -> ContainerMeta | None:
    return next((c for c in pod.containers if c.name == name), None)


def batch_resource(pod: PodMeta, container: str, rule: BatchRule) -> dict[str, int] | None:
    """BatchResource's values for one container of a BE pod (``None``: not BE, or nothing to go by)."""
    if not pod.labelled_be:
        return None
    own = _container(pod, container)
    spec = batch_spec(own.requests, own.limits) if own is not None else None
    if spec is None:
        raw = pod.annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
        if raw is None:
            return None
        try:
            spec = parse_extended_resource_spec(raw).get(container)
        except ExtendedResourceSpecError as err:
            raise HookError(f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}: {err}") from err
        if spec is None:
            return None
    values = container_values(spec, rule)
    return {
        "cpu_shares": values.cpu_shares,
        "cfs_quota": values.cfs_quota_us,
        "memory_limit": values.memory_limit_bytes,
    }


def _has_bound_cpuset(pod: PodMeta) -> bool:
    try:
        return bool(resource_status_of(pod.annotations).cpuset)
    except AnnotationError:
        return False


def normalized_quota(pod: PodMeta, kubelet: KubeletResources, ratio: float) -> int | None:
    """CPUNormalization: an LS or unlabelled pod's positive kubelet quota divided by ``ratio`` (> 1)."""
    if pod.labels.get(LABEL_POD_QOS, "LS") not in ("LS", "") or _has_bound_cpuset(pod):
        return None
    if kubelet.cfs_quota is None or kubelet.cfs_quota <= 0 or not ratio > 1.0:
        return None
    return scale_quota(kubelet.cfs_quota, BatchRule(normalization_ratio=ratio))


def container_resources(
    pod: PodMeta, container: str, *, kubelet: KubeletResources, rules: HookRules
) -> ContainerResources:
    """Every enabled gate's values for ``container`` of ``pod``. Raises :class:`HookError` when the pod's
    own data is malformed (the caller then adjusts nothing: the reconciler reports it per pod too)."""
    result = ContainerResources()
    gates = rules.gates
    if gates.enabled(CPUSET_ALLOCATOR) and rules.cpuset is not None:
        result = result.merged(
            CPUSET_ALLOCATOR,
            cpuset_cpus=container_cpuset(pod, rules.cpuset),
            cfs_quota=-1 if unset_cfs_quota(pod) else None,
        )
    if gates.enabled(BATCH_RESOURCE):
        values = batch_resource(pod, container, rules.batch)
        if values is not None:
            result = result.merged(BATCH_RESOURCE, **values)
    if gates.enabled(CPU_NORMALIZATION):
        result = result.merged(CPU_NORMALIZATION, cfs_quota=normalized_quota(pod, kubelet, rules.normalization_ratio))
    return result
