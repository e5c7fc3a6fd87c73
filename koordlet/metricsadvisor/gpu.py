"""GPUs through NVML: the ``Device`` object and per-GPU usage (Koordinator's ``Accelerators`` gate,
``metricsadvisor/devices/gpu`` and ``statesinformer/impl/states_device_linux.go``).

NVML is reached through the ``nvidia-ml-py`` bindings (``import pynvml``, the ``gpu`` extra). On a node
without them, without the NVIDIA driver, or without GPUs, the reporter says so once and reports nothing;
it never raises into the agent. Tests hand in a fake :class:`NVML`.

Each GPU is reported as Koordinator does: ``type: gpu``, its minor and UUID, ``gpu-core: 100``,
``gpu-memory-ratio: 100``, ``gpu-memory`` = total memory, topology from the PCI bus id (NUMA node from
sysfs when known), a Healthy condition; labels ``node.koordinator.sh/gpu-vendor: nvidia``,
``gpu-model`` (the product name, spaces as dashes) and ``gpu-driver-version``.

GPUs linked by NVLink (NVML's peer-to-peer NVLink status of each pair) become GPU partitions, the way
Koordinator reports the P2P links of XPU devices (``getPartitionTableFromXPUDevices``): each GPU with NVLink
peers gives the partition of itself and its peers (duplicates once), by size, in the annotation
``scheduling.koordinator.sh/gpu-partitions``, with the label ``node.koordinator.sh/gpu-partition-policy:
Prefer`` (the scheduler takes a partition when one fits). Koordinator's own NVML path reports none.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry, Gauge

log = logging.getLogger(__name__)

GROUP, VERSION = "scheduling.koordinator.sh", "v1alpha1"
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION = "node.koordinator.sh/gpu-driver-version"


@dataclass(frozen=True, slots=True)
class GPUInfo:
    minor: int
    uuid: str
    name: str
    memory_total: int
    memory_used: int
    utilization: int
    """Percent of the last sample period the GPU was busy (NVML ``utilization.gpu``)."""
    bus_id: str = ""
    numa_node: int = -1


class NVML(Protocol):
    """The NVML calls the reporter makes (the real one wraps ``pynvml``)."""

    def driver_version(self) -> str: ...
    def gpus(self) -> list[GPUInfo]: ...


@runtime_checkable
class NVLinkTopology(Protocol):
    """Optional, on an NVML: which GPUs each GPU reaches over NVLink."""

    def nvlink_peers(self) -> dict[int, frozenset[int]]:
        """Minor → minors it has an NVLink peer-to-peer path to (empty without NVLink)."""
        ...


class NVMLUnavailableError(RuntimeError):
    """NVML cannot be used on this node; the message says why."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PyNVML:
    """NVML through ``pynvml``. Construction initialises NVML or raises :class:`NVMLUnavailableError`."""

    def __init__(self, sysfs: Path = Path("/sys")) -> None:
        try:
            self._nv: Any = importlib.import_module("pynvml")
        except ImportError:
            raise NVMLUnavailableError("the nvidia-ml-py package (pynvml) is not installed") from None
        try:
            self._nv.nvmlInit()
        except Exception as err:  # NVMLError_LibraryNotFound, DriverNotLoaded...
            raise NVMLUnavailableError(f"NVML did not initialise: {err}") from None
        self._sysfs = sysfs

    def driver_version(self) -> str:
        return _text(self._nv.nvmlSystemGetDriverVersion())

    def gpus(self) -> list[GPUInfo]:
        nv = self._nv
        out: list[GPUInfo] = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            memory = nv.nvmlDeviceGetMemoryInfo(h)
            bus_id = _text(nv.nvmlDeviceGetPciInfo(h).busId).lower()
            out.append(
                GPUInfo(
                    minor=int(nv.nvmlDeviceGetMinorNumber(h)),
                    uuid=_text(nv.nvmlDeviceGetUUID(h)),
                    name=_text(nv.nvmlDeviceGetName(h)),
                    memory_total=int(memory.total),
                    memory_used=int(memory.used),
                    utilization=int(nv.nvmlDeviceGetUtilizationRates(h).gpu),
                    bus_id=bus_id,
                    numa_node=self._numa_node(bus_id),
                )
            )
        return out

    def nvlink_peers(self) -> dict[int, frozenset[int]]:
        """``nvmlDeviceGetP2PStatus(a, b, NVML_P2P_CAPS_INDEX_NVLINK)`` for every pair; {} when this NVML
        cannot tell."""
        nv = self._nv
        try:
            handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
            minors = [int(nv.nvmlDeviceGetMinorNumber(h)) for h in handles]
            index, ok = nv.NVML_P2P_CAPS_INDEX_NVLINK, nv.NVML_P2P_STATUS_OK
            peers: dict[int, set[int]] = {}
            for a in range(len(handles)):
                for b in range(a + 1, len(handles)):
                    if nv.nvmlDeviceGetP2PStatus(handles[a], handles[b], index) == ok:
                        peers.setdefault(minors[a], set()).add(minors[b])
                        peers.setdefault(minors[b], set()).add(minors[a])
        except Exception:  # an older driver or binding without P2P status: no partitions
            return {}
        return {m: frozenset(p) for m, p in peers.items()}

    def _numa_node(self, bus_id: str) -> int:
        short = bus_id[-12:] if len(bus_id) > 12 else bus_id
        try:
            return int((self._sysfs / "bus" / "pci" / "devices" / short / "numa_node").read_text().strip())
        except (OSError, ValueError):
            return -1


