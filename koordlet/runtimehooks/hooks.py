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
  the node's ``cpu-normalization-ratio`` when it is above 1 (``normalize``), cpuset pods excepted;
- ``CgroupReconcile``: on cgroup v2, the container's ``memory.min``/``memory.low``/``memory.high`` of its
  class's memory QoS (``memory_qos_values``), as ``unified`` entries (cgroup v1 has no OCI field for them:
  the reconciler alone writes them there);
- ``OOMScoreAdj``: the container's ``oom_score_adj`` from ``koordinator.sh/oom-score-adj-spec`` (a JSON
  object of container name → value) or else ``koordinator.sh/oom-score-adj``, in [-1000, 1000];
- ``GPUEnvInject``: ``NVIDIA_VISIBLE_DEVICES`` = the minors of the pod's GPUs in
  ``scheduling.koordinator.sh/device-allocated``; with ``koordinator.sh/gpu-isolation-provider=HAMi-core``
  and less than a whole GPU, ``CUDA_DEVICE_MEMORY_LIMIT`` (bytes), ``CUDA_DEVICE_SM_LIMIT`` (percent),
  ``LD_PRELOAD`` = HAMi-core's library (``--hami-core-library-directory-path``) and two bind mounts: that
  library and ``/tmp/vgpulock`` (Koordinator's ``pkg/koordlet/runtimehooks/hooks/gpu/gpu.go``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from apis.extension import RESOURCE_BATCH_MEMORY
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    decode_device_allocations,
)
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qosmanager.featuregates import FeatureGates
from koordlet.qosmanager.plugins.batchresource.policy import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    BatchRule,
    ExtendedResourceSpecError,
    batch_spec,
    container_values,
    parse_extended_resource_spec,
)
from koordlet.qosmanager.plugins.cgreconcile.plugin import memory_qos_config
from koordlet.qosmanager.plugins.cgreconcile.policy import memory_qos_updates, memory_qos_values
from koordlet.qosmanager.plugins.cpunormalization.policy import cpu_share_pod, normalize
from koordlet.qosmanager.plugins.cpuset.policy import CPUSetRule, container_cpuset, unset_cfs_quota
from koordlet.qosmanager.plugins.oomscoreadj.policy import OOMScoreAdjError, oom_score_adj
from koordlet.statesinformer.pods import ContainerMeta, PodMeta

BATCH_RESOURCE = "BatchResource"
CPUSET_ALLOCATOR = "CPUSetAllocator"
CPU_NORMALIZATION = "CPUNormalization"
CGROUP_RECONCILE = "CgroupReconcile"
OOM_SCORE_ADJ = "OOMScoreAdj"
GPU_ENV_INJECT = "GPUEnvInject"
HOOK_GATES = (CPUSET_ALLOCATOR, BATCH_RESOURCE, CPU_NORMALIZATION, CGROUP_RECONCILE, OOM_SCORE_ADJ, GPU_ENV_INJECT)
"""The gates whose decisions are delivered at creation, in merge order."""

LABEL_GPU_ISOLATION_PROVIDER = "koordinator.sh/gpu-isolation-provider"
GPU_ISOLATION_HAMI_CORE = "HAMi-core"
GPU_VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
DEFAULT_HAMI_CORE_LIBRARY = "/usr/local/vgpu/libvgpu.so"
"""Koordinator's ``--hami-core-library-directory-path`` default (despite its name, the library file)."""
HAMI_VGPU_LOCK_DIR = "/tmp/vgpulock"
"""HAMi-core's lock directory, shared by the containers of one GPU (bind-mounted from the host)."""
V2_MEMORY_QOS_FILES = frozenset({"memory.min", "memory.low", "memory.high"})


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
class Mount:
    """A mount to add to a container (NRI ``Mount``)."""

    destination: str
    source: str
    type: str = "bind"
    options: tuple[str, ...] = ("rbind",)


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """koordlet's values for one container; ``None`` leaves the kubelet's value. ``decided_by`` maps each
    set field to the gate that set it (for logs and tests)."""

    cpu_shares: int | None = None
    cfs_quota: int | None = None
    memory_limit: int | None = None
    cpuset_cpus: str | None = None
    oom_score_adj: int | None = None
    env: tuple[tuple[str, str], ...] | None = None
    """Environment variables to add (name, value), in order."""
    mounts: tuple[Mount, ...] | None = None
    """Mounts to add, in order."""
    unified: Mapping[str, str] | None = None
    """cgroup v2 files (``memory.min`` ...) and their values."""
    decided_by: Mapping[str, str] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    """One line per gate whose decision failed (its fields are left to the kubelet; the others apply)."""

    def empty(self) -> bool:
        return not self.decided_by

    def merged(self, gate: str, **values: object) -> ContainerResources:
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
    node_slo: NodeSLOSpec | None = None
    node_memory_allocatable: int = 0
    cgroup_v2: bool = False
    hami_core_library: str = DEFAULT_HAMI_CORE_LIBRARY
    """HAMi-core's ``libvgpu.so`` on the host (preloaded and bind-mounted at the same path)."""


def _container(pod: PodMeta, name: str) -> ContainerMeta | None:
    return next((c for c in pod.containers if c.name == name), None)


def batch_resource(pod: PodMeta, container: str, rule: BatchRule) -> dict[str, object] | None:
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


def normalized_quota(pod: PodMeta, kubelet: KubeletResources, ratio: float) -> int | None:
    """CPUNormalization: an LS or unlabelled pod's positive kubelet quota, scaled by ``ratio``."""
    if ratio == -1 or not cpu_share_pod(pod.labels, pod.annotations):
        return None
    if kubelet.cfs_quota is None or kubelet.cfs_quota <= 0:
        return None
    return normalize(kubelet.cfs_quota, ratio)


