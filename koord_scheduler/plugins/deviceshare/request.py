"""What a pod asks of devices: Koordinator's validation and conversion (``deviceshare/utils.go``,
``devicehandler_gpu.go``), as pure functions.

A pod's device resources are grouped by device type. Each group must be one of Koordinator's valid
combinations, else the pod is unschedulable with ``invalid resource device requests: [names]`` (or
``invalid resource unit NAME: VALUE`` for a percentage that is above 100 and not a multiple of 100):

======================================  =========================================================
request                                 converted to (per pod)
======================================  =========================================================
``nvidia.com/gpu: n`` (amd, dcu alike)  ``gpu-core: 100n``, ``gpu-memory-ratio: 100n``
``koordinator.sh/gpu: p``               ``gpu-core: p``, ``gpu-memory-ratio: p``
``gpu-core`` + ``gpu-memory-ratio``     as given (each ≤100 or a multiple of 100)
``gpu-core`` + ``gpu-memory``           as given
``gpu-memory-ratio`` or ``gpu-memory``  as given (no compute share)
``gpu.shared: n`` + memory (+ core)     as given; n GPUs, each getting 1/n
``koordinator.sh/rdma`` / ``fpga``      as given (kept; not allocated by this scheduler)
======================================  =========================================================

``gpu-core`` alone is not a valid combination in Koordinator. The GPU count is ``gpu.shared`` when
given, else ``gpu-memory-ratio / 100`` when that is a multiple of 100 above 100, else 1; each GPU gets
the per-pod amounts divided by the count. The request is *shared* when a GPU gets less than 100% of its
memory (or memory is asked in bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.extension.device import (
    DEVICE_FPGA,
    DEVICE_GPU,
    DEVICE_RDMA,
    RESOURCE_AMD_GPU,
    RESOURCE_FPGA,
    RESOURCE_GPU,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_GPU_SHARED,
    RESOURCE_HUAWEI_NPU_CORE,
    RESOURCE_HUAWEI_NPU_CPU,
    RESOURCE_HUAWEI_NPU_DVPP,
    RESOURCE_HYGON_DCU,
    RESOURCE_NVIDIA_GPU,
    RESOURCE_RDMA,
)

_GROUPS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        DEVICE_GPU,
        frozenset(
            {
                RESOURCE_NVIDIA_GPU,
                RESOURCE_AMD_GPU,
                RESOURCE_HYGON_DCU,
                RESOURCE_GPU,
                RESOURCE_GPU_SHARED,
                RESOURCE_GPU_CORE,
                RESOURCE_GPU_MEMORY,
                RESOURCE_GPU_MEMORY_RATIO,
                RESOURCE_HUAWEI_NPU_CORE,
                RESOURCE_HUAWEI_NPU_CPU,
                RESOURCE_HUAWEI_NPU_DVPP,
            }
        ),
    ),
    (DEVICE_RDMA, frozenset({RESOURCE_RDMA})),
    (DEVICE_FPGA, frozenset({RESOURCE_FPGA})),
)
DEVICE_RESOURCES = frozenset().union(*(names for _, names in _GROUPS))
"""Every pod resource name that makes DeviceShare look at a pod."""

_WHOLE = frozenset({RESOURCE_NVIDIA_GPU, RESOURCE_AMD_GPU, RESOURCE_HYGON_DCU})
_PERCENT_COMBINATIONS = (
    frozenset({RESOURCE_GPU_MEMORY}),
    frozenset({RESOURCE_GPU_MEMORY_RATIO}),
    frozenset({RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY}),
    frozenset({RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY_RATIO}),
    frozenset({RESOURCE_HUAWEI_NPU_CORE, RESOURCE_GPU_MEMORY_RATIO}),
)
_SHARED_COMBINATIONS = (
    frozenset({RESOURCE_GPU_SHARED, RESOURCE_GPU_MEMORY}),
    frozenset({RESOURCE_GPU_SHARED, RESOURCE_GPU_MEMORY_RATIO}),
    frozenset({RESOURCE_GPU_SHARED, RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY}),
    frozenset({RESOURCE_GPU_SHARED, RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY_RATIO}),
)
_NPU_SHARED = (
    frozenset({RESOURCE_GPU_SHARED, RESOURCE_HUAWEI_NPU_CORE, RESOURCE_HUAWEI_NPU_CPU, RESOURCE_GPU_MEMORY}),
    frozenset(
        {
            RESOURCE_GPU_SHARED,
            RESOURCE_HUAWEI_NPU_CORE,
            RESOURCE_HUAWEI_NPU_CPU,
            RESOURCE_HUAWEI_NPU_DVPP,
            RESOURCE_GPU_MEMORY,
        }
    ),
)
_PERCENT_UNITS = frozenset({RESOURCE_GPU, RESOURCE_FPGA, RESOURCE_RDMA})


class DeviceRequestError(ValueError):
    """A request Koordinator refuses; the message is Koordinator's."""