def _binary(amount: int) -> str:
    for suffix, unit in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


LABEL_GPU_PARTITION_POLICY = "node.koordinator.sh/gpu-partition-policy"
ANNOTATION_GPU_PARTITIONS = "scheduling.koordinator.sh/gpu-partitions"


def nvlink_partitions(peers: Mapping[int, frozenset[int]]) -> dict[str, list[dict[str, Any]]]:
    """The partition table of NVLink-linked GPUs (see the module docstring), keyed by size as text."""
    seen: set[tuple[int, ...]] = set()
    table: dict[str, list[dict[str, Any]]] = {}
    for minor in sorted(peers):
        if not peers[minor]:
            continue
        group = tuple(sorted({minor, *peers[minor]}))
        if group in seen:
            continue
        seen.add(group)
        table.setdefault(str(len(group)), []).append(
            {"minors": list(group), "gpuLinkType": "NVLink", "allocationScore": 1}
        )
    return table


def build_device(
    node_name: str,
    gpus: Sequence[GPUInfo],
    driver_version: str,
    now: float,
    nvlinks: Mapping[int, frozenset[int]] | None = None,
) -> dict[str, Any]:
    """The ``Device`` object koordlet reports for ``gpus`` (pure); ``nvlinks``: NVLink peers per minor."""
    stamp = datetime.fromtimestamp(int(now), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = {LABEL_GPU_VENDOR: "nvidia"}
    if gpus:
        labels[LABEL_GPU_MODEL] = gpus[0].name.replace(" ", "-")
    if driver_version:
        labels[LABEL_GPU_DRIVER_VERSION] = driver_version
    devices: list[dict[str, Any]] = []
    for g in sorted(gpus, key=lambda g: g.minor):
        info: dict[str, Any] = {
            "type": "gpu",
            "id": g.uuid,
            "minor": g.minor,
            "health": True,
            "resources": {
                "koordinator.sh/gpu-core": "100",
                "koordinator.sh/gpu-memory": _binary(g.memory_total),
                "koordinator.sh/gpu-memory-ratio": "100",
            },
            "conditions": [
                {
                    "type": "Healthy",
                    "status": "True",
                    "reason": "DeviceHealthy",
                    "message": "device is healthy",
                    "lastTransitionTime": stamp,
                }
            ],
        }
        if g.bus_id and g.numa_node >= 0:
            info["topology"] = {
                "socketID": -1,
                "nodeID": g.numa_node,
                "pcieID": _pcie_root(g.bus_id),
                "busID": g.bus_id,
            }
        devices.append(info)
    metadata: dict[str, Any] = {"name": node_name, "labels": labels}
    partitions = nvlink_partitions(nvlinks or {})
    if partitions:
        labels[LABEL_GPU_PARTITION_POLICY] = "Prefer"
        metadata["annotations"] = {ANNOTATION_GPU_PARTITIONS: json.dumps(partitions, separators=(",", ":"))}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Device", "metadata": metadata, "spec": {"devices": devices}}


def _pcie_root(bus_id: str) -> str:
    """``pci<domain>:<bus>`` of the root the device hangs off, as far as the bus id tells."""
    parts = bus_id.split(":")
    return f"pci{parts[0][-4:]}:{parts[1]}" if len(parts) >= 2 else ""


class DeviceWriter(Protocol):
    def write(self, device: dict[str, Any]) -> None: ...


class GPUReporter:
    """Reads GPUs every interval, exports usage gauges and writes the node's Device (when a writer is set).

    ``extra_devices`` (the ``RDMADevices`` gate's RDMA NICs) are appended to the same Device object, so
    one writer owns ``spec.devices``; with ``nvml_factory`` None only they are reported."""

    def __init__(
        self,
        node_name: str,
        registry: CollectorRegistry,
        *,
        nvml_factory: Callable[[], NVML] | None = PyNVML,
        writer: DeviceWriter | None = None,
        clock: Callable[[], float],
        extra_devices: Callable[[], list[dict[str, Any]]] | None = None,
    ) -> None:
        self.node_name = node_name
        self.writer = writer
        self._factory = nvml_factory
        self._extra = extra_devices
        self._nvml: NVML | None = None
        self._clock = clock
        self.unavailable = ""
        """Why nothing is reported (logged once); empty while GPUs are reported."""
        self.last_device: dict[str, Any] | None = None
        labels = ["node", "minor", "uuid"]
        self.core_usage = Gauge(
            "koordlet_gpu_core_usage_ratio",
            "GPU compute busy percent (NVML utilization.gpu).",
            labels,
            registry=registry,
        )
        self.memory_used = Gauge("koordlet_gpu_memory_used_bytes", "GPU memory in use.", labels, registry=registry)
        self.memory_total = Gauge("koordlet_gpu_memory_total_bytes", "GPU memory in total.", labels, registry=registry)

    def _unavailable(self, reason: str) -> None:
        if reason != self.unavailable:
            log.warning("Accelerators: not reporting GPUs on node %s: %s", self.node_name, reason)
        self.unavailable = reason

    def _gpus(self) -> tuple[list[GPUInfo], str]:
        """The GPUs and driver version, or ``([], "")`` when NVML cannot be used (logged once)."""
        if self._factory is None:
            return [], ""
        try:
            if self._nvml is None:
                self._nvml = self._factory()
            gpus = self._nvml.gpus()
            driver = self._nvml.driver_version()
        except NVMLUnavailableError as err:
            self._unavailable(str(err))
            return [], ""
        except Exception as err:  # an NVML call failing mid-way must not stop the agent
            self._nvml = None
            self._unavailable(f"NVML query failed: {err}")
            return [], ""
        if not gpus:
            self._unavailable("no GPUs found by NVML")
            return [], ""
        self.unavailable = ""
        for g in gpus:
            key = (self.node_name, str(g.minor), g.uuid)
            self.core_usage.labels(*key).set(g.utilization)
            self.memory_used.labels(*key).set(g.memory_used)
            self.memory_total.labels(*key).set(g.memory_total)
        return gpus, driver

    def tick(self) -> dict[str, Any] | None:
        """One report; the Device object written, or None when there is nothing to report."""
        gpus, driver = self._gpus()
        extra: list[dict[str, Any]] = []
        if self._extra is not None:
            try:
                extra = self._extra()
            except Exception as err:  # a sysfs read failing mid-way must not stop the agent
                log.warning("Device report on node %s: reading extra devices failed: %s", self.node_name, err)
        if not gpus and not extra:
            return None
        links = self._nvml.nvlink_peers() if gpus and isinstance(self._nvml, NVLinkTopology) else None
        device = build_device(self.node_name, gpus, driver, self._clock(), links)
        if not gpus:
            device["metadata"]["labels"] = {}
        device["spec"]["devices"].extend(extra)
        if device != self.last_device and self.writer is not None:
            try:
                self.writer.write(device)
            except Exception as err:
                log.warning("Accelerators: writing Device %s failed: %s", self.node_name, err)
                return None
        self.last_device = device
        return device

    async def run(self, stop: asyncio.Event, *, interval: float) -> None:
        while not stop.is_set():
            await asyncio.to_thread(self.tick)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
