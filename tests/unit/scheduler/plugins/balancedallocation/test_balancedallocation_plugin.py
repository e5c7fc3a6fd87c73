"""NodeResourcesBalancedAllocation plugin: best-effort Skip, real requests, resources, args
(kube-scheduler pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from apis.config.errors import ConfigError
from apis.config.plugin_args import NodeResourcesBalancedAllocationArgs
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, ObjectMeta, Pod
from koord_scheduler.plugins.balancedallocation import plugin as balanced_plugin
from koord_scheduler.plugins.balancedallocation.plugin import NAME, BalancedAllocation
from tests.fwtest import FakeHandle, make_snapshot, scores

GI = 1024**3
MI = 1024**2
GPU = "nvidia.com/gpu"


def make_node(name: str, *, cpu: int = 4000, memory: int = 8 * GI, pods: int = 110, **extra: int) -> Node:
    alloc = FrozenDict({"cpu": cpu, "memory": memory, "pods": pods, **extra})
    return Node(meta=ObjectMeta(name=name), allocatable=alloc, capacity=alloc)


def make_pod(name: str = "p", requests: Mapping[str, int] | None = None, *, node: str = "") -> Pod:
    req = dict(requests or {})
    return Pod(
        meta=ObjectMeta(name=name, namespace="default"),
        node_name=node,
        requests=FrozenDict(req),
        non_zero_cpu=req.get("cpu", 100),
        non_zero_memory=req.get("memory", 200 * MI),
    )


def balanced(**raw: Any) -> BalancedAllocation:
    args = NodeResourcesBalancedAllocationArgs.model_validate(raw)
    return balanced_plugin.new(args, FakeHandle(make_snapshot([])))


THREE = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 1}]}


@pytest.mark.parametrize(
    ("args", "node", "existing", "pod", "want"),
    [
        pytest.param(
            {},
            make_node("n1", cpu=4000, memory=8 * GI),
            [make_pod("used", {"cpu": 2000, "memory": GI}, node="n1")],
            make_pod("p", {"cpu": 1000, "memory": GI}),
            {"n1": 75},
            id="sheet-row-4",
        ),
        pytest.param(
            {},
            make_node("n1", cpu=3000, memory=8 * GI),
            [],
            make_pod("p", {"cpu": 1000, "memory": 4 * GI}),
            {"n1": 91},
            id="sheet-row-5-truncation",
        ),
        pytest.param(
            THREE,
            make_node("n1", cpu=4000, memory=4 * GI, **{GPU: 4}),
            [],
            make_pod("p", {"cpu": 2000, "memory": GI, GPU: 3}),
            {"n1": 79},
            id="sheet-row-6-three-resources",
        ),
        pytest.param(
            {},
            make_node("n1", cpu=4000, memory=8 * GI),
            [make_pod("used", {"cpu": 4500}, node="n1")],
            make_pod("p", {"cpu": 500, "memory": 4 * GI}),
            {"n1": 75},
            id="sheet-row-7-clamp",
        ),
        pytest.param(
            {},
            make_node("n1", cpu=4000, memory=8 * GI),
            [make_pod("used-best-effort", {}, node="n1")],
            make_pod("p", {"cpu": 2000}),
            {"n1": 75},
            id="real-requests-no-non-zero-defaults",
        ),
        pytest.param({}, make_node("n1"), [], make_pod("p"), {}, id="best-effort-pod-skipped"),
        pytest.param(
            {},
            make_node("n1"),
            [],
            make_pod("p", {GPU: 1}),
            {},
            id="best-effort-for-configured-resources-skipped",
        ),
        pytest.param(
            THREE,
            make_node("n1", cpu=4000, memory=8 * GI, **{GPU: 4}),
            [],
            make_pod("p", {"cpu": 2000, "memory": 2 * GI}),
            {"n1": 87},
            id="unrequested-scalar-left-out-(0.5-0.25)/2",
        ),
        pytest.param(
            THREE,
            make_node("n1", cpu=4000, memory=8 * GI),
            [make_pod("gpu-elsewhere", {GPU: 1}, node="n9")],
            make_pod("p", {"cpu": 2000, "memory": 2 * GI, GPU: 1}),
            {"n1": 87},
            id="node-without-scalar-counts-two-fractions",
        ),
    ],
)
def test_score(args: dict[str, Any], node: Node, existing: list[Pod], pod: Pod, want: dict[str, int]) -> None:
    snap = make_snapshot([node], existing)

    got = scores(balanced(**args), pod, snap)

    assert {k: v for k, v in got.items() if k == "n1"} == want


def test_no_normalize_score() -> None:
    assert balanced().score_extensions() is None


def test_new_with_defaults() -> None:
    plugin = balanced_plugin.new(None, FakeHandle(make_snapshot([])))

    assert plugin.name == NAME == "NodeResourcesBalancedAllocation"
    assert balanced_plugin.ARGS is NodeResourcesBalancedAllocationArgs


@pytest.mark.parametrize(
    ("raw", "want_errors"),
    [
        pytest.param(
            {"resources": [{"name": "cpu", "weight": 2}]},
            ["resources[0].weight: Invalid value: 2: must be 1"],
            id="weight-not-1",
        ),
        pytest.param(
            {"resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}]},
            ['resources[1].name: Duplicate value: "cpu"'],
            id="duplicate-resource",
        ),
    ],
)
def test_new_rejects_bad_args(raw: dict[str, Any], want_errors: list[str]) -> None:
    args = NodeResourcesBalancedAllocationArgs.model_validate(raw)

    with pytest.raises(ConfigError) as info:
        balanced_plugin.new(args, FakeHandle(make_snapshot([])))

    assert [str(e) for e in info.value.errors] == want_errors
