"""Koordinator's device resource names and the allocation annotation (``apis/extension/device_share.go``).

Pods ask for GPUs with ``koordinator.sh/gpu-core`` (percent of one GPU's compute), ``gpu-memory`` (bytes),
``gpu-memory-ratio`` (percent of one GPU's memory), ``koordinator.sh/gpu`` (core and memory ratio
together, percent), or whole GPUs with ``nvidia.com/gpu``. The deprecated ``kubernetes.io/gpu*`` names
are read as their ``koordinator.sh/`` equivalents (Koordinator's pod transformer does the same).

The scheduler writes the chosen devices to ``scheduling.koordinator.sh/device-allocated``:
``{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "50", ...}}]}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from apis.core import boundedjson
from apis.core.parse import DEPRECATED_DEVICE_RESOURCES
from apis.core.quantity import value as quantity_value

DOMAIN = "koordinator.sh/"

RESOURCE_GPU = DOMAIN + "gpu"
RESOURCE_GPU_SHARED = DOMAIN + "gpu.shared"
RESOURCE_GPU_CORE = DOMAIN + "gpu-core"
RESOURCE_GPU_MEMORY = DOMAIN + "gpu-memory"
RESOURCE_GPU_MEMORY_RATIO = DOMAIN + "gpu-memory-ratio"
RESOURCE_RDMA = DOMAIN + "rdma"
RESOURCE_FPGA = DOMAIN + "fpga"
RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_AMD_GPU = "amd.com/gpu"
RESOURCE_HYGON_DCU = "dcu.com/gpu"
RESOURCE_HUAWEI_NPU_CORE = "huawei.com/npu-core"
RESOURCE_HUAWEI_NPU_CPU = "huawei.com/npu-cpu"
RESOURCE_HUAWEI_NPU_DVPP = "huawei.com/npu-dvpp"


DEVICE_GPU = "gpu"
DEVICE_RDMA = "rdma"
DEVICE_FPGA = "fpga"
DEVICE_NPU = "npu"
DEVICE_XPU = "xpu"
DEVICE_TYPES = (DEVICE_GPU, DEVICE_RDMA, DEVICE_FPGA, DEVICE_NPU, DEVICE_XPU)

GPU_RESOURCES = (
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
)
DEVICE_RESOURCE_NAMES: Mapping[str, tuple[str, ...]] = {
    DEVICE_GPU: GPU_RESOURCES,
    DEVICE_RDMA: (RESOURCE_RDMA,),
    DEVICE_FPGA: (RESOURCE_FPGA,),
}
"""Which pod resources belong to which device type (Koordinator ``DeviceResourceNames``)."""

ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION = "node.koordinator.sh/gpu-driver-version"
GPU_VENDOR_NVIDIA = "nvidia"

NODE_GPU_RESOURCES = (RESOURCE_GPU, RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO)
"""What the node's status carries for its healthy GPUs (Koordinator's gpudeviceresource calculator)."""


def canonical_device_resource(name: str) -> str:
    """The current name of a device resource (deprecated names mapped; others unchanged)."""
    return DEPRECATED_DEVICE_RESOURCES.get(name, name)


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    """A virtual function of a device given to a pod (``extension.vfs[]``: minor and PCI bus id)."""

    minor: int
    bus_id: str


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """One device given to a pod: its minor, what of it the pod holds (plain integers), optional id, and
    the virtual functions it got of the device (RDMA VFs)."""

    minor: int
    resources: Mapping[str, int] = field(default_factory=dict)
    id: str = ""
    vfs: tuple[VirtualFunction, ...] = ()
    template: str = ""
    """The GPU shared resource template the allocation follows (``extension.gpuSharedResourceTemplate``)."""


DeviceAllocations = Mapping[str, Sequence[DeviceAllocation]]
"""Device type (``gpu``, ``rdma``...) → allocations, in the annotation's order."""