@dataclass(frozen=True, slots=True)
class GPURequest:
    """What each of ``count`` GPUs must give the pod."""

    per_gpu: Mapping[str, int]
    count: int
    shared: bool


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A pod's converted device requests by type, and its GPU requirement (None without GPUs)."""

    by_type: Mapping[str, Mapping[str, int]]
    gpu: GPURequest | None

    @property
    def other_types(self) -> tuple[str, ...]:
        """Requested device types other than GPU, sorted."""
        return tuple(sorted(t for t in self.by_type if t != DEVICE_GPU))


def _names(request: Mapping[str, int]) -> str:
    return "[" + " ".join(sorted(request)) + "]"


def _percentage_ok(value: int) -> bool:
    return not (value > 100 and value % 100 != 0)


def _shared_ok(request: Mapping[str, int]) -> bool:
    shared = request[RESOURCE_GPU_SHARED]
    for name in (RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY_RATIO):
        if name in request and (request[name] % shared != 0 or request[name] // shared > 100):
            return False
    return True


def _valid(names: frozenset[str], request: Mapping[str, int]) -> bool:
    if len(names) == 1 and (names <= _WHOLE or names == {RESOURCE_GPU} or names <= {RESOURCE_RDMA, RESOURCE_FPGA}):
        return True
    if names in _PERCENT_COMBINATIONS:
        return all(_percentage_ok(request[n]) for n in (RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY_RATIO) if n in request)
    if names in _SHARED_COMBINATIONS:
        return _shared_ok(request)
    if names in _NPU_SHARED:
        return request[RESOURCE_GPU_SHARED] <= 1 and request.get(RESOURCE_HUAWEI_NPU_DVPP, 0) <= 100
    return False


def _convert(names: frozenset[str], request: Mapping[str, int]) -> dict[str, int]:
    if names <= _WHOLE:
        n = request[next(iter(names))]
        return {RESOURCE_GPU_CORE: n * 100, RESOURCE_GPU_MEMORY_RATIO: n * 100}
    if names == {RESOURCE_GPU}:
        return {RESOURCE_GPU_CORE: request[RESOURCE_GPU], RESOURCE_GPU_MEMORY_RATIO: request[RESOURCE_GPU]}
    return dict(request)


def gpu_requirement(converted: Mapping[str, int]) -> GPURequest:
    """Per-GPU amounts, GPU count and whether the GPU is shared (Koordinator's
    ``calcDesiredRequestsAndCountForGPU``)."""
    count = 1
    shared_n = converted.get(RESOURCE_GPU_SHARED, 0)
    ratio = converted.get(RESOURCE_GPU_MEMORY_RATIO)
    if shared_n > 0:
        count = shared_n
    elif ratio is not None and ratio > 100 and ratio % 100 == 0:
        count = ratio // 100
    per: dict[str, int] = {}
    for name in (RESOURCE_GPU_CORE, RESOURCE_HUAWEI_NPU_CORE, RESOURCE_HUAWEI_NPU_CPU, RESOURCE_HUAWEI_NPU_DVPP):
        if name in converted:
            per[name] = converted[name] // count
    shared = False
    if ratio is not None:
        per[RESOURCE_GPU_MEMORY_RATIO] = ratio // count
        shared = per[RESOURCE_GPU_MEMORY_RATIO] < 100
    elif RESOURCE_GPU_MEMORY in converted:
        shared = True
        per[RESOURCE_GPU_MEMORY] = converted[RESOURCE_GPU_MEMORY] // count
    return GPURequest(per_gpu=per, count=count, shared=shared)


def parse_device_request(requests: Mapping[str, int]) -> DeviceRequest | None:
    """The pod's device request, None when it asks for no device. Raises :class:`DeviceRequestError`."""
    if not DEVICE_RESOURCES.intersection(requests):
        return None
    by_type: dict[str, dict[str, int]] = {}
    for device_type, members in _GROUPS:
        group = {n: v for n, v in requests.items() if n in members and v != 0}
        if not group:
            continue
        for name, v in sorted(group.items()):
            if name in _PERCENT_UNITS and not _percentage_ok(v):
                raise DeviceRequestError(f"invalid resource unit {name}: {v}")
        names = frozenset(group)
        if not _valid(names, group):
            raise DeviceRequestError(f"invalid resource device requests: {_names(group)}")
        by_type[device_type] = _convert(names, group)
    if not by_type:
        return None
    gpu = gpu_requirement(by_type[DEVICE_GPU]) if DEVICE_GPU in by_type else None
    return DeviceRequest(by_type=by_type, gpu=gpu)
