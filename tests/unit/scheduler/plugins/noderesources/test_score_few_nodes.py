"""NodeResourcesFit and NodeResourcesBalancedAllocation have a per-node form (plain Python over one node's
row, which the runtime asks for a few nodes) and a batch form (the array maths) of Score, and Fit of
Filter too: the same answers, on random clusters with scalar resources, zero allocatable and overcommitted
nodes, for every strategy and with restored capacity."""

from __future__ import annotations

import random

import numpy as np
import pytest

from apis.config.plugin_args import NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs
from apis.core.frozendict import FrozenDict
from apis.core.types import Node, ObjectMeta, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.node_cache import FEW_NODES
from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity
from koord_scheduler.framework.status import Status
from koord_scheduler.plugins import resource_scoring as scoring
from koord_scheduler.plugins.balancedallocation import plugin as balanced_plugin
from koord_scheduler.plugins.balancedallocation.scoring import balanced_allocation, balanced_allocation_row
from koord_scheduler.plugins.noderesources import plugin as fit_plugin
from tests.fwtest import FakeHandle, make_snapshot

GPU = "nvidia.com/gpu"
GI = 1024**3


def _pod(name: str, rng: random.Random, node: str = "") -> Pod:
    requests = {"cpu": rng.choice([0, 100, 250, 1500, 5000]), "memory": rng.choice([0, GI // 4, 3 * GI, 40 * GI])}
    if rng.random() < 0.4:
        requests[GPU] = rng.choice([0, 1, 2])
    requests = {k: v for k, v in requests.items() if v}
    return Pod(
        meta=ObjectMeta(name=name, namespace="default"),
        node_name=node,
        requests=FrozenDict(requests),
        non_zero_cpu=requests.get("cpu", 100),
        non_zero_memory=requests.get("memory", 200 * 1024**2),
    )


def _cluster(seed: int) -> tuple[list[Node], list[Pod]]:
    rng = random.Random(seed)
    nodes = []
    for i in range(40):
        alloc = {"cpu": rng.choice([0, 1000, 4000, 7777]), "memory": rng.choice([0, 8 * GI, 33 * GI]), "pods": 110}
        if rng.random() < 0.5:
            alloc[GPU] = rng.choice([0, 1, 4])
        frozen = FrozenDict(alloc)
        nodes.append(Node(meta=ObjectMeta(name=f"n{i}"), allocatable=frozen, capacity=frozen))
    pods = [_pod(f"placed-{j}", rng, node=f"n{rng.randrange(40)}") for j in range(120)]
    return nodes, pods


FIT_ARGS = [
    {},
    {
        "scoringStrategy": {
            "type": "MostAllocated",
            "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}],
        }
    },
    {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2}, {"name": GPU, "weight": 5}],
        }
    },
    {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 60, "score": 10}]},
        }
    },
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("raw", FIT_ARGS, ids=["least-default", "most-weighted", "least-with-gpu", "ratio"])
def test_fit_few_nodes_score_as_the_arrays(raw: dict[str, object], seed: int) -> None:
    nodes, placed = _cluster(seed)
    snap = make_snapshot(nodes, placed)
    plugin = fit_plugin.new(NodeResourcesFitArgs.model_validate(raw), FakeHandle(snap))
    rng = random.Random(100 + seed)
    checked = 0
    for k in range(12):
        pod = _pod(f"incoming-{k}", rng)
        state = CycleState()
        plugin.pre_score(state, pod, snap, snap.node_order())
        every = snap.node_order()
        assert len(every) > FEW_NODES
        whole = plugin.score_nodes(state, pod, snap, every).tolist()
        one_by_one = [plugin.score(state, pod, snap.info(pos)) for pos in every.tolist()]
        assert one_by_one == whole
        # A subset (the nodes a cached entry rescores), in any order: the same scores node by node.
        subset = np.array(rng.sample(every.tolist(), rng.randrange(FEW_NODES + 1, len(every))), dtype=np.intp)
        assert plugin.score_nodes(state, pod, snap, subset).tolist() == [whole[every.tolist().index(p)] for p in subset]
        checked += len(set(whole))
    assert checked > 12, "the draws should give varied scores"


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("resources", [["cpu", "memory"], ["cpu", "memory", GPU]], ids=["two", "three"])
def test_balanced_few_nodes_score_as_the_arrays(resources: list[str], seed: int) -> None:
    nodes, placed = _cluster(seed)
    snap = make_snapshot(nodes, placed)
    raw = {"resources": [{"name": r, "weight": 1} for r in resources]}
    args = NodeResourcesBalancedAllocationArgs.model_validate(raw)
    plugin = balanced_plugin.new(args, FakeHandle(snap))
    rng = random.Random(200 + seed)
    for k in range(12):
        pod = _pod(f"incoming-{k}", rng)
        state = CycleState()
        if plugin.pre_score(state, pod, snap, snap.node_order()).is_skip:
            continue
        every = snap.node_order()
        whole = plugin.score_nodes(state, pod, snap, every).tolist()
        one_by_one = [plugin.score(state, pod, snap.info(pos)) for pos in every.tolist()]
        assert one_by_one == whole
        # A subset (the nodes a cached entry rescores), in any order: the same scores node by node.
        subset = np.array(rng.sample(every.tolist(), rng.randrange(FEW_NODES + 1, len(every))), dtype=np.intp)
        assert plugin.score_nodes(state, pod, snap, subset).tolist() == [whole[every.tolist().index(p)] for p in subset]


