"""Every device a pod asks for, on one node (Koordinator ``deviceshare/device_allocator.go``
``AutopilotAllocator``, ``devicehandler_default.go``, ``allocator_gpu.go``), pure.

Per device type, first the devices the pod may use: its hint's ``selector`` over device labels, and the
NUMA nodes of its affinity when NodeNUMAResource aligns devices. Then how many and how much of each:

- GPUs: the GPU requirement (:mod:`.request`); taken by topology (:mod:`.gpu_topology`) when every GPU
  reports one, else by score (:func:`.allocation.allocate_gpus`);
- RDMA, FPGA (``DefaultDeviceHandler``): a request above 100 and a multiple of 100 is that many whole
  devices (100 each); else hint ``ApplyForAll`` is every device (matching the selector) with the request
  on each, ``RequestsAsCount`` is the request as a count of devices (1 each, 100 with ``exclusivePolicy:
  DeviceLevel``), and otherwise one device with the request. A node without devices of the type is
  ``UnschedulableAndUnresolvable`` (``Insufficient <type> devices``), as is a hint with a ``vfSelector``
  on a node whose devices of the type have no VFs (``Insufficient <type> VirtualFunctions``).
- ``defaultAllocateDevices``: devices in order (a Reservation's first; else one device per preferred PCIe
  switch in turn; then by score, then minor), each taken when the per-device request fits it and, with a
  ``vfSelector``, it has a free VF of a matching group (the lowest bus id); up to ``max`` devices, at
  least ``count``, else ``Insufficient <type> devices``.

Joint allocation (``device-joint-allocate``, more than one type requested): the primary type first; the
PCIe switches of its devices are preferred for the others, and they may take up to one device per
switch; with ``requiredScope: SamePCIe`` they must take at least one per switch and end on exactly the
primary's switches, else ``node(s) Device Joint-Allocate rules violation``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from apis.core.selectors import label_selector_matches
from apis.core.types import Pod
from apis.extension.device import DEVICE_GPU, DeviceAllocation, VirtualFunction
from koord_scheduler.plugins.deviceshare.allocation import (
    DeviceGroup,
    DeviceState,
    Scorer,
    allocate_gpus,
    fill_memory,
    fits,
)
from koord_scheduler.plugins.deviceshare.gpu_topology import allocate_by_topology
from koord_scheduler.plugins.deviceshare.hints import (
    APPLY_FOR_ALL,
    DEVICE_LEVEL,
    REQUESTS_AS_COUNT,
    SAME_PCIE,
    SCOPE_LEVELS,
    DeviceHint,
    JointAllocate,
    device_hints,
    joint_allocate,
)
from koord_scheduler.plugins.deviceshare.partitions import (
    NodePartitions,
    PartitionFailure,
    PartitionSpec,
    allocate_by_partition,
    partition_spec,
)
from koord_scheduler.plugins.deviceshare.request import DeviceRequest, GPURequest, parse_device_request

Result = dict[str, tuple[DeviceAllocation, ...]]
ERR_JOINT_VIOLATION = "node(s) Device Joint-Allocate rules violation"
ERR_NO_PRIMARY = "node(s) Insufficient primary device"


@dataclass(frozen=True, slots=True)
class Failure:
    """Why the pod's devices do not fit the node; ``unresolvable`` when no change of what pods hold on
    the node could make them fit."""

    reasons: tuple[str, ...]
    unresolvable: bool = False


@dataclass(frozen=True, slots=True)
class PodDevices:
    """What PreFilter found the pod asks for: its request, hints and joint allocation."""

    request: DeviceRequest
    hints: Mapping[str, DeviceHint] = field(default_factory=dict)
    joint: JointAllocate | None = None
    partition_spec: PartitionSpec | None = None
    """``gpu-partition-spec``: the pod's GPUs must form one partition of the node's table."""

    @property
    def simple_gpu(self) -> bool:
        """Only GPUs, no hints, joint allocation or partition spec: feasibility is
        :func:`.allocation.can_allocate` (unless the node honors its partition table)."""
        return (
            self.request.gpu is not None
            and len(self.request.by_type) == 1
            and not self.hints
            and self.partition_spec is None
        )


@dataclass(frozen=True, slots=True)
class _Need:
    per_device: Mapping[str, int]
    count: int


def insufficient(device_type: str) -> str:
    return f"Insufficient {device_type} devices"


def _candidates(
    devices: Sequence[DeviceState], hint: DeviceHint | None, numa: frozenset[int] | None
) -> list[DeviceState]:
    out = []
    for d in devices:
        if numa is not None and d.numa >= 0 and d.numa not in numa:
            continue
        if hint is not None and hint.selector is not None and not label_selector_matches(hint.selector, d.labels):
            continue
        out.append(d)
    return out


def _need(
    device_type: str,
    requests: Mapping[str, int],
    devices: Sequence[DeviceState],
    all_of_type: int,
    hint: DeviceHint | None,
) -> _Need | Failure:
    """``DefaultDeviceHandler.CalcDesiredRequestsAndCount``."""
    if all_of_type == 0:
        return Failure((insufficient(device_type),), unresolvable=True)
    amount = next(iter(requests.values()), 0) if len(requests) == 1 else 0
    name = next(iter(requests), "")
    if amount > 100 and amount % 100 == 0:
        return _Need({name: 100}, amount // 100)
    if hint is not None and hint.allocate_strategy == APPLY_FOR_ALL:
        count = len(devices) if hint.selector is not None else all_of_type
        if count == 0:
            return Failure((insufficient(device_type),), unresolvable=True)
        return _Need(dict(requests), count)
    if hint is not None and hint.allocate_strategy == REQUESTS_AS_COUNT:
        return _Need({name: 100 if hint.exclusive_policy == DEVICE_LEVEL else 1}, amount)
    return _Need(dict(requests), 1)


def _free_vf(device: DeviceState, hint: DeviceHint | None) -> VirtualFunction | None:
    selector = hint.vf_selector if hint is not None else None
    matching = [vf for vf in device.free_vfs if selector is None or label_selector_matches(selector, vf.labels)]
    if not matching:
        return None
    vf = min(matching, key=lambda v: v.bus_id)
    return VirtualFunction(vf.minor, vf.bus_id)


def default_allocate(
    device_type: str,
    need: _Need,
    devices: Sequence[DeviceState],
    scorer: Scorer,
    *,
    max_count: int,
    preferred: frozenset[int] = frozenset(),
    preferred_pcies: frozenset[str] = frozenset(),
    hint: DeviceHint | None = None,
) -> tuple[DeviceAllocation, ...] | Failure:
    """``defaultAllocateDevices`` (see the module docstring)."""
    scored = sorted(devices, key=lambda d: (-scorer.score(need.per_device, d.total, d.free), d.minor))
    if preferred:
        scored.sort(key=lambda d: d.minor not in preferred)
    elif preferred_pcies:
        groups: dict[str, list[DeviceState]] = {}
        rest: list[DeviceState] = []
        for d in scored:
            if d.pcie in preferred_pcies:
                groups.setdefault(d.pcie, []).append(d)
            else:
                rest.append(d)
        rounds: list[DeviceState] = []
        for i in range(max((len(g) for g in groups.values()), default=0)):
            layer = [g[i] for g in groups.values() if i < len(g)]
            layer.sort(key=lambda d: (-scorer.score(need.per_device, d.total, d.free), d.minor))
            rounds.extend(layer)
        scored = rounds + rest
    must_vf = hint is not None and hint.must_allocate_vf
    out: list[DeviceAllocation] = []
    for d in scored:
        if not any(d.free.values()) or not fits(need.per_device, d.free):
            continue
        vfs: tuple[VirtualFunction, ...] = ()
        if must_vf:
            vf = _free_vf(d, hint)
            if vf is None:
                continue
            vfs = (vf,)
        resources = fill_memory(need.per_device, d.total) if device_type == DEVICE_GPU else dict(need.per_device)
        out.append(DeviceAllocation(d.minor, resources, vfs=vfs))
        if len(out) == max_count:
            break
    if len(out) < need.count:
        return Failure((insufficient(device_type),))
    return tuple(out)


def _gpus(
    gpu: GPURequest,
    devices: Sequence[DeviceState],
    scorer: Scorer,
    *,
    hint: DeviceHint | None,
    preferred: frozenset[int],
    partitions: NodePartitions | None = None,
    spec: PartitionSpec | None = None,
) -> tuple[DeviceAllocation, ...] | Failure:
    """``GPUAllocator.Allocate``: by partition (:mod:`.partitions`) when the node has a table or the
    partition must be honored, then by topology when the GPUs report one, else by score. A required
    partition or topology scope that cannot be met fails; otherwise each step falls back to the next."""
    honor = spec is not None or (partitions is not None and partitions.honor)
    index = partitions.index if partitions is not None else None
    if honor or index is not None:
        by_partition = allocate_by_partition(gpu, devices, index, spec)
        if isinstance(by_partition, PartitionFailure):
            if honor:
                return Failure((by_partition.reason,), by_partition.unresolvable)
        elif by_partition is not None:
            by_minor = {d.minor: d for d in devices}
            return tuple(DeviceAllocation(m, fill_memory(gpu.per_gpu, by_minor[m].total)) for m in by_partition)
    required = SCOPE_LEVELS.get(hint.required_topology_scope, 0) if hint is not None else 0
    if not (gpu.shared and gpu.count > 1):
        minors = allocate_by_topology(gpu, devices, scorer, required_level=required)
        if minors is not None:
            by_minor = {d.minor: d for d in devices}
            return tuple(DeviceAllocation(m, fill_memory(gpu.per_gpu, by_minor[m].total)) for m in minors)
        if required and any(d.pcie for d in devices):
            return Failure(("Insufficient Topology Scoped GPU Devices",))
    chosen = allocate_gpus(gpu, devices, scorer, preferred)
    return chosen if chosen is not None else Failure((insufficient(DEVICE_GPU),))


@dataclass(slots=True)
class _Plan:
    candidates: dict[str, list[DeviceState]]
    needs: dict[str, _Need]
    partitions: NodePartitions | None = None


def _prepare(pod: PodDevices, groups: Mapping[str, DeviceGroup], numa: frozenset[int] | None) -> _Plan | Failure:
    candidates: dict[str, list[DeviceState]] = {}
    needs: dict[str, _Need] = {}
    for device_type, requests in pod.request.by_type.items():
        if not any(requests.values()):
            continue
        hint = pod.hints.get(device_type)
        group = groups.get(device_type)
        devices = list(group.devices) if group is not None else []
        candidates[device_type] = _candidates(devices, hint, numa)
        if device_type == DEVICE_GPU:
            gpu = pod.request.gpu
            if gpu is not None:
                needs[device_type] = _Need(gpu.per_gpu, gpu.count)
            continue
        need = _need(device_type, requests, candidates[device_type], len(devices), hint)
        if isinstance(need, Failure):
            return need
        if hint is not None and hint.must_allocate_vf and not any(d.all_vfs for d in devices):
            return Failure((f"Insufficient {device_type} VirtualFunctions",), unresolvable=True)
        needs[device_type] = need
    return _Plan(candidates, needs)


def _one_type(
    pod: PodDevices,
    plan: _Plan,
    device_type: str,
    scorer: Scorer,
    *,
    preferred: Mapping[str, frozenset[int]],
    preferred_pcies: frozenset[str] = frozenset(),
    at_least: int = 0,
) -> tuple[DeviceAllocation, ...] | Failure:
    devices = plan.candidates[device_type]
    hint = pod.hints.get(device_type)
    if device_type == DEVICE_GPU and pod.request.gpu is not None:
        return _gpus(
            pod.request.gpu,
            devices,
            scorer,
            hint=hint,
            preferred=preferred.get(DEVICE_GPU, frozenset()),
            partitions=plan.partitions,
            spec=pod.partition_spec,
        )
    need = plan.needs[device_type]
    if at_least > need.count:
        need = replace(need, count=at_least)
    max_count = max(need.count, len(preferred_pcies), 1)
    if need.count == 0:
        need = replace(need, count=1)
    return default_allocate(
        device_type,
        need,
        devices,
        scorer,
        max_count=max_count,
        preferred=preferred.get(device_type, frozenset()),
        preferred_pcies=preferred_pcies,
        hint=hint,
    )


def _pcies(devices: Sequence[DeviceState], allocations: Sequence[DeviceAllocation]) -> frozenset[str]:
    by_minor = {d.minor: d for d in devices}
    return frozenset(by_minor[a.minor].pcie for a in allocations if a.minor in by_minor and by_minor[a.minor].pcie)


def allocate(
    pod: PodDevices,
    groups: Mapping[str, DeviceGroup],
    scorer: Scorer,
    *,
    preferred: Mapping[str, frozenset[int]] | None = None,
    numa: frozenset[int] | None = None,
    partitions: NodePartitions | None = None,
) -> Result | Failure:
    """The devices of every type the pod asks for on the node (``AutopilotAllocator.Allocate``);
    ``partitions``: the node's GPU partition table and whether it is honored."""
    preferred = preferred or {}
    plan = _prepare(pod, groups, numa)
    if isinstance(plan, Failure):
        return plan
    plan.partitions = partitions
    result: Result = {}
    joint = pod.joint
    if len(plan.needs) > 1 and joint is not None and joint.device_types:
        primary, secondaries = joint.device_types[0], joint.device_types[1:]
        if primary in plan.needs:
            got = _one_type(pod, plan, primary, scorer, preferred=preferred)
            if isinstance(got, Failure):
                return got
            if not got:
                return Failure((ERR_NO_PRIMARY,))
            result[primary] = got
            pcies = _pcies(plan.candidates[primary], got)
            for device_type in secondaries:
                if device_type not in plan.needs:
                    continue
                at_least = len(pcies) if joint.required_scope == SAME_PCIE else 0
                secondary = _one_type(
                    pod, plan, device_type, scorer, preferred=preferred, preferred_pcies=pcies, at_least=at_least
                )
                if isinstance(secondary, Failure):
                    return secondary
                if joint.required_scope == SAME_PCIE and _pcies(plan.candidates[device_type], secondary) != pcies:
                    return Failure((ERR_JOINT_VIOLATION,))
                result[device_type] = secondary
    for device_type in plan.needs:
        if device_type in result:
            continue
        got = _one_type(pod, plan, device_type, scorer, preferred=preferred)
        if isinstance(got, Failure):
            return got
        result[device_type] = got
    if not result:
        return Failure(tuple(insufficient(t) for t in plan.needs))
    return result


