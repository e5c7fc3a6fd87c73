"""The deviceresource controller: node GPU resources and labels from the Device object (Koordinator's
GPUDeviceResource rules), against an in-memory API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from apis.scheduling.device import NodeDeviceRecord, parse_device
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.controllers import deviceresource
from koord_scheduler.scheduler.controllers.api import MemoryControllerApi
from koord_scheduler.scheduler.controllers.deviceresource import (
    GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    NODE_RESOURCES,
    RDMA,
    DeviceResourceController,
    DeviceResources,
    decide_node,
    device_resources,
    format_amount,
)
from kubeapi.http import ApiError
from tests.builders import make_node

GI = 1024**3
NONE_LEFT = dict.fromkeys(NODE_RESOURCES)


def gpu(
    minor: int,
    *,
    core: str = "100",
    memory: str = "16Gi",
    ratio: str | None = "100",
    health: bool = True,
    kind: str = "gpu",
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    resources = {GPU_CORE: core, GPU_MEMORY: memory, **({GPU_MEMORY_RATIO: ratio} if ratio else {}), **(extra or {})}
    return {"type": kind, "minor": minor, "health": health, "id": f"GPU-{minor}", "resources": resources}


def rdma(minor: int, *, health: bool = True) -> dict[str, Any]:
    return {"type": "rdma", "minor": minor, "health": health, "id": f"0000:1{minor}:00.0", "resources": {RDMA: "100"}}


def device(name: str, *devices: dict[str, Any], labels: dict[str, str] | None = None) -> NodeDeviceRecord:
    return parse_device(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"devices": list(devices)},
        }
    )


@pytest.mark.parametrize(
    ("dev", "resources", "labels"),
    [
        pytest.param(None, NONE_LEFT, {}, id="no-device-removes-all"),
        pytest.param(device("n", gpu(0, health=False)), NONE_LEFT, {}, id="no-healthy-gpu-removes-all"),
        pytest.param(
            device("n", {"type": "rdma", "minor": 0, "health": True, "resources": {"koordinator.sh/rdma": "100"}}),
            {**NONE_LEFT, RDMA: 100},
            {},
            id="only-rdma-removes-every-gpu-resource",
        ),
        pytest.param(
            device("n", gpu(0), *(rdma(m) for m in range(3)), rdma(3, health=False)),
            {GPU_CORE: 100, GPU_MEMORY: 16 * GI, GPU_MEMORY_RATIO: 100, GPU: 100, RDMA: 300},
            {},
            id="rdma-100-per-healthy-device",
        ),
        pytest.param(
            device("n", gpu(0), gpu(1)),
            {GPU_CORE: 200, GPU_MEMORY: 32 * GI, GPU_MEMORY_RATIO: 200, GPU: 200},
            {},
            id="two-gpus-summed",
        ),
        pytest.param(
            device("n", gpu(0), gpu(1, health=False), gpu(2)),
            {GPU_CORE: 200, GPU_MEMORY: 32 * GI, GPU_MEMORY_RATIO: 200, GPU: 200},
            {},
            id="unhealthy-skipped",
        ),
        pytest.param(
            device("n", gpu(0, ratio=None)),
            {GPU_CORE: 100, GPU_MEMORY: 16 * GI, GPU: 100},
            {},
            id="unreported-resource-left-alone",
        ),
        pytest.param(
            device("n", gpu(0), labels={LABEL_GPU_VENDOR: "nvidia", LABEL_GPU_MODEL: "A100", "x": "y"}),
            {GPU_CORE: 100, GPU_MEMORY: 16 * GI, GPU_MEMORY_RATIO: 100, GPU: 100},
            {LABEL_GPU_VENDOR: "nvidia", LABEL_GPU_MODEL: "A100"},
            id="nvidia-labels-copied",
        ),
        pytest.param(
            device("n", gpu(0, extra={"huawei.com/npu-core": "20"}), labels={LABEL_GPU_VENDOR: "huawei"}),
            {GPU_CORE: 100, GPU_MEMORY: 16 * GI, GPU_MEMORY_RATIO: 100, "huawei.com/npu-core": 20},
            {LABEL_GPU_VENDOR: "huawei"},
            id="other-vendor-gets-no-koordinator-gpu",
        ),
        pytest.param(
            device("n", gpu(0, extra={"koordinator.sh/gpu-encoder": "5"})),
            {GPU_CORE: 100, GPU_MEMORY: 16 * GI, GPU_MEMORY_RATIO: 100, GPU: 100},
            {},
            id="unknown-resource-not-summed",
        ),
    ],
)
def test_device_resources(
    dev: NodeDeviceRecord | None, resources: dict[str, int | None], labels: dict[str, str]
) -> None:
    """Koordinator's GPUDeviceResource and RDMADeviceResource rules; no healthy RDMA device removes
    ``koordinator.sh/rdma`` (None) unless the case says otherwise."""
    assert device_resources(dev) == DeviceResources({RDMA: None, **resources}, labels)


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        pytest.param(GPU_MEMORY, 32 * GI, "32Gi", id="memory-gi"),
        pytest.param(GPU_MEMORY, 1536 * 1024**2, "1536Mi", id="memory-mi"),
        pytest.param(GPU_MEMORY, 1000, "1000", id="memory-bytes"),
        pytest.param(GPU_MEMORY, 0, "0", id="memory-zero"),
        pytest.param(GPU_CORE, 1024, "1024", id="core-plain"),
    ],
)
def test_format_amount(resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text


def test_decide_node_writes_only_what_differs() -> None:
    node = make_node("n").capacity(cpu="8", **{GPU_CORE: "100", GPU: "100", GPU_SHARED: "100"}).build()
    want = device_resources(device("n", gpu(0), gpu(1), labels={LABEL_GPU_MODEL: "A100"}))
    status, labels = decide_node(node, want)
    assert status.path == "/api/v1/nodes/n/status" and status.content_type == "application/merge-patch+json"
    values = {GPU: "200", GPU_CORE: "200", GPU_MEMORY: "32Gi", GPU_MEMORY_RATIO: "200"}
    assert status.body == {"status": {"capacity": values, "allocatable": values}}
    assert (labels.path, labels.body) == ("/api/v1/nodes/n", {"metadata": {"labels": {LABEL_GPU_MODEL: "A100"}}})

    removed = decide_node(node, device_resources(None))
    gone = {GPU_CORE: None, GPU: None, GPU_SHARED: None}
    assert [w.body for w in removed] == [{"status": {"capacity": gone, "allocatable": gone}}]

    in_step = make_node("n").capacity(**values).label(LABEL_GPU_MODEL, "A100").build()
    assert decide_node(in_step, want) == []
    assert decide_node(make_node("n").capacity(cpu="8").build(), device_resources(None)) == []


def test_allocatable_alone_out_of_step_is_written() -> None:
    values = {GPU: "100", GPU_CORE: "100", GPU_MEMORY: "16Gi", GPU_MEMORY_RATIO: "100"}
    node = make_node("n").capacity(**values).allocatable(**{GPU_CORE: "50"}).build()
    (write,) = decide_node(node, device_resources(device("n", gpu(0))))
    assert write.body["status"]["allocatable"] == {GPU_CORE: "100"}


async def test_controller_follows_create_change_delete() -> None:
    api = MemoryControllerApi()
    controller = DeviceResourceController(api)
    controller.on_node(EventType.ADDED, None, make_node("n1").capacity(cpu="8").build())
    controller.on_node(EventType.ADDED, None, make_node("n2").capacity(cpu="8").build())
    assert await controller.reconcile() == 0  # no Device anywhere: nothing to write

    controller.on_object("Device", EventType.ADDED, None, device("n1", gpu(0), labels={LABEL_GPU_MODEL: "T4"}))
    assert await controller.reconcile() == 2
    assert [(w.node, w.path) for w in api.writes] == [("n1", "/api/v1/nodes/n1/status"), ("n1", "/api/v1/nodes/n1")]
    assert controller.nodes["n1"].allocatable[GPU_MEMORY] == 16 * GI
    assert controller.nodes["n1"].labels[LABEL_GPU_MODEL] == "T4"

    # The watch echoing the write, or an unrelated node update, changes nothing.
    controller.on_node(EventType.MODIFIED, None, controller.nodes["n1"])
    assert await controller.reconcile() == 0

    old = controller.devices["n1"]
    two = device("n1", gpu(0), gpu(1), labels={LABEL_GPU_MODEL: "T4"})
    controller.on_object("Device", EventType.MODIFIED, old, two)
    assert await controller.reconcile() == 1
    assert api.writes[-1].body["status"]["allocatable"] == {
        GPU: "200",
        GPU_CORE: "200",
        GPU_MEMORY: "32Gi",
        GPU_MEMORY_RATIO: "200",
    }

    controller.on_object("Device", EventType.DELETED, controller.devices["n1"], None)
    assert await controller.reconcile() == 1
    assert api.writes[-1].body["status"]["capacity"] == {
        GPU: None,
        GPU_CORE: None,
        GPU_MEMORY: None,
        GPU_MEMORY_RATIO: None,
    }
    assert GPU_CORE not in controller.nodes["n1"].capacity
    assert controller.nodes["n1"].labels[LABEL_GPU_MODEL] == "T4"  # labels are never removed
    assert controller.writes == 4


class Timers:
    """A fake ``call_later``: callbacks kept until :meth:`fire`."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, Callable[[], None]]] = []

    def call_later(self, seconds: float, fn: Callable[[], None]) -> None:
        self.pending.append((seconds, fn))

    def delays(self) -> list[float]:
        return [seconds for seconds, _ in self.pending]

    def fire(self) -> None:
        pending, self.pending = self.pending, []
        for _, fn in pending:
            fn()