_BINARY = frozenset({RESOURCE_GPU_MEMORY})


_BINARY_UNITS = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))


def format_device_quantity(name: str, amount: int) -> str:
    """A device amount as Koordinator writes it: gpu-memory with a binary suffix, others plain."""
    if name in _BINARY and amount:
        for suffix, unit in _BINARY_UNITS:
            if amount % unit == 0:
                return f"{amount // unit}{suffix}"
    return str(amount)


def encode_device_allocations(allocations: DeviceAllocations) -> str:
    """The annotation value, Koordinator's JSON shape (quantities as strings, ``id`` omitted when empty)."""
    out: dict[str, list[dict[str, object]]] = {}
    for device_type, items in allocations.items():
        rows: list[dict[str, object]] = []
        for a in items:
            row: dict[str, object] = {
                "minor": a.minor,
                "resources": {k: format_device_quantity(k, v) for k, v in sorted(a.resources.items())},
            }
            if a.id:
                row["id"] = a.id
            extension: dict[str, object] = {}
            if a.vfs:
                # Go's omitempty: a VF of minor 0 has no "minor" key.
                extension["vfs"] = [{**({"minor": vf.minor} if vf.minor else {}), "busID": vf.bus_id} for vf in a.vfs]
            if a.template:
                extension["gpuSharedResourceTemplate"] = a.template
            if extension:
                row["extension"] = extension
            rows.append(row)
        out[device_type] = rows
    return json.dumps(out, separators=(",", ":"))


def decode_device_allocations(text: str) -> dict[str, list[DeviceAllocation]]:
    """Parse the annotation; raises ``ValueError`` naming what is wrong."""
    try:
        raw = boundedjson.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: expected an object of device types")
    out: dict[str, list[DeviceAllocation]] = {}
    for device_type, items in raw.items():
        if not isinstance(items, list):
            raise ValueError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: {device_type!r} must be a list")
        rows: list[DeviceAllocation] = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("minor", 0), int):
                raise ValueError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: bad entry in {device_type!r}")
            resources = item.get("resources") or {}
            if not isinstance(resources, dict):
                raise ValueError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: bad resources in {device_type!r}")
            rows.append(
                DeviceAllocation(
                    minor=int(item.get("minor", 0)),
                    resources={canonical_device_resource(k): device_quantity(v) for k, v in resources.items()},
                    id=str(item.get("id", "")),
                    vfs=_decode_vfs(item.get("extension"), device_type),
                    template=_decode_template(item.get("extension"), device_type),
                )
            )
        out[device_type] = rows
    return out


def _decode_vfs(extension: object, device_type: str) -> tuple[VirtualFunction, ...]:
    if extension is None:
        return ()
    vfs = extension.get("vfs") if isinstance(extension, dict) else None
    if not isinstance(extension, dict) or not isinstance(vfs, list | None):
        raise ValueError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: bad extension in {device_type!r}")
    out: list[VirtualFunction] = []
    for vf in vfs or []:
        if (
            not isinstance(vf, dict)
            or not isinstance(vf.get("minor", 0), int)
            or not isinstance(vf.get("busID", ""), str)
        ):
            raise ValueError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: bad extension.vfs entry in {device_type!r}")
        out.append(VirtualFunction(minor=int(vf.get("minor", 0)), bus_id=str(vf.get("busID", ""))))
    return tuple(out)


def _decode_template(extension: object, device_type: str) -> str:
    template = extension.get("gpuSharedResourceTemplate", "") if isinstance(extension, dict) else ""
    if not isinstance(template, str):
        raise ValueError(
            f"annotation {ANNOTATION_DEVICE_ALLOCATED}: bad extension.gpuSharedResourceTemplate in {device_type!r}"
        )
    return template


def device_quantity(value: object) -> int:
    """A device quantity as a plain integer (``"16Gi"`` → 17179869184, ``"50"`` → 50)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: bad quantity {value!r}")
    return quantity_value(value)
