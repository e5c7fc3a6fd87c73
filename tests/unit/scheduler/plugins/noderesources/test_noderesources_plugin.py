"""NodeResourcesFit plugin: Filter reasons and codes, Score strategies, queueing hints, args
(kube-scheduler pkg/scheduler/framework/plugins/noderesources/fit.go; messages from
pkg/scheduler/apis/config/validation/validation_pluginargs.go)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from apis.config.errors import ConfigError
from apis.config.plugin_args import NodeResourcesFitArgs
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, ObjectMeta, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Status, unresolvable, unschedulable
from koord_scheduler.framework.types import ActionType, ClusterEvent, EventResource, QueueingHint
from koord_scheduler.plugins.noderesources import plugin as fit_plugin
from koord_scheduler.plugins.noderesources.plugin import NAME, Fit
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot, scores

GI = 1024**3
MI = 1024**2
GPU = "nvidia.com/gpu"


def make_node(name: str, *, cpu: int = 4000, memory: int = 8 * GI, pods: int = 110, **extra: int) -> Node:
    alloc = FrozenDict({"cpu": cpu, "memory": memory, "pods": pods, **extra})
    return Node(meta=ObjectMeta(name=name), allocatable=alloc, capacity=alloc)


def make_pod(
    name: str = "p",
    requests: Mapping[str, int] | None = None,
    *,
    node: str = "",
    non_zero: tuple[int, int] | None = None,
) -> Pod:
    """A one-container pod: a missing cpu/memory request scores as 100m / 200Mi (kube's non-zero rule)."""
    req = dict(requests or {})
    nz_cpu, nz_mem = non_zero or (req.get("cpu", 100), req.get("memory", 200 * MI))
    return Pod(
        meta=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
        node_name=node,
        requests=FrozenDict(req),
        non_zero_cpu=nz_cpu,
        non_zero_memory=nz_mem,
    )


def fit(**raw: Any) -> Fit:
    args = NodeResourcesFitArgs.model_validate(raw)
    return fit_plugin.new(args, FakeHandle(make_snapshot([])))


# ----- Filter -----

NODE_USED = [make_pod("used", {"cpu": 3000, "memory": 6 * GI}, node="n1")]


@pytest.mark.parametrize(
    ("args", "node", "existing", "requests", "want"),
    [
        pytest.param({}, make_node("n1"), NODE_USED, {"cpu": 1000, "memory": 2 * GI}, Status(), id="fits-exactly"),
        pytest.param(
            {},
            make_node("n1"),
            NODE_USED,
            {"cpu": 1001},
            unschedulable("Insufficient cpu"),
            id="insufficient-cpu-free-not-allocatable",
        ),
        pytest.param(
            {},
            make_node("n1"),
            NODE_USED,
            {"cpu": 2000, "memory": 3 * GI},
            unschedulable("Insufficient cpu", "Insufficient memory"),
            id="reasons-in-cpu-memory-order",
        ),
        pytest.param(
            {},
            make_node("n1", pods=1),
            NODE_USED,
            {"cpu": 2000},
            unschedulable("Too many pods", "Insufficient cpu"),
            id="too-many-pods-comes-first",
        ),
        pytest.param(
            {},
            make_node("n1", pods=1),
            NODE_USED,
            {},
            unschedulable("Too many pods"),
            id="too-many-pods-only",
        ),
        pytest.param(
            {},
            make_node("n1", pods=0),
            [],
            {},
            unschedulable("Too many pods"),
            id="too-many-pods-is-resolvable",
        ),
        pytest.param(
            {},
            make_node("n1"),
            NODE_USED,
            {"cpu": 5000, "memory": 3 * GI},
            unresolvable("Insufficient cpu", "Insufficient memory"),
            id="request-above-allocatable-is-unresolvable",
        ),
        pytest.param({}, make_node("n1"), NODE_USED, {"memory": 0, "cpu": 0}, Status(), id="zero-requests-not-checked"),
        pytest.param(
            {},
            make_node("n1", **{"ephemeral-storage": 10 * GI}),
            [make_pod("used", {"ephemeral-storage": 8 * GI}, node="n1")],
            {"ephemeral-storage": 3 * GI},
            unschedulable("Insufficient ephemeral-storage"),
            id="insufficient-ephemeral-storage",
        ),
        pytest.param(
            {},
            make_node("n1", **{GPU: 2}),
            [make_pod("used", {GPU: 1}, node="n1")],
            {GPU: 2},
            unschedulable(f"Insufficient {GPU}"),
            id="insufficient-extended-resource",
        ),
        pytest.param(
            {},
            make_node("n1"),
            [],
            {"cpu": 100, GPU: 1},
            unresolvable(f"Insufficient {GPU}"),
            id="node-without-extended-resource-is-unresolvable",
        ),
        pytest.param({"ignoredResources": [GPU]}, make_node("n1"), [], {GPU: 1}, Status(), id="ignored-resource"),
        pytest.param(
            {"ignoredResourceGroups": ["nvidia.com"]},
            make_node("n1"),
            [],
            {GPU: 1},
            Status(),
            id="ignored-group",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["example.com"]},
            make_node("n1"),
            [],
            {GPU: 1},
            unresolvable(f"Insufficient {GPU}"),
            id="other-group-not-ignored",
        ),
        pytest.param(
            {"ignoredResources": ["hugepages-2Mi"]},
            make_node("n1"),
            [],
            {"hugepages-2Mi": 2 * MI},
            unresolvable("Insufficient hugepages-2Mi"),
            id="only-extended-resources-can-be-ignored",
        ),
        pytest.param(
            {"ignoredResources": ["cpu"]},
            make_node("n1"),
            NODE_USED,
            {"cpu": 2000},
            unschedulable("Insufficient cpu"),
            id="cpu-cannot-be-ignored",
        ),
    ],
)
def test_filter(args: dict[str, Any], node: Node, existing: list[Pod], requests: dict[str, int], want: Status) -> None:
    snap = make_snapshot([node], existing)

    got = filter_statuses(fit(**args), make_pod("p", requests), snap)

    assert got == {"n1": want}