def score(pod: PodDevices, groups: Mapping[str, DeviceGroup], scorer: Scorer) -> int:
    """``AutopilotAllocator.score``: the node score of each requested type's per-device request over the
    node's devices of the type, summed."""
    total = 0
    for device_type, requests in pod.request.by_type.items():
        group = groups.get(device_type)
        if group is None or not group.devices or not any(requests.values()):
            continue
        if device_type == DEVICE_GPU and pod.request.gpu is not None:
            per_device: Mapping[str, int] = pod.request.gpu.per_gpu
        else:
            need = _need(device_type, requests, group.devices, len(group.devices), pod.hints.get(device_type))
            if isinstance(need, Failure):
                continue
            per_device = need.per_device
        total += scorer.score(per_device, group.total, group.free)
    return total


def pod_devices(pod: Pod) -> PodDevices | None:
    """What the pod asks of devices (None: nothing). Raises ``DeviceRequestError``, ``HintError`` or
    ``PartitionError`` with Koordinator's message."""
    request = parse_device_request(pod.requests)
    if request is None:
        return None
    hints = device_hints(pod.annotations)
    spec = partition_spec(pod.annotations) if request.gpu is not None else None
    return PodDevices(request, hints, joint_allocate(pod.annotations, request.by_type, hints), spec)
