"""The ``deviceresource`` controller: each node's GPU and RDMA resources and GPU labels kept in step with
its ``Device`` object, on the leader only.

Koordinator does this in koord-manager's noderesource controller, with its GPUDeviceResource plugin
(Koordinator pkg/slo-controller/noderesource/plugins/gpudeviceresource). The rules are that plugin's:

- the healthy devices of type ``gpu`` are summed: ``koordinator.sh/gpu-core``, ``gpu-memory``,
  ``gpu-memory-ratio`` and the Huawei NPU resources (``huawei.com/npu-core``, ``npu-cpu``, ``npu-dvpp``)
  each as the devices report them; ``koordinator.sh/gpu`` is the sum of ``gpu-core`` when the Device's
  ``node.koordinator.sh/gpu-vendor`` label is ``nvidia`` or absent. Each summed resource is written to
  the Node's ``status.capacity`` and ``status.allocatable``; one the devices do not report is left as
  it is on the Node;
- without a Device object, or with no healthy GPU in it, every one of those resources (and
  ``koordinator.sh/gpu.shared``) is removed from the Node;
- the Device's ``node.koordinator.sh/gpu-vendor``, ``gpu-model`` and ``gpu-driver-version`` labels are
  copied onto the Node (never removed);
- ``koordinator.sh/rdma`` is 100 per healthy device of type ``rdma`` (Koordinator's RDMADeviceResource
  plugin, ``pkg/slo-controller/noderesource/plugins/rdmadevicereource``), removed from the Node when the
  Device object is gone or has no healthy RDMA device. The GPU and RDMA rules are independent.

Nothing else is written: not ``kubernetes.io/gpu`` or ``nvidia.com/gpu`` (a device plugin's), and not
``koordinator.sh/gpu.shared``, which Koordinator writes only under its ``EnableSyncGPUSharedResource``
gate (off by default). Two differences, both on purpose: Koordinator's noderesource controller does
nothing for a node while colocation is disabled for it in ``slo-controller-config`` (the chart enables
it), and it holds back a resource change under ``resourceDiffThreshold`` until ``updateTimeThresholdSeconds``
passed; here every change of the Device is written when it happens, whatever the colocation settings.

It reads the scheduler's Node watch and a Device watch. Events mark a node dirty; :meth:`run` decides
(:func:`device_resources`, :func:`decide_node`, pure) and sends a merge PATCH of the Node's status and,
for labels, of the Node. A write that would change nothing is never sent. A failed write is retried after
``retry_seconds``, except one the API server refuses for good (422 Invalid: a capacity it will never
accept): that is reported once, naming the node and the field, and not sent again until the Node or its
Device changes what would be written (:mod:`.containment`). A node whose decision raises costs that node
only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apis.core.frozendict import FrozenDict
from apis.core.paths import api_path
from apis.core.quantity import value as quantity_value
from apis.core.types import Node, Pod
from apis.scheduling.device import DEVICE_KIND, NodeDeviceRecord
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.controllers.api import ControllerApi
from koord_scheduler.scheduler.controllers.containment import Containment, permanent
from koord_scheduler.scheduler.controllers.decide import MERGE_PATCH, Write
from koord_scheduler.scheduler.controllers.loop import CallLater, ReconcileLoop
from koord_scheduler.scheduler.controllers.selection import DEVICERESOURCE
from koord_scheduler.scheduler.object_errors import ObjectErrors
from kubeapi import jsoncodec

log = logging.getLogger(__name__)

GPU = "koordinator.sh/gpu"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
GPU_SHARED = "koordinator.sh/gpu.shared"
SUMMED_RESOURCES = (
    GPU_CORE,
    "huawei.com/npu-core",
    "huawei.com/npu-cpu",
    "huawei.com/npu-dvpp",
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
)
"""Summed over the healthy GPUs, as each device reports them."""
NODE_RESOURCES = (GPU, *SUMMED_RESOURCES, GPU_SHARED)
"""Every GPU resource the controller owns on a Node (all removed when the node has no healthy GPU)."""
RDMA = "koordinator.sh/rdma"
RDMA_PER_DEVICE = 100
DEVICE_TYPE_RDMA = "rdma"
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION = "node.koordinator.sh/gpu-driver-version"
GPU_LABELS = (LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION)
VENDOR_NVIDIA = "nvidia"
DEVICE_TYPE_GPU = "gpu"
_BINARY_SUFFIXES = (
    ("Ei", 1 << 60),
    ("Pi", 1 << 50),
    ("Ti", 1 << 40),
    ("Gi", 1 << 30),
    ("Mi", 1 << 20),
    ("Ki", 1 << 10),
)


@dataclass(frozen=True, slots=True)
class DeviceResources:
    """What a node should carry: ``resources`` (None: remove the resource) and labels to set."""

    resources: Mapping[str, int | None]
    labels: Mapping[str, str]


def device_resources(device: NodeDeviceRecord | None) -> DeviceResources:
    """The node resources and labels its Device object gives (see the module docstring)."""
    gpu = _gpu_resources(device)
    rdma = sum(1 for d in device.devices if d.type == DEVICE_TYPE_RDMA and d.health) if device is not None else 0
    resources = {**gpu.resources, RDMA: rdma * RDMA_PER_DEVICE if rdma else None}
    return DeviceResources(resources, gpu.labels)


def _gpu_resources(device: NodeDeviceRecord | None) -> DeviceResources:
    gpus = [d for d in device.devices if d.type == DEVICE_TYPE_GPU and d.health] if device is not None else []
    if device is None or not gpus:
        return DeviceResources(dict.fromkeys(NODE_RESOURCES), {})
    sums: dict[str, int | None] = {}
    for gpu in gpus:
        for name in SUMMED_RESOURCES:
            if name in gpu.resources:
                sums[name] = (sums.get(name) or 0) + gpu.resources[name]
    vendor = device.labels.get(LABEL_GPU_VENDOR, "")
    if vendor in ("", VENDOR_NVIDIA):
        sums[GPU] = sum(gpu.resources.get(GPU_CORE, 0) for gpu in gpus)
    labels = {label: device.labels[label] for label in GPU_LABELS if label in device.labels}
    return DeviceResources(sums, labels)


def format_amount(resource: str, amount: int) -> str:
    """``gpu-memory`` with the largest binary suffix that divides it (``"32Gi"``); others as integers."""
    if resource == GPU_MEMORY and amount > 0:
        for suffix, unit in _BINARY_SUFFIXES:
            if amount % unit == 0:
                return f"{amount // unit}{suffix}"
    return str(amount)


def decide_node(node: Node, want: DeviceResources) -> list[Write]:
    """The writes that bring ``node`` to ``want``: a status merge PATCH for the resources that differ
    (in capacity or allocatable), a merge PATCH of the Node for the labels that differ."""
    values: dict[str, str | None] = {}
    for name, amount in want.resources.items():
        have = (node.capacity.get(name), node.allocatable.get(name))
        if amount is None and have != (None, None):
            values[name] = None
        elif amount is not None and have != (amount, amount):
            values[name] = format_amount(name, amount)
    labels = {k: v for k, v in want.labels.items() if node.labels.get(k) != v}
    writes = []
    if values:
        note = ", ".join(f"{k}={'(removed)' if v is None else v}" for k, v in sorted(values.items()))
        body = {"status": {"capacity": values, "allocatable": values}}
        path = api_path("", "v1", "nodes", name=node.name, subresource="status")
        writes.append(Write(DEVICERESOURCE, node.name, "PATCH", path, body, MERGE_PATCH, note))
    if labels:
        note = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))
        writes.append(
            Write(
                DEVICERESOURCE,
                node.name,
                "PATCH",
                api_path("", "v1", "nodes", name=node.name),
                {"metadata": {"labels": labels}},
                MERGE_PATCH,
                note,
            )
        )
    return writes


class DeviceResourceController:
    """See the module docstring. Event methods run on the event-loop thread (the informers' handlers)."""

    def __init__(
        self,
        api: ControllerApi,
        *,
        ready: Callable[[], bool] = lambda: True,
        retry_seconds: float = 5.0,
        object_errors: ObjectErrors | None = None,
        call_later: CallLater | None = None,
    ) -> None:
        """``call_later(seconds, fn)`` schedules a retry (default: the running loop's; tests pass a fake)."""
        self.api = api
        self.contained = Containment(DEVICERESOURCE, object_errors)
        self.refused: dict[tuple[str, str], bytes] = {}
        """(node, path) -> the body the API server refused for good: not sent again while it is the same."""
        self.ready = ready
        """The Device kind has been listed; nothing is decided before."""
        self.retry_seconds = retry_seconds
        self.call_later = call_later
        self.nodes: dict[str, Node] = {}
        self.devices: dict[str, NodeDeviceRecord] = {}
        self.dirty: set[str] = set()
        self.writes = 0
        self.loop = ReconcileLoop(DEVICERESOURCE, waiting_for="Device objects")

    # ----- informer events -----

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        if new is None:
            if old is not None:
                self.nodes.pop(old.name, None)
            return
        self.nodes[new.name] = new
        self._mark(new.name)

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        return None

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if kind != DEVICE_KIND:
            return
        record: NodeDeviceRecord = new if new is not None else old
        if event == EventType.DELETED or new is None:
            self.devices.pop(record.name, None)
        else:
            self.devices[record.name] = record
        self._mark(record.name)

    def _mark(self, name: str) -> None:
        self.dirty.add(name)
        self.loop.wake()

    # ----- reconcile -----

    def decisions(self) -> list[Write]:
        """The writes for every dirty node (sorted by node); clears the dirty set."""
        names, self.dirty = self.dirty, set()
        writes: list[Write] = []
        for name in sorted(names):
            node = self.nodes.get(name)
            if node is None:
                continue
            decided = self.contained.call("Node", name, functools.partial(self._decide, node))
            for write in decided or ():
                if self.refused.get((write.node, write.path)) != _body(write):
                    writes.append(write)
        return writes

    def _decide(self, node: Node) -> list[Write]:
        return decide_node(node, device_resources(self.devices.get(node.name)))

    async def reconcile(self) -> int:
        """Send every write; the number that succeeded. A failed one is looked at again later."""
        written = 0
        for write in self.decisions():
            try:
                await self.api.send(write)
            except Exception as exc:
                if isinstance(exc, ClusterError) and not permanent(exc):
                    log.warning(
                        "deviceresource: node %s: PATCH %s failed: %s; retrying in %.0fs",
                        write.node,
                        write.path,
                        exc,
                        self.retry_seconds,
                    )
                    later = self.call_later or asyncio.get_running_loop().call_later
                    later(self.retry_seconds, functools.partial(self._mark, write.node))
                    continue
                # Refused for good (or a failure of our own): not sent again until it would change.
                self.refused[(write.node, write.path)] = _body(write)
                self.contained.report("Node", write.node, exc)
                continue
            self.refused.pop((write.node, write.path), None)
            self.contained.clear("Node", write.node)
            log.info("deviceresource: node %s: %s", write.node, write.note)
            self._applied(write)
            written += 1
            self.writes += 1
        return written

    def _applied(self, write: Write) -> None:
        """Reflect a successful write locally, so events arriving before the watch echoes it do not
        repeat it."""
        node = self.nodes.get(write.node)
        if node is None:
            return
        if write.path.endswith("/status"):
            values: dict[str, str | None] = write.body["status"]["allocatable"]
            self.nodes[write.node] = dataclasses.replace(
                node, capacity=_with(node.capacity, values), allocatable=_with(node.allocatable, values)
            )
        else:
            labels = FrozenDict({**node.labels, **write.body["metadata"]["labels"]})
            self.nodes[write.node] = dataclasses.replace(node, meta=dataclasses.replace(node.meta, labels=labels))

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until ``stop`` is set; call only while holding the leader Lease. Every node is looked
        at once the Device kind is listed."""
        await self.loop.run(stop, ready=self.ready, reconcile=self._pass, pending=lambda: bool(self.dirty))

    async def _pass(self, full: bool) -> None:
        if full:
            self.dirty.update(self.nodes)
        await self.reconcile()


def _body(write: Write) -> bytes:
    return jsoncodec.dumps(write.body)


def _with(resources: Mapping[str, int], values: Mapping[str, str | None]) -> FrozenDict[str, int]:
    out = dict(resources)
    for name, value in values.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = quantity_value(value)
    return FrozenDict(out)