async def test_failed_write_is_retried() -> None:
    api = MemoryControllerApi(fail={"/api/v1/nodes/n1/status": ClusterError("apiserver down")})
    timers = Timers()
    controller = DeviceResourceController(api, retry_seconds=5, call_later=timers.call_later)
    controller.on_node(EventType.ADDED, None, make_node("n1").build())
    controller.on_object("Device", EventType.ADDED, None, device("n1", gpu(0)))
    assert await controller.reconcile() == 0
    api.fail.clear()
    assert (controller.dirty, timers.delays()) == (set(), [5])
    timers.fire()
    assert controller.dirty == {"n1"}
    assert await controller.reconcile() == 1


async def test_run_waits_for_the_device_listing_then_reconciles_every_node() -> None:
    api = MemoryControllerApi()
    listed = False
    controller = DeviceResourceController(api, ready=lambda: listed)
    controller.on_node(EventType.ADDED, None, make_node("n1").build())
    controller.on_object("Device", EventType.ADDED, None, device("n1", gpu(0)))
    controller.dirty.clear()
    stop = asyncio.Event()
    written_while_waiting: list[int] = []

    async def pause(wake: asyncio.Event, stopped: asyncio.Event, seconds: float) -> None:
        nonlocal listed
        written_while_waiting.append(len(api.writes))
        listed = True  # listed during the first wait for the Device kind
        if api.writes:
            stop.set()
        await asyncio.sleep(0)

    controller.loop.pause = pause
    await asyncio.wait_for(controller.run(stop), 5)
    assert written_while_waiting[0] == 0
    assert [w.node for w in api.writes] == ["n1"]


