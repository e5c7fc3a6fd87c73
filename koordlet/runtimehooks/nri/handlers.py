"""The NRI events koordlet acts on, from NRI messages to the hook decisions and back.

- ``RunPodSandbox``: the pod-level values (a BE pod's batch ``cpu.shares``/quota/memory limit, no CFS quota
  for a pod with a bound cpuset) are written to the pod's cgroup, which the kubelet has made before asking
  for the sandbox, through this plugin's own :class:`~koordlet.qosmanager.executor.ResourceExecutor`;
- ``CreateContainer``: :func:`~koordlet.runtimehooks.hooks.container_resources` as a
  ``ContainerAdjustment`` of ``linux.resources`` (the runtime writes them when it creates the cgroup, so
  the container's first instruction runs under them);
- ``UpdateContainer``: the same values as a ``ContainerUpdate`` of that container (the kubelet's update must
  not undo them);
- ``StopContainer`` / ``RemovePodSandbox``: forget what was kept about the container or pod.

A pod is taken from koordlet's pod informer (its spec has the containers' batch resources); one the
informer has not seen yet is described from the sandbox itself (labels, annotations, the QoS directory of
its cgroup parent), as Koordinator's hooks do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from apis.extension import KubeQOSClass, priority_class_with_default, qos_class_with_default
from koordlet.qosmanager.executor import ResourceExecutor, ResourceUpdate
from koordlet.qosmanager.plugins.batchresource.policy import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    ExtendedResourceSpecError,
    batch_plan,
    batch_spec,
    parse_extended_resource_spec,
    resolve_specs,
)
from koordlet.qosmanager.plugins.cpuset.policy import unset_cfs_quota
from koordlet.runtimehooks.hooks import (
    BATCH_RESOURCE,
    CPUSET_ALLOCATOR,
    ContainerResources,
    HookError,
    HookRules,
    KubeletResources,
    container_resources,
)
from koordlet.runtimehooks.nri.proto import api_pb2
from koordlet.statesinformer import StatesInformer
from koordlet.statesinformer.pods import PodMeta

log = logging.getLogger("koordlet.nri")

RulesSource = Callable[[], HookRules]
"""Returns the node-wide rules as they are now (called once per event)."""


def kube_qos_from_cgroup_parent(cgroup_parent: str) -> KubeQOSClass:
    """The kubelet's QoS directory in a pod's cgroup parent (``.../kubepods/besteffort/pod<uid>``,
    ``kubepods-burstable-pod<uid>.slice``); none of them is Guaranteed."""
    lowered = cgroup_parent.lower()
    if "besteffort" in lowered:
        return KubeQOSClass.BEST_EFFORT
    if "burstable" in lowered:
        return KubeQOSClass.BURSTABLE
    return KubeQOSClass.GUARANTEED


def pod_from_sandbox(pod: api_pb2.PodSandbox, informer: StatesInformer) -> PodMeta:
    """The informer's record of the pod, or one built from the sandbox (no container resources)."""
    known = informer.get_pod(pod.uid) if pod.uid else None
    if known is not None:
        return known
    labels = dict(pod.labels)
    kube_qos = kube_qos_from_cgroup_parent(pod.linux.cgroup_parent)
    qos = qos_class_with_default(labels, kube_qos.value)
    return PodMeta(
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        kube_qos=kube_qos,
        qos=qos,
        priority_class=priority_class_with_default(labels, None, qos),
        priority=None,
        cgroup_dir=informer.layout.pod_dir(kube_qos, pod.uid),
        phase="Pending",
        labels=labels,
        annotations=dict(pod.annotations),
    )


def kubelet_resources(resources: api_pb2.LinuxResources) -> KubeletResources:
    cpu, memory = resources.cpu, resources.memory
    return KubeletResources(
        cpu_shares=cpu.shares.value if cpu.HasField("shares") else None,
        cfs_quota=cpu.quota.value if cpu.HasField("quota") else None,
        cfs_period=cpu.period.value if cpu.HasField("period") else None,
        memory_limit=memory.limit.value if memory.HasField("limit") else None,
        cpuset_cpus=cpu.cpus,
    )


def to_linux_resources(values: ContainerResources) -> api_pb2.LinuxResources:
    """koordlet's values as NRI ``LinuxResources`` (only the fields it sets)."""
    out = api_pb2.LinuxResources()
    if values.cpu_shares is not None:
        out.cpu.shares.value = values.cpu_shares
    if values.cfs_quota is not None:
        out.cpu.quota.value = values.cfs_quota
    if values.cpuset_cpus is not None:
        out.cpu.cpus = values.cpuset_cpus
    if values.memory_limit is not None:
        out.memory.limit.value = values.memory_limit
    for name, value in (values.unified or {}).items():
        out.unified[name] = value
    return out


