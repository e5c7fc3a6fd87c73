"""GPU shared resource templates (Koordinator ``gpu_shared_resource_templates_cache_test.go``,
``allocator_gpu_test.go`` ``TestAllocateByTemplate``, ``plugin_test.go`` PreFilter cases)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from apis.config.plugin_args import IN_TREE_ARGS, decode_args
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, ObjectMeta, Pod
from apis.extension.device import DeviceAllocation, decode_device_allocations, encode_device_allocations
from apis.scheduling.device import parse_device
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Code
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.deviceshare import plugin as ds
from koord_scheduler.plugins.deviceshare.plugin import DEVICE_OBJECT_KIND, DeviceShare
from koord_scheduler.plugins.deviceshare.templates import (
    CONFIG_MAP_KIND_NAME,
    ERR_NO_MATCHED_TEMPLATE,
    ConfigMapData,
    TemplatesError,
    find_matched,
    parse_config_map,
    parse_templates,
    template_key,
)
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot

GI = 1 << 30
MEM = "koordinator.sh/gpu-memory"
RATIO = "koordinator.sh/gpu-memory-ratio"
SHARED = "koordinator.sh/gpu.shared"
CORE = "huawei.com/npu-core"
CPU = "huawei.com/npu-cpu"
DVPP = "huawei.com/npu-dvpp"
ANNOTATION = "scheduling.koordinator.sh/device-allocated"
ASCEND = {"node.koordinator.sh/gpu-vendor": "huawei", "node.koordinator.sh/gpu-model": "Ascend-310P"}


def tpl(mem_gi: int, core: int, cpu: int, dvpp: int | None) -> dict[str, int]:
    out = {MEM: mem_gi * GI, CORE: core, CPU: cpu}
    if dvpp is not None:
        out[DVPP] = dvpp
    return out


# Koordinator's testTemplatesInfos.
TEMPLATES = {
    "huawei-Ascend-310P": {
        "vir01": tpl(3, 1, 1, 12),
        "vir02": tpl(6, 2, 2, 25),
        "vir02_1c": tpl(6, 2, 1, 25),
        "vir04": tpl(12, 4, 4, 50),
        "vir04_3c": tpl(12, 4, 3, 50),
        "vir04_3c_ndvpp": tpl(12, 4, 3, None),
        "vir04_4c_dvpp": tpl(12, 4, 4, 100),
    }
}


def templates_yaml() -> str:
    def quantities(t: Mapping[str, int]) -> dict[str, str]:
        return {k: (f"{v // GI}Gi" if k == MEM else str(v)) for k, v in t.items()}

    return yaml.safe_dump({k: {n: quantities(t) for n, t in v.items()} for k, v in TEMPLATES.items()})


@pytest.mark.parametrize(
    "resources,want",
    [
        pytest.param(tpl(6, 2, 2, 25), {"huawei-Ascend-310P": {"vir02": tpl(6, 2, 2, 25)}}, id="strict found"),
        pytest.param(tpl(6, 2, 3, 25), {}, id="strict not found 1"),
        pytest.param({CORE: 2}, {}, id="strict not found 2"),
    ],
)
def test_find_matched_templates(resources: dict[str, int], want: dict[str, Any]) -> None:
    assert find_matched(TEMPLATES, resources) == want


def test_parse_templates_from_configmap_data() -> None:
    assert parse_templates(templates_yaml()) == TEMPLATES
    assert parse_templates("") == {}


@pytest.mark.parametrize(
    "text,where",
    [
        pytest.param("invalid yaml", "data.yaml: expected a map", id="invalid configmap data"),
        pytest.param("a: [1", "data.yaml: invalid YAML", id="not-yaml"),
        pytest.param("m:\n  v1: {huawei.com/npu-core: abc}\n", "data.yaml[m][v1]", id="bad-quantity"),
        pytest.param("m: [1]\n", "data.yaml[m]", id="templates-not-a-map"),
    ],
)
def test_bad_templates_name_the_place(text: str, where: str) -> None:
    with pytest.raises(TemplatesError, match=r"^" + where.replace("[", r"\[").replace("]", r"\]")):
        parse_templates(text)


def test_template_key() -> None:
    assert template_key("huawei", "Ascend-310P") == "huawei-Ascend-310P"


def test_allocation_extension_round_trip() -> None:
    text = encode_device_allocations({"gpu": [DeviceAllocation(0, {CORE: 4}, template="vir04")]})
    assert json.loads(text) == {
        "gpu": [{"minor": 0, "resources": {CORE: "4"}, "extension": {"gpuSharedResourceTemplate": "vir04"}}]
    }
    assert decode_device_allocations(text)["gpu"][0].template == "vir04"


# ----- the plugin -----


def npu_device(name: str) -> dict[str, Any]:
    """Koordinator's fakeDeviceCRWithHuaweiNPU, GPUs only."""
    res = {CORE: "8", CPU: "7", DVPP: "100", MEM: "24Gi", RATIO: "100"}
    devices = [{"type": "gpu", "minor": i, "health": True, "resources": res} for i in range(8)]
    return {"metadata": {"name": name, "labels": ASCEND}, "spec": {"devices": devices}}