@pytest.mark.parametrize(
    ("requested", "allocatable", "weights", "least", "most"),
    [
        pytest.param([1000, 2 * GI], [4000, 8 * GI], [1, 1], 75, 25, id="both-quarter-used"),
        pytest.param([5000, 0], [4000, 8 * GI], [1, 1], 50, 50, id="overcommitted-cpu-scores-0-and-100"),
        pytest.param([1000, 2 * GI], [0, 8 * GI], [1, 1], 75, 25, id="zero-allocatable-left-out-with-its-weight"),
        pytest.param([1, 1], [3, 3], [2, 1], 66, 33, id="floor-per-resource-then-weighted"),
        pytest.param([0, 0], [0, 0], [1, 1], 0, 0, id="nothing-counted-scores-0"),
    ],
)
def test_fit_row_scores_table(
    requested: list[int], allocatable: list[int], weights: list[int], least: int, most: int
) -> None:
    assert scoring.least_allocated_row(requested, allocatable, weights) == least
    assert scoring.most_allocated_row(requested, allocatable, weights) == most
    arrays = (np.array([requested]), np.array([allocatable]), np.array(weights))
    assert int(scoring.least_allocated(*arrays)[0]) == least
    assert int(scoring.most_allocated(*arrays)[0]) == most


@pytest.mark.parametrize(
    ("requested", "allocatable", "want"),
    [
        pytest.param([1000, 2 * GI], [4000, 8 * GI], 100, id="equal-fractions"),
        pytest.param([3000, 2 * GI], [4000, 8 * GI], 75, id="two-resources-half-the-difference"),
        pytest.param([9000, 0], [4000, 8 * GI], 50, id="fraction-capped-at-1"),
        pytest.param([1, 2, 3], [10, 10, 0], 95, id="zero-allocatable-cell-left-out-two-remain"),
        pytest.param([1, 5, 9], [10, 10, 10], 67, id="three-population-std-truncated"),
        pytest.param([1, 2], [10, 0], 100, id="one-counted-std-0"),
        pytest.param([7], [10], 100, id="one-resource-configured"),
    ],
)
def test_balanced_row_table(requested: list[int], allocatable: list[int], want: int) -> None:
    assert balanced_allocation_row(requested, allocatable) == want
    assert int(balanced_allocation(np.array([requested]), np.array([allocatable]))[0]) == want


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("restore", [False, True], ids=["plain", "restored-capacity"])
def test_fit_filter_per_node_as_the_batch(seed: int, restore: bool) -> None:
    """NodeResourcesFit's per-node Filter (which the runtime asks for a few nodes) gives each node the
    batch Filter's status, with and without capacity and pod slots restored for the pod."""
    nodes, placed = _cluster(seed)
    snap = make_snapshot(nodes, placed)
    plugin = fit_plugin.new(NodeResourcesFitArgs(), FakeHandle(snap))
    rng = random.Random(300 + seed)
    every = snap.node_order()
    rejected = 0
    for k in range(12):
        pod = _pod(f"incoming-{k}", rng)
        state = CycleState()
        plugin.pre_filter(state, pod, snap)
        if restore:
            chosen = np.array(sorted(rng.sample(every.tolist(), 10)), dtype=np.intp)
            amounts = np.zeros((len(chosen), len(snap.resource_names)), dtype=np.int64)
            amounts[:, 0] = [rng.choice([0, 500, 3000]) for _ in chosen]
            slots = np.array([rng.choice([0, 1]) for _ in chosen], dtype=np.int64)
            state.write(RESTORED_CAPACITY, RestoredCapacity(chosen, amounts, pod_slots=slots))
        batch = plugin.filter_nodes(state, pod, snap, every)
        want = [Status() if batch.passed[i] else batch.status_of(i) for i in range(len(every))]
        got = [plugin.filter(state, pod, snap.info(pos)) for pos in every.tolist()]
        assert got == want
        rejected += sum(not s.is_success for s in got)
    assert rejected > 12, "the draws should reject some nodes"