def to_adjustment(values: ContainerResources) -> api_pb2.ContainerAdjustment:
    """The ``ContainerAdjustment`` of ``values``: resources, ``oom_score_adj``, added environment and mounts."""
    adjust = api_pb2.ContainerAdjustment()
    resources = to_linux_resources(values)
    if resources.ByteSize():
        adjust.linux.resources.CopyFrom(resources)
    if values.oom_score_adj is not None:
        adjust.linux.oom_score_adj.value = values.oom_score_adj
    for name, value in values.env or ():
        adjust.env.add(key=name, value=value)
    for mount in values.mounts or ():
        adjust.mounts.add(destination=mount.destination, type=mount.type, source=mount.source, options=mount.options)
    return adjust


def to_update(container_id: str, values: ContainerResources) -> api_pb2.ContainerUpdate:
    """A ``ContainerUpdate`` naming its container (without the id containerd cannot apply it)."""
    update = api_pb2.ContainerUpdate(container_id=container_id, ignore_failure=True)
    update.linux.resources.CopyFrom(to_linux_resources(values))
    return update


def pod_level_plan(pod: PodMeta, rules: HookRules) -> list[list[ResourceUpdate]]:
    """``[[pod updates]]``: the pod cgroup's values at sandbox creation, by the reconcilers' functions."""
    updates: list[ResourceUpdate] = []
    gates = rules.gates
    if gates.enabled(CPUSET_ALLOCATOR) and unset_cfs_quota(pod):
        updates.append(ResourceUpdate("cpu.cfs_quota_us", pod.cgroup_dir, "-1", CPUSET_ALLOCATOR))
    if gates.enabled(BATCH_RESOURCE) and pod.labelled_be:
        own = [(c.name, None, batch_spec(c.requests, c.limits)) for c in pod.containers]
        annotation = None
        raw = pod.annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
        if raw is not None:
            try:
                annotation = parse_extended_resource_spec(raw)
            except ExtendedResourceSpecError as err:
                if all(spec is None for _, _, spec in own):
                    raise HookError(f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}: {err}") from err
        _, pod_specs = resolve_specs(own, annotation)
        pod_updates, _ = batch_plan(pod.cgroup_dir, [], pod_specs, rules.batch)
        updates += pod_updates
    return [updates] if updates else []


@dataclass(slots=True)
class HookHandlers:
    """The decisions behind each NRI event. Methods raise on a failure; the plugin turns that into no
    adjustment (fail-open)."""

    informer: StatesInformer
    rules: RulesSource
    executor: ResourceExecutor

    def run_pod_sandbox(self, pod: api_pb2.PodSandbox) -> PodMeta:
        meta = pod_from_sandbox(pod, self.informer)
        plan = pod_level_plan(meta, self.rules())
        if plan:
            self.executor.apply_leveled(plan)
        return meta

    def decide(
        self, pod: api_pb2.PodSandbox, container: api_pb2.Container, resources: api_pb2.LinuxResources | None = None
    ) -> ContainerResources:
        return self._decide(pod, container, resources, self.rules())

    def decide_now(
        self, pod: api_pb2.PodSandbox, container: api_pb2.Container, resources: api_pb2.LinuxResources | None = None
    ) -> ContainerResources | None:
        """:meth:`decide` from the rules kept since the last event, reading no file (pure computation, safe to
        run on the connection's thread); ``None`` when they are not current (then :meth:`decide`)."""
        current = getattr(self.rules, "current", None)
        rules = current() if current is not None else None
        return self._decide(pod, container, resources, rules) if rules is not None else None

    def _decide(
        self,
        pod: api_pb2.PodSandbox,
        container: api_pb2.Container,
        resources: api_pb2.LinuxResources | None,
        rules: HookRules,
    ) -> ContainerResources:
        meta = pod_from_sandbox(pod, self.informer)
        kubelet = kubelet_resources(resources if resources is not None else container.linux.resources)
        return container_resources(meta, container.name, kubelet=kubelet, rules=rules)


def describe_values(values: ContainerResources) -> Mapping[str, object]:
    """The set fields (for debug logs)."""
    return {name: getattr(values, name) for name in values.decided_by}