def test_filter_groups_nodes_by_failure_combination() -> None:
    nodes = [
        make_node("fits"),
        make_node("cpu-a", cpu=500),
        make_node("cpu-b", cpu=500),
        make_node("cpu-mem", cpu=500, memory=GI),
        make_node("full", pods=0, cpu=500),
        make_node("used"),
    ]
    existing = [make_pod("x", {"cpu": 3500}, node="used")]
    snap = make_snapshot(nodes, existing)
    plugin = fit()
    state = CycleState()
    pod = make_pod("p", {"cpu": 1000, "memory": 2 * GI})
    plugin.pre_filter(state, pod, snap)

    result = plugin.filter_nodes(state, pod, snap, snap.node_order())

    want = {
        "fits": Status(),
        "cpu-a": unresolvable("Insufficient cpu"),
        "cpu-b": unresolvable("Insufficient cpu"),
        "cpu-mem": unresolvable("Insufficient cpu", "Insufficient memory"),
        "full": unresolvable("Too many pods", "Insufficient cpu"),
        "used": unschedulable("Insufficient cpu"),
    }
    got = {
        snap.info(p).name: Status() if result.passed[i] else result.status_of(i)
        for i, p in enumerate(snap.node_order().tolist())
    }
    assert got == want
    assert len(result.statuses) == 4


def test_filter_without_pre_filter_state_computes_it() -> None:
    snap = make_snapshot([make_node("n1", cpu=500)])
    pod = make_pod("p", {"cpu": 1000})

    result = fit().filter_nodes(CycleState(), pod, snap, snap.node_order())

    assert result.passed.tolist() == [False]
    assert result.status_of(0) == unresolvable("Insufficient cpu")


def test_filter_all_pass_has_no_statuses() -> None:
    snap = make_snapshot([make_node("a"), make_node("b")])

    result = fit().filter_nodes(CycleState(), make_pod("p", {"cpu": 1}), snap, snap.node_order())

    assert result.passed.tolist() == [True, True]
    assert result.statuses == ()


# ----- Score -----

ROW1_NODE = make_node("n1", cpu=4000, memory=8 * GI)
ROW1_USED = [make_pod("used", {"cpu": 1000, "memory": 2 * GI}, node="n1")]