def node(name: str, labels: Mapping[str, str]) -> Node:
    alloc = FrozenDict({"cpu": 16000, "memory": 64 * GI, "pods": 110})
    return Node(meta=ObjectMeta(name=name, labels=FrozenDict(labels)), allocatable=alloc, capacity=alloc)


def pod(
    name: str, requests: Mapping[str, int], *, node_name: str = "", annotations: Mapping[str, str] | None = None
) -> Pod:
    return Pod(
        meta=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}", annotations=FrozenDict(annotations or {})),
        node_name=node_name,
        requests=FrozenDict(requests),
    )


def npu_request(mem_gi: int, core: int, cpu: int, dvpp: int) -> dict[str, int]:
    return {SHARED: 1, **tpl(mem_gi, core, cpu, dvpp)}


class Cluster:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Mapping[str, str | None]]] = []
        self.events: list[tuple[str, str, str, str]] = []

    async def patch_pod_metadata(self, pod: Pod, *, annotations: Any = None, labels: Any = None) -> None:
        self.patches.append((pod.key, dict(annotations or {})))

    async def record_event(
        self, kind: Any, name: str, *, namespace: str = "", type: str, reason: str, message: str
    ) -> None:
        self.events.append((f"{kind.kind}/{namespace}/{name}", type, reason, message))


def config_map(
    data: str, *, namespace: str = "koordinator-system", name: str = "gpu-shared-resource-templates"
) -> ConfigMapData:
    return parse_config_map({"metadata": {"namespace": namespace, "name": name}, "data": {"data.yaml": data}})


