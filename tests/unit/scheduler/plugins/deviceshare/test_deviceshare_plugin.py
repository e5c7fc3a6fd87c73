"""DeviceShare plugin: the Koordinator flows through PreFilter, Filter, Score, Reserve, PreBind, pod and
Device events, args (Koordinator ``pkg/scheduler/plugins/deviceshare/plugin.go``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from apis.config.errors import ConfigError
from apis.config.plugin_args import IN_TREE_ARGS, decode_args
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, ObjectMeta, Pod, PodResourceClaim
from apis.scheduling.device import parse_device
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Code
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.deviceshare import plugin as ds
from koord_scheduler.plugins.deviceshare.plugin import DEVICE_OBJECT_KIND, DeviceShare
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot, scores

CORE = "koordinator.sh/gpu-core"
RATIO = "koordinator.sh/gpu-memory-ratio"
MEM = "koordinator.sh/gpu-memory"
GI = 1 << 30
ANNOTATION = "scheduling.koordinator.sh/device-allocated"


class FakeCluster:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Mapping[str, str | None]]] = []

    async def patch_pod_metadata(self, pod: Pod, *, annotations: Any = None, labels: Any = None) -> None:
        self.patches.append((pod.key, dict(annotations or {})))


def node(name: str, labels: Mapping[str, str] | None = None) -> Node:
    alloc = FrozenDict({"cpu": 16000, "memory": 64 * GI, "pods": 110})
    return Node(meta=ObjectMeta(name=name, labels=FrozenDict(labels or {})), allocatable=alloc, capacity=alloc)


def pod(
    name: str, requests: Mapping[str, int], *, node_name: str = "", annotations: Mapping[str, str] | None = None
) -> Pod:
    return Pod(
        meta=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}", annotations=FrozenDict(annotations or {})),
        node_name=node_name,
        requests=FrozenDict(requests),
    )


def device(name: str, gpus: int, *, healthy: bool = True, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "minor": i,
                    "health": healthy,
                    "resources": {CORE: "100", RATIO: "100", MEM: "16Gi"},
                }
                for i in range(gpus)
            ]
        },
    }


def setup(
    nodes: list[Node], devices: list[dict[str, Any]], args: Mapping[str, Any] | None = None
) -> tuple[DeviceShare, FakeHandle, FakeCluster]:
    cluster = FakeCluster()
    handle = FakeHandle(make_snapshot(nodes), cluster=cluster)
    plugin = ds.new(decode_args("DeviceShare", args, IN_TREE_ARGS), handle)  # type: ignore[arg-type]
    for d in devices:
        for h in handle.watch_handlers[DEVICE_OBJECT_KIND.kind]:
            h(EventType.ADDED, None, parse_device(d))
    return plugin, handle, cluster


HALF = {CORE: 50, RATIO: 50}


def schedule(plugin: DeviceShare, p: Pod, node_name: str) -> CycleState:
    state = CycleState()
    _, status = plugin.pre_filter(state, p, None)  # type: ignore[arg-type]
    assert status.is_success, status
    assert plugin.reserve(state, p, node_name).is_success
    assert asyncio.run(plugin.pre_bind(state, p, node_name)).is_success
    return state


def test_manual_example_half_gpu_gets_annotation() -> None:
    plugin, _, cluster = setup([node("n1")], [device("n1", 1)])
    schedule(plugin, pod("p1", HALF), "n1")
    ((key, annotations),) = cluster.patches
    assert key == "default/p1"
    assert json.loads(str(annotations[ANNOTATION])) == {
        "gpu": [{"minor": 0, "resources": {CORE: "50", MEM: "8Gi", RATIO: "50"}}]
    }


def test_second_pod_that_no_longer_fits_is_unschedulable_with_device_reason() -> None:
    plugin, handle, _ = setup([node("n1")], [device("n1", 1)])
    schedule(plugin, pod("p1", {CORE: 60, RATIO: 60}), "n1")
    statuses = filter_statuses(plugin, pod("p2", HALF), handle.snapshot)
    assert statuses["n1"].code == Code.UNSCHEDULABLE and statuses["n1"].reasons == ("Insufficient gpu devices",)


def test_unreserve_gives_the_gpu_back() -> None:
    plugin, handle, _ = setup([node("n1")], [device("n1", 1)])
    p1 = pod("p1", {"nvidia.com/gpu": 1})
    state = schedule(plugin, p1, "n1")
    assert not filter_statuses(plugin, pod("p2", HALF), handle.snapshot)["n1"].is_success
    plugin.unreserve(state, p1, "n1")
    assert filter_statuses(plugin, pod("p2", HALF), handle.snapshot)["n1"].is_success


def test_bound_pod_annotation_is_accounted_and_deletion_frees() -> None:
    plugin, handle, _ = setup([node("n1")], [device("n1", 1)])
    text = json.dumps({"gpu": [{"minor": 0, "resources": {CORE: "100", RATIO: "100", MEM: "16Gi"}}]})
    bound = pod("other", {"nvidia.com/gpu": 1}, node_name="n1", annotations={ANNOTATION: text})
    for h in handle.pod_watchers:
        h(EventType.ADDED, None, bound)
    assert filter_statuses(plugin, pod("p", HALF), handle.snapshot)["n1"].code == Code.UNSCHEDULABLE
    for h in handle.pod_watchers:
        h(EventType.DELETED, bound, None)
    assert filter_statuses(plugin, pod("p", HALF), handle.snapshot)["n1"].is_success


def test_forgotten_pod_frees_its_gpu() -> None:
    plugin, handle, _ = setup([node("n1")], [device("n1", 1)])
    p1 = pod("p1", {"nvidia.com/gpu": 1})
    schedule(plugin, p1, "n1")
    handle.forget_pod(p1)
    assert filter_statuses(plugin, pod("p2", {"nvidia.com/gpu": 1}), handle.snapshot)["n1"].is_success


@pytest.mark.parametrize(
    "requests,reason",
    [
        pytest.param({CORE: 50}, "invalid resource device requests: [koordinator.sh/gpu-core]", id="core-alone"),
        pytest.param(
            {"koordinator.sh/rdma": 150}, "invalid resource unit koordinator.sh/rdma: 150", id="rdma-bad-percentage"
        ),
    ],
)
def test_prefilter_rejects_unresolvable(requests: dict[str, int], reason: str) -> None:
    plugin, _, _ = setup([node("n1")], [device("n1", 1)])
    _, status = plugin.pre_filter(CycleState(), pod("p", requests), None)  # type: ignore[arg-type]
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == (reason,)


def test_pod_without_devices_skips() -> None:
    plugin, _, _ = setup([node("n1")], [])
    _, status = plugin.pre_filter(CycleState(), pod("p", {"cpu": 100}), None)  # type: ignore[arg-type]
    assert status.is_skip


def test_pod_with_resource_claims_is_left_to_dynamic_resources() -> None:
    """Koordinator's plan for DRA: a pod with ResourceClaims is never DeviceShare's, even when it also asks
    for koordinator.sh/gpu resources (which would otherwise be allocated here)."""
    plugin, _, _ = setup([node("n1")], [device("n1", 1)])
    with_claims = replace(pod("p", HALF), resource_claims=(PodResourceClaim("gpu", claim_name="gpu-claim"),))

    _, status = plugin.pre_filter(CycleState(), with_claims, None)  # type: ignore[arg-type]
    _, without = plugin.pre_filter(CycleState(), pod("q", HALF), None)  # type: ignore[arg-type]

    assert status.is_skip
    assert without.is_success


def test_node_without_device_object_passes_and_unhealthy_gpus_do_not_count() -> None:
    plugin, handle, _ = setup([node("bare"), node("sick")], [device("sick", 2, healthy=False)])
    statuses = filter_statuses(plugin, pod("p", HALF), handle.snapshot)
    assert statuses["bare"].is_success
    sick = statuses["sick"]
    assert sick.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and sick.reasons == ("Insufficient gpu devices",)


CHART_ARGS = {"gpuShareUnsupportedModels": [{"vendor": "huawei", "model": "Ascend-310P3-300I-DUO"}]}
ASCEND = {"node.koordinator.sh/gpu-vendor": "huawei", "node.koordinator.sh/gpu-model": "Ascend-310P3-300I-DUO"}


@pytest.mark.parametrize(
    "requests,ok",
    [
        pytest.param(HALF, False, id="shared-gpu-refused-on-listed-model"),
        pytest.param({"nvidia.com/gpu": 1}, True, id="whole-gpu-allowed-on-listed-model"),
    ],
)
def test_gpu_share_unsupported_models(requests: dict[str, int], ok: bool) -> None:
    plugin, handle, _ = setup([node("npu", ASCEND)], [device("npu", 1)], CHART_ARGS)
    status = filter_statuses(plugin, pod("p", requests), handle.snapshot)["npu"]
    assert status.is_success is ok
    if not ok:
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == ('model "Ascend-310P3-300I-DUO" of vendor "huawei" does not support GPU Share',)


def test_unsupported_model_read_from_device_labels_too() -> None:
    plugin, handle, _ = setup([node("npu")], [device("npu", 1, labels=ASCEND)], CHART_ARGS)
    assert filter_statuses(plugin, pod("p", HALF), handle.snapshot)["npu"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@pytest.mark.parametrize(
    "strategy,best",
    [
        pytest.param("LeastAllocated", "empty", id="least-allocated-spreads"),
        pytest.param("MostAllocated", "busy", id="most-allocated-packs"),
    ],
)
def test_score_strategy(strategy: str, best: str) -> None:
    plugin, handle, _ = setup(
        [node("empty"), node("busy")], [device("empty", 2), device("busy", 2)], {"scoringStrategy": {"type": strategy}}
    )
    schedule(plugin, pod("first", HALF), "busy")
    state, incoming = CycleState(), pod("p", HALF)
    plugin.pre_filter(state, incoming, handle.snapshot)
    got = scores(plugin, incoming, handle.snapshot, state)
    assert max(got, key=lambda n: got[n]) == best
    assert max(got.values()) == 100


def test_simulation_report_names_the_gpu() -> None:
    plugin, handle, _ = setup([node("n1")], [device("n1", 2)])
    schedule(plugin, pod("p1", {"nvidia.com/gpu": 2}), "n1")
    title, rows = handle.reports[0]()
    assert title == "DeviceShare allocations"
    assert [r["device"] for r in rows] == ["gpu/0", "gpu/1"]
    assert rows[0]["resources"] == "gpu-core=100 gpu-memory=16Gi gpu-memory-ratio=100"


def test_default_args_are_koordinators() -> None:
    args = decode_args("DeviceShare", None, IN_TREE_ARGS)
    templates = args.templates_config()  # type: ignore[attr-defined]
    assert (templates.config_map_namespace, templates.config_map_name, templates.matched_resources) == (
        "koordinator-system",
        "gpu-shared-resource-templates",
        ("huawei.com/npu-core",),
    )
    assert args.scoring_strategy.type == "LeastAllocated"  # type: ignore[attr-defined]
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [  # type: ignore[attr-defined]
        (RATIO, 1),
        (MEM, 1),
        ("koordinator.sh/rdma", 1),
        ("koordinator.sh/fpga", 1),
    ]


@pytest.mark.parametrize(
    "raw,field",
    [
        pytest.param({"allocator": "autopilot"}, "args.allocator", id="allocator"),
        pytest.param(
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "args.scoringStrategy.type", id="strategy"
        ),
        pytest.param(
            {"gpuShareUnsupportedModels": [{"vendor": "huawei"}]},
            "args.gpuShareUnsupportedModels[0].model",
            id="model-required",
        ),
    ],
)
def test_unimplemented_or_bad_args_refused_naming_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        decode_args("DeviceShare", raw, IN_TREE_ARGS)
    assert field in str(info.value)
