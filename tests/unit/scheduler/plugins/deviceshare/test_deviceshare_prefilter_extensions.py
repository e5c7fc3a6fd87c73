"""DeviceShare's AddPod/RemovePod and the preemptible devices in Filter and Reserve (Koordinator
``deviceshare/plugin_test.go``: ``Test_Plugin_PreFilterExtensions``, Filter "allocate from preemptible",
Reserve "reserve from preemptible"; facts transcribed)."""

from __future__ import annotations

from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import NodeInfo
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.deviceshare.plugin import RESERVE_KEY, DeviceShare
from koord_scheduler.plugins.deviceshare.preemption import PREEMPTIBLE_KEY
from tests.unit.scheduler.plugins.deviceshare.test_deviceshare_plugin import (
    ANNOTATION,
    CORE,
    GI,
    MEM,
    RATIO,
    device,
    node,
    pod,
    setup,
)

WHOLE = {CORE: 100, RATIO: 100}
HELD_1 = '{"gpu":[{"minor":1,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"16Gi","koordinator.sh/gpu-memory-ratio":"100"}}]}'  # noqa: E501


def one_node(gpus: int) -> tuple[DeviceShare, NodeInfo]:
    plugin, handle, _ = setup([node("n1")], [device("n1", gpus)])
    info = handle.snapshot.node_info("n1")
    assert info is not None
    return plugin, info


def prefiltered(plugin: DeviceShare, requests: dict[str, int]) -> CycleState:
    state = CycleState()
    _, status = plugin.pre_filter(state, pod("preemptor", requests), None)  # type: ignore[arg-type]
    assert status.is_success, status
    return state


def test_remove_pod_makes_its_gpu_preemptible_add_pod_takes_it_back() -> None:
    """Koordinator: the pod holding GPU 1 whole; RemovePod → preemptible {n1: {gpu: {1: core 100, memory
    8Gi (16Gi here), ratio 100}}}; AddPod → nothing left on the node."""
    plugin, info = one_node(3)
    held = pod("allocated-pod-1", {}, node_name="n1", annotations={ANNOTATION: HELD_1})
    plugin.on_pod(EventType.ADDED, None, held)
    state = prefiltered(plugin, WHOLE)
    preemptor = pod("preemptor", WHOLE)
    assert plugin.remove_pod(state, preemptor, held, info).is_success
    preemptible = state.read(PREEMPTIBLE_KEY)
    assert preemptible.nodes == {"n1": {"gpu": {1: {CORE: 100, MEM: 16 * GI, RATIO: 100}}}}
    assert plugin.add_pod(state, preemptor, held, info).is_success
    assert preemptible.nodes == {"n1": {}}


def test_filter_and_reserve_allocate_from_preemptible() -> None:
    """Koordinator: a node whose only GPU is fully used, with that GPU preemptible in the state: Filter
    passes and Reserve allocates minor 0 whole."""
    plugin, info = one_node(1)
    held = pod("holder", {}, node_name="n1", annotations={ANNOTATION: HELD_1.replace('"minor":1', '"minor":0')})
    plugin.on_pod(EventType.ADDED, None, held)
    preemptor = pod("preemptor", WHOLE)
    state = prefiltered(plugin, WHOLE)
    assert not plugin.filter(state, preemptor, info).is_success
    plugin.remove_pod(state, preemptor, held, info)
    assert plugin.filter(state, preemptor, info).is_success
    assert plugin.reserve(state, preemptor, "n1").is_success
    reserved = state.read(RESERVE_KEY)
    assert [(a.minor, dict(a.resources)) for a in reserved.allocations["gpu"]] == [
        (0, {CORE: 100, RATIO: 100, MEM: 16 * GI})
    ]


def test_add_pod_of_a_pending_pod_holds_the_gpu_reserve_would_give_it() -> None:
    plugin, info = one_node(2)
    preemptor = pod("preemptor", WHOLE)
    state = prefiltered(plugin, WHOLE)
    nominated = pod("nominated", {"nvidia.com/gpu": 2})
    assert plugin.add_pod(state, preemptor, nominated, info).is_success
    assert not plugin.filter(state, preemptor, info).is_success, "both GPUs promised to the nominated pod"
    assert plugin.remove_pod(state, preemptor, nominated, info).is_success
    assert plugin.filter(state, preemptor, info).is_success
    assert state.read(PREEMPTIBLE_KEY).nodes == {"n1": {}}


def test_pods_without_gpus_skip_the_extensions() -> None:
    plugin, info = one_node(1)
    state = CycleState()
    _, status = plugin.pre_filter(state, pod("cpu", {"cpu": 1000}), None)  # type: ignore[arg-type]
    assert status.is_skip
    held = pod("holder", {}, node_name="n1", annotations={ANNOTATION: HELD_1})
    assert plugin.remove_pod(state, pod("cpu", {"cpu": 1000}), held, info).is_success
    assert state.get(PREEMPTIBLE_KEY) is None


def test_a_victims_vf_is_free_in_the_dry_run() -> None:
    from apis.scheduling.device import parse_device

    plugin, info = one_node(0)
    nic = {"type": "rdma", "minor": 0, "health": True, "resources": {"koordinator.sh/rdma": "100"}}
    nic["vfGroups"] = [{"vfs": [{"minor": -1, "busID": "0000:1f:00.2"}]}]
    plugin.on_device(EventType.ADDED, None, parse_device({"metadata": {"name": "n1"}, "spec": {"devices": [nic]}}))
    vf_annotation = (
        '{"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"1"},"extension":{"vfs":[{"busID":"0000:1f:00.2"}]}}]}'
    )
    held = pod("holder", {}, node_name="n1", annotations={ANNOTATION: vf_annotation})
    plugin.on_pod(EventType.ADDED, None, held)
    hint = {"scheduling.koordinator.sh/device-allocate-hint": '{"rdma": {"vfSelector": {}}}'}
    preemptor = pod("preemptor", {"koordinator.sh/rdma": 1}, annotations=hint)
    state = CycleState()
    _, status = plugin.pre_filter(state, preemptor, None)  # type: ignore[arg-type]
    assert status.is_success
    assert plugin.filter(state, preemptor, info).reasons == ("Insufficient rdma devices",), "its only VF is held"
    plugin.remove_pod(state, preemptor, held, info)
    assert plugin.filter(state, preemptor, info).is_success
    plugin.add_pod(state, preemptor, held, info)
    assert not plugin.filter(state, preemptor, info).is_success