@pytest.mark.parametrize(
    ("args", "node", "existing", "pod", "want"),
    [
        pytest.param(
            {},
            ROW1_NODE,
            ROW1_USED,
            make_pod("p", {"cpu": 500, "memory": GI}),
            62,
            id="sheet-row-1-least-allocated",
        ),
        pytest.param(
            {},
            make_node("n1", cpu=2000, memory=4 * GI),
            [make_pod("used", {"cpu": 500, "memory": GI}, node="n1")],
            make_pod("p"),
            70,
            id="sheet-row-2-best-effort-uses-non-zero-defaults",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}],
                }
            },
            make_node("n1", cpu=4000, memory=4000),
            [],
            make_pod("p", {"cpu": 2000, "memory": 1000}),
            56,
            id="sheet-row-3-weights-3-1",
        ),
        pytest.param(
            {},
            ROW1_NODE,
            [make_pod("used", {}, node="n1", non_zero=(1000, 2 * GI))],
            make_pod("p", {"cpu": 500, "memory": GI}),
            62,
            id="node-non-zero-requested-not-real-requests",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated"}},
            ROW1_NODE,
            ROW1_USED,
            make_pod("p", {"cpu": 500, "memory": GI}),
            37,
            id="most-allocated-omitted-resources-default-cpu-memory",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "resources": [{"name": "cpu"}, {"name": "memory"}],
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 0, "score": 10}, {"utilization": 70, "score": 0}]
                    },
                }
            },
            make_node("n1", cpu=4000, memory=10000),
            [],
            make_pod("p", {"cpu": 2000, "memory": 8000}),
            29,
            id="sheet-rtcr-zero-scores-excluded",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu"}, {"name": GPU}]}},
            make_node("n1", cpu=4000, **{GPU: 4}),
            [],
            make_pod("p", {"cpu": 2000, GPU: 1}),
            62,
            id="requested-extended-resource-is-scored-(50+75)/2",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu"}, {"name": GPU}]}},
            make_node("n1", cpu=4000, **{GPU: 4}),
            [],
            make_pod("p", {"cpu": 2000}),
            50,
            id="unrequested-extended-resource-is-skipped",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu"}, {"name": GPU}]}},
            make_node("n1", cpu=4000),
            [make_pod("other", {GPU: 1}, node="elsewhere")],
            make_pod("p", {"cpu": 1000, GPU: 1}),
            75,
            id="node-without-the-resource-skips-it",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "ephemeral-storage"}]}},
            make_node("n1", **{"ephemeral-storage": 100}),
            [make_pod("used", {"ephemeral-storage": 30}, node="n1")],
            make_pod("p"),
            70,
            id="ephemeral-storage-scored-without-pod-request",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": GPU}]}},
            make_node("n1"),
            [],
            make_pod("p", {"cpu": 1}),
            0,
            id="nothing-scored-is-0",
        ),
    ],
)
def test_score(args: dict[str, Any], node: Node, existing: list[Pod], pod: Pod, want: int) -> None:
    snap = make_snapshot([node], existing)

    got = scores(fit(**args), pod, snap)

    assert got == {"n1": want}


def test_score_many_nodes_matches_each_alone() -> None:
    nodes = [make_node(f"n{i}", cpu=1000 * (i + 1), memory=GI * (i + 1)) for i in range(6)]
    existing = [make_pod(f"u{i}", {"cpu": 300 * i, "memory": 100 * MI * i}, node=f"n{i}") for i in range(6)]
    pod = make_pod("p", {"cpu": 700, "memory": 300 * MI})
    plugin = fit()

    together = scores(plugin, pod, make_snapshot(nodes, existing))

    alone = {}
    for node, used in zip(nodes, existing, strict=True):
        alone.update(scores(plugin, pod, make_snapshot([node], [used])))
    assert together == alone


def test_no_normalize_score() -> None:
    assert fit().score_extensions() is None


# ----- EnqueueExtensions -----


def test_events_to_register() -> None:
    got = [e.event for e in fit().events_to_register()]

    assert got == [
        ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
    ]