def gpu_values(pod: PodMeta, *, hami_core_library: str = DEFAULT_HAMI_CORE_LIBRARY) -> dict[str, object] | None:
    """GPUEnvInject's ``env`` and ``mounts`` for every container of ``pod`` (``None``: no GPU allocated).

    ``NVIDIA_VISIBLE_DEVICES`` lists the allocated GPUs' minors. A pod labelled
    ``koordinator.sh/gpu-isolation-provider=HAMi-core`` whose first GPU is shared (``gpu-memory-ratio`` below
    100) also gets HAMi-core's limits (``CUDA_DEVICE_MEMORY_LIMIT``, ``CUDA_DEVICE_SM_LIMIT`` when a
    ``gpu-core`` is allocated), ``LD_PRELOAD=<hami_core_library>`` and that library and ``/tmp/vgpulock``
    bind-mounted from the host, as Koordinator's GPU hook does. Raises :class:`HookError` on a malformed
    ``device-allocated`` annotation, or a HAMi-core pod without the GPU memory (ratio) it needs.
    """
    raw = pod.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if not raw:
        return None
    try:
        gpus = decode_device_allocations(raw).get("gpu") or []
    except ValueError as err:
        raise HookError(str(err)) from None
    if not gpus:
        return None
    env = [(GPU_VISIBLE_DEVICES_ENV, ",".join(str(d.minor) for d in gpus))]
    mounts: list[Mount] = []
    if pod.labels.get(LABEL_GPU_ISOLATION_PROVIDER) == GPU_ISOLATION_HAMI_CORE:
        first = gpus[0].resources
        ratio = first.get(RESOURCE_GPU_MEMORY_RATIO)
        if ratio is None:
            raise HookError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: no {RESOURCE_GPU_MEMORY_RATIO} for HAMi-core")
        if ratio < 100:
            memory = first.get(RESOURCE_GPU_MEMORY)
            if memory is None:
                raise HookError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: no {RESOURCE_GPU_MEMORY} for HAMi-core")
            env.append(("CUDA_DEVICE_MEMORY_LIMIT", str(memory)))
            if RESOURCE_GPU_CORE in first:
                env.append(("CUDA_DEVICE_SM_LIMIT", str(first[RESOURCE_GPU_CORE])))
            env.append(("LD_PRELOAD", hami_core_library))
            mounts += [
                Mount(hami_core_library, hami_core_library),
                Mount(HAMI_VGPU_LOCK_DIR, HAMI_VGPU_LOCK_DIR),
            ]
    return {"env": tuple(env), "mounts": tuple(mounts) or None}


def memory_qos_unified(pod: PodMeta, container: str, rules: HookRules) -> dict[str, str] | None:
    """CgroupReconcile's memory QoS of one container as cgroup v2 ``unified`` entries (``None`` on v1, or
    when the class's memory QoS is off)."""
    if not rules.cgroup_v2 or rules.node_slo is None:
        return None
    cfg = memory_qos_config(rules.node_slo, pod)
    own = _container(pod, container)
    if cfg is None or own is None:
        return None
    resource = RESOURCE_BATCH_MEMORY if pod.is_be else "memory"
    limit = own.limits.get(resource, 0) or rules.node_memory_allocatable
    values = memory_qos_values(own.requests.get(resource, 0), limit, cfg)
    updates = memory_qos_updates("", values, container=True, supported=V2_MEMORY_QOS_FILES)
    return {u.resource: u.value for u in updates} or None


def container_resources(
    pod: PodMeta, container: str, *, kubelet: KubeletResources, rules: HookRules
) -> ContainerResources:
    """Every enabled gate's values for ``container`` of ``pod``. A gate whose decision fails (the pod's own
    data is malformed: :class:`HookError`) contributes nothing and a line in ``errors``; the others still
    apply, as Koordinator runs its hooks with the Ignore failure policy."""
    gates = rules.gates
    steps: list[tuple[str, Callable[[], dict[str, object] | None]]] = []
    if gates.enabled(CPUSET_ALLOCATOR) and rules.cpuset is not None:
        cpuset_rule = rules.cpuset
        steps.append(
            (
                CPUSET_ALLOCATOR,
                lambda: {
                    "cpuset_cpus": container_cpuset(pod, cpuset_rule),
                    "cfs_quota": -1 if unset_cfs_quota(pod) else None,
                },
            )
        )
    if gates.enabled(BATCH_RESOURCE):
        steps.append((BATCH_RESOURCE, lambda: batch_resource(pod, container, rules.batch)))
    if gates.enabled(CPU_NORMALIZATION):
        steps.append(
            (CPU_NORMALIZATION, lambda: {"cfs_quota": normalized_quota(pod, kubelet, rules.normalization_ratio)})
        )
    if gates.enabled(CGROUP_RECONCILE):
        steps.append((CGROUP_RECONCILE, lambda: {"unified": memory_qos_unified(pod, container, rules)}))
    if gates.enabled(OOM_SCORE_ADJ):
        steps.append((OOM_SCORE_ADJ, lambda: {"oom_score_adj": oom_score_adj(pod.annotations, container)}))
    if gates.enabled(GPU_ENV_INJECT):
        steps.append((GPU_ENV_INJECT, lambda: gpu_values(pod, hami_core_library=rules.hami_core_library)))
    result = ContainerResources()
    errors: list[str] = []
    for gate, decide in steps:
        try:
            values = decide()
        except (HookError, OOMScoreAdjError) as err:
            errors.append(f"{gate}: {err}")
            continue
        if values:
            result = result.merged(gate, **values)
    return replace(result, errors=tuple(errors)) if errors else result