def setup(
    nodes: list[Node], *, args: Mapping[str, Any] | None = None, templates: str | None = None
) -> tuple[DeviceShare, FakeHandle, Cluster]:
    cluster = Cluster()
    handle = FakeHandle(make_snapshot(nodes), cluster=cluster)
    strategy = {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": MEM, "weight": 1}]}}
    plugin = ds.new(decode_args("DeviceShare", {**strategy, **(args or {})}, IN_TREE_ARGS), handle)  # type: ignore[arg-type]
    for n in nodes:
        for h in handle.watch_handlers[DEVICE_OBJECT_KIND.kind]:
            h(EventType.ADDED, None, parse_device(npu_device(n.name)))
    if templates is not None:
        configmap_event(handle, EventType.ADDED, None, config_map(templates))
    return plugin, handle, cluster


def configmap_event(handle: FakeHandle, event: EventType, old: Any, new: Any) -> None:
    for h in handle.watch_handlers[CONFIG_MAP_KIND_NAME]:
        h(event, old, new)


def place(plugin: DeviceShare, p: Pod, node_name: str) -> dict[str, Any]:
    state = CycleState()
    _, status = plugin.pre_filter(state, p, None)  # type: ignore[arg-type]
    assert status.is_success, status
    assert plugin.reserve(state, p, node_name).is_success, node_name
    assert asyncio.run(plugin.pre_bind(state, p, node_name)).is_success
    return dict(json.loads(str(plugin._cluster.patches[-1][1][ANNOTATION])))  # type: ignore[union-attr]


def assigned(handle: FakeHandle, minors: range, node_name: str) -> None:
    rows = [
        {
            "minor": m,
            "resources": {CORE: "4", CPU: "4", DVPP: "50", RATIO: "50", MEM: "12Gi"},
            "extension": {"gpuSharedResourceTemplate": "vir04"},
        }
        for m in minors
    ]
    bound = pod("assigned", {}, node_name=node_name, annotations={ANNOTATION: json.dumps({"gpu": rows})})
    for h in handle.pod_watchers:
        h(EventType.ADDED, None, bound)


def test_resource_enough_binpacks_to_the_same_device_and_names_the_template() -> None:
    plugin, handle, _ = setup([node("n1", ASCEND)], templates=templates_yaml())
    assigned(handle, range(1), "n1")
    got = place(plugin, pod("p", npu_request(3, 1, 1, 12)), "n1")
    assert got == {
        "gpu": [
            {
                "minor": 0,
                "resources": {CORE: "1", CPU: "1", DVPP: "12", MEM: "3Gi", RATIO: "12"},
                "extension": {"gpuSharedResourceTemplate": "vir01"},
            }
        ]
    }


def test_resource_not_enough_goes_to_another_device() -> None:
    plugin, handle, _ = setup([node("n1", ASCEND)], templates=templates_yaml())
    assigned(handle, range(1), "n1")
    got = place(plugin, pod("p", npu_request(12, 4, 4, 100)), "n1")
    assert [(a["minor"], a["extension"]) for a in got["gpu"]] == [(1, {"gpuSharedResourceTemplate": "vir04_4c_dvpp"})]


def test_resource_not_enough_anywhere_is_unschedulable() -> None:
    plugin, handle, _ = setup([node("n1", ASCEND)], templates=templates_yaml())
    assigned(handle, range(8), "n1")
    status = filter_statuses(plugin, pod("p", npu_request(12, 4, 4, 100)), handle.snapshot)["n1"]
    assert status.code == Code.UNSCHEDULABLE


def test_node_of_another_model_has_no_matched_template() -> None:
    plugin, handle, _ = setup([node("other", {}), node("n1", ASCEND)], templates=templates_yaml())
    statuses = filter_statuses(plugin, pod("p", npu_request(12, 4, 4, 100)), handle.snapshot)
    assert statuses["n1"].is_success
    assert statuses["other"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert statuses["other"].reasons == (ERR_NO_MATCHED_TEMPLATE,)


def prefilter(plugin: DeviceShare, requests: Mapping[str, int]) -> Any:
    return plugin.pre_filter(CycleState(), pod("p", requests), None)[1]  # type: ignore[arg-type]


def test_request_equal_to_no_template_is_unresolvable_with_koordinators_message() -> None:
    plugin, _, _ = setup([node("n1", ASCEND)], templates=templates_yaml())
    assert prefilter(plugin, npu_request(12, 4, 4, 50)).is_success
    status = prefilter(plugin, npu_request(12, 5, 4, 50))  # Koordinator's "pod has invalid gpu request 5"
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == (ERR_NO_MATCHED_TEMPLATE,)


def test_configmap_is_watched_bad_data_keeps_the_last_good_and_raises_an_event() -> None:
    plugin, handle, cluster = setup([node("n1", ASCEND)])
    assert prefilter(plugin, npu_request(12, 4, 4, 50)).reasons == (ERR_NO_MATCHED_TEMPLATE,)  # none yet
    good = config_map(templates_yaml())
    configmap_event(handle, EventType.ADDED, None, good)
    assert prefilter(plugin, npu_request(12, 4, 4, 50)).is_success

    async def bad_update() -> None:
        configmap_event(handle, EventType.MODIFIED, good, config_map("invalid yaml"))
        await asyncio.sleep(0)

    asyncio.run(bad_update())
    assert prefilter(plugin, npu_request(12, 4, 4, 50)).is_success  # last good kept
    ((regarding, kind, reason, message),) = cluster.events
    assert (regarding, kind, reason) == (
        "ConfigMap/koordinator-system/gpu-shared-resource-templates",
        "Warning",
        "InvalidGPUSharedResourceTemplates",
    )
    assert "data.yaml: expected a map" in message

    only_vir01 = config_map(
        yaml.safe_dump({"huawei-Ascend-310P": {"vir01": {CORE: "1", CPU: "1", DVPP: "12", MEM: "3Gi"}}})
    )
    configmap_event(handle, EventType.MODIFIED, good, only_vir01)
    assert prefilter(plugin, npu_request(12, 4, 4, 50)).reasons == (ERR_NO_MATCHED_TEMPLATE,)
    assert prefilter(plugin, npu_request(3, 1, 1, 12)).is_success
    configmap_event(handle, EventType.MODIFIED, only_vir01, config_map(templates_yaml(), name="other"))
    assert prefilter(plugin, npu_request(3, 1, 1, 12)).is_success  # another ConfigMap changes nothing
    configmap_event(handle, EventType.DELETED, only_vir01, None)
    assert prefilter(plugin, npu_request(3, 1, 1, 12)).reasons == (ERR_NO_MATCHED_TEMPLATE,)


def test_configured_configmap_and_matched_resources_are_honoured() -> None:
    args = {
        "gpuSharedResourceTemplatesConfig": {
            "configMapNamespace": "ns",
            "configMapName": "tpl",
            "matchedResources": [CPU],
        }
    }
    plugin, handle, _ = setup([node("n1", ASCEND)], args=args, templates=templates_yaml())
    assert prefilter(plugin, npu_request(12, 4, 4, 50)).reasons == (ERR_NO_MATCHED_TEMPLATE,)  # default name unread
    configmap_event(handle, EventType.ADDED, None, config_map(templates_yaml(), namespace="ns", name="tpl"))
    assert prefilter(plugin, npu_request(12, 4, 4, 50)).is_success
    no_match = {"gpuSharedResourceTemplatesConfig": {"configMapName": "x", "matchedResources": []}}
    plugin, _, _ = setup([node("n1", ASCEND)], args=no_match)
    assert prefilter(plugin, npu_request(12, 5, 4, 50)).is_success  # templates not enforced


def test_gpu_pods_without_matched_resources_are_not_concerned() -> None:
    plugin, _, _ = setup([node("n1", ASCEND)])
    assert prefilter(plugin, {"koordinator.sh/gpu-core": 50, RATIO: 50}).is_success


def test_a_config_given_without_matched_resources_enforces_nothing() -> None:
    """Koordinator defaults the whole field only when it is absent."""
    args = {"gpuSharedResourceTemplatesConfig": {"configMapName": "gpu-shared-resource-templates"}}
    plugin, _, _ = setup([node("n1", ASCEND)], args=args)
    assert prefilter(plugin, npu_request(12, 5, 4, 50)).is_success