WAITING = make_pod("waiting", {"cpu": 2000, "memory": GI})


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(make_pod("o", {"cpu": 1}, node="n1"), None, QueueingHint.QUEUE, id="assigned-pod-deleted"),
        pytest.param(make_pod("o", {"cpu": 1}), None, QueueingHint.SKIP, id="unassigned-pod-deleted"),
        pytest.param(
            make_pod("o", {"cpu": 2000}, node="n1"),
            make_pod("o", {"cpu": 1000}, node="n1"),
            QueueingHint.QUEUE,
            id="scale-down-of-requested-resource",
        ),
        pytest.param(
            make_pod("o", {"cpu": 1000, "ephemeral-storage": 9}, node="n1"),
            make_pod("o", {"cpu": 1000, "ephemeral-storage": 1}, node="n1"),
            QueueingHint.SKIP,
            id="scale-down-of-resource-not-requested",
        ),
        pytest.param(
            make_pod("o", {"cpu": 1000}, node="n1"),
            make_pod("o", {"cpu": 2000}, node="n1"),
            QueueingHint.SKIP,
            id="scale-up",
        ),
    ],
)
def test_pod_event_hint(old: Pod, new: Pod | None, want: QueueingHint) -> None:
    assert fit().is_schedulable_after_pod_event(WAITING, old, new) == want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, make_node("n2", cpu=4000), QueueingHint.QUEUE, id="added-node-fits"),
        pytest.param(None, make_node("n2", cpu=1000), QueueingHint.SKIP, id="added-node-too-small"),
        pytest.param(None, make_node("n2", pods=0), QueueingHint.SKIP, id="added-node-no-pod-slots"),
        pytest.param(make_node("n2", cpu=2000), make_node("n2", cpu=3000), QueueingHint.QUEUE, id="cpu-grew"),
        pytest.param(
            make_node("n2", memory=2 * GI),
            make_node("n2", memory=2 * GI, pods=111),
            QueueingHint.QUEUE,
            id="pods-grew",
        ),
        pytest.param(
            make_node("n2", **{GPU: 1}),
            make_node("n2", **{GPU: 2}),
            QueueingHint.SKIP,
            id="unrequested-resource-grew",
        ),
        pytest.param(make_node("n2", cpu=3000), make_node("n2", cpu=2000), QueueingHint.SKIP, id="cpu-shrank"),
    ],
)
def test_node_event_hint(old: Node | None, new: Node, want: QueueingHint) -> None:
    assert fit().is_schedulable_after_node_change(WAITING, old, new) == want


def test_node_hint_honours_ignored_resources() -> None:
    pod = make_pod("p", {"cpu": 100, GPU: 1})

    got = fit(ignoredResources=[GPU]).is_schedulable_after_node_change(pod, None, make_node("n"))

    assert got == QueueingHint.QUEUE


# ----- args and factory -----


def test_new_with_defaults() -> None:
    plugin = fit_plugin.new(None, FakeHandle(make_snapshot([])))

    assert plugin.name == NAME == "NodeResourcesFit"
    assert fit_plugin.ARGS is NodeResourcesFitArgs


@pytest.mark.parametrize(
    ("raw", "want_errors"),
    [
        pytest.param(
            {"ignoredResourceGroups": ["example.com/aa"]},
            ["ignoredResourceGroups[0]: Invalid value: \"example.com/aa\": resource group name can't contain '/'"],
            id="group-with-slash",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "Invalid"}},
            [
                'scoringStrategy.type: Unsupported value: "Invalid": supported values: '
                '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'
            ],
            id="unknown-strategy",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
            [
                "scoringStrategy.resources[0].weight: Invalid value: 101: "
                "resource weight of cpu not in valid range (0, 100]"
            ],
            id="weight-above-100",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": []},
                }
            },
            ["scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point must be specified"],
            id="empty-shape",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 11}]
                    },
                }
            },
            [
                "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 50: "
                "values must be sorted in increasing order",
                "scoringStrategy.requestedToCapacityRatio.shape[1].score: Invalid value: 11: "
                "not in valid range [0, 10]",
            ],
            id="shape-unsorted-and-score-out-of-range",
        ),
    ],
)
def test_new_rejects_bad_args(raw: dict[str, Any], want_errors: list[str]) -> None:
    args = NodeResourcesFitArgs.model_validate(raw)

    with pytest.raises(ConfigError) as info:
        fit_plugin.new(args, FakeHandle(make_snapshot([])))

    assert [str(e) for e in info.value.errors] == want_errors


def test_pre_filter_state_is_reused_for_pods_of_one_template_only() -> None:
    snap = make_snapshot([make_node("n1", **{"example.com/foo": 2})])
    plugin = fit_plugin.new(None, FakeHandle(snap))
    first = plugin._pre_filter_state(make_pod("a", {"cpu": 500, "memory": GI}), snap)
    same = plugin._pre_filter_state(make_pod("b", {"cpu": 500, "memory": GI}), snap)
    assert same is first, "equal requests share the snapshot's row, and so the state"
    other = plugin._pre_filter_state(make_pod("c", {"cpu": 700}), snap)
    assert other is not first
    assert other.fit.names == ("cpu",) and other.fit.amounts.tolist() == [700]
    # A resource no node had before widens every row: the state is rebuilt with the new column.
    wider = plugin._pre_filter_state(make_pod("d", {"cpu": 500, "memory": GI, "example.com/bar": 1}), snap)
    assert wider.fit.names == ("cpu", "memory", "example.com/bar")
    again = plugin._pre_filter_state(make_pod("e", {"cpu": 500, "memory": GI}), snap)
    assert again is not first and again.fit.names == ("cpu", "memory")
    assert len(again.request) == len(wider.request)