class CountingApi(MemoryControllerApi):
    """Counts every write attempted, failed or not."""

    attempts: int = 0

    async def send(self, write: Any) -> None:
        self.attempts += 1
        await super().send(write)


async def test_a_write_refused_for_good_is_reported_once_and_not_retried_until_it_changes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusal = ApiError(
        422,
        "Invalid",
        'Node "n1" is invalid: status.capacity[koordinator.sh/gpu-core]: Invalid value: '
        '"-100": must be greater than or equal to 0',
        method="PATCH",
        path="/api/v1/nodes/n1/status",
    )
    api = CountingApi(fail={"/api/v1/nodes/n1/status": refusal})
    timers = Timers()
    controller = DeviceResourceController(api, retry_seconds=0.01, call_later=timers.call_later)
    controller.on_node(EventType.ADDED, None, make_node("n1").build())
    controller.on_object("Device", EventType.ADDED, None, device("n1", gpu(0)))
    with caplog.at_level(logging.WARNING):
        assert await controller.reconcile() == 0
        assert (controller.dirty, timers.delays()) == (set(), [])  # no retry timer
        controller.on_node(EventType.MODIFIED, None, make_node("n1").label("x", "y").build())  # a heartbeat
        assert await controller.reconcile() == 0
    assert api.attempts == 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(
        "Node n1 ignored (ReconcileError): deviceresource: ApiError: PATCH /api/v1/nodes/n1/status:"
        ' 422 Invalid: Node "n1" is invalid: status.capacity[koordinator.sh/gpu-core]'
    )
    assert controller.contained.object_errors.count("Node", "ReconcileError") == 1

    api.fail.clear()
    controller.on_object("Device", EventType.MODIFIED, None, device("n1", gpu(0), gpu(1)))  # it changed
    assert await controller.reconcile() == 1
    assert api.attempts == 2


async def test_a_node_whose_decision_raises_costs_that_node_only(monkeypatch: pytest.MonkeyPatch) -> None:
    api = MemoryControllerApi()
    controller = DeviceResourceController(api)
    for name in ("a", "b", "c"):
        controller.on_node(EventType.ADDED, None, make_node(name).build())
        controller.on_object("Device", EventType.ADDED, None, device(name, gpu(0)))
    real = deviceresource.decide_node

    def decide(node: Any, want: Any) -> Any:
        if node.name == "b":
            raise RecursionError("maximum recursion depth exceeded")
        return real(node, want)

    monkeypatch.setattr(deviceresource, "decide_node", decide)
    assert await controller.reconcile() == 2
    assert sorted({w.node for w in api.writes}) == ["a", "c"]
    assert controller.contained.failures == 1


def test_rdma_totals_are_written_and_removed() -> None:
    node = make_node("n").capacity(cpu="8").build()
    (write,) = decide_node(node, device_resources(device("n", rdma(0), rdma(1))))
    assert write.body == {"status": {"capacity": {RDMA: "200"}, "allocatable": {RDMA: "200"}}}
    with_rdma = make_node("n").capacity(cpu="8", **{RDMA: "200"}).build()
    (write,) = decide_node(with_rdma, device_resources(device("n", rdma(0, health=False))))
    assert write.body == {"status": {"capacity": {RDMA: None}, "allocatable": {RDMA: None}}}
