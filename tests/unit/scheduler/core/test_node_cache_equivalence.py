"""The per-node result cache must never change a decision: same placements and messages with it off."""

from __future__ import annotations

import random
from typing import Any

import pytest

from apis.config import KubeSchedulerConfiguration, parse_scheduler_config
from apis.core.types import Node, Pod
from koord_scheduler.framework.node_cache import FEW_NODES
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod


def random_cluster(seed: int, *, spread: float = 0.0) -> tuple[list[Node], list[Pod]]:
    """40 nodes over three zones (one twice the size of the others) and 400 pods of four shapes; a
    ``spread`` share of the pods carries a DoNotSchedule zone spread constraint over its group (a Filter
    plugin that does not sign the pod, between plugins that do)."""
    rng = random.Random(seed)
    nodes = []
    for i in range(40):
        b = make_node(f"n{i}").capacity(cpu=str(rng.choice([2, 4, 8])), memory=f"{rng.choice([4, 8, 16])}Gi", pods=20)
        b.label("topology.kubernetes.io/zone", f"z{min(i % 4, 2)}").label("tier", rng.choice(["a", "b"]))
        if rng.random() < 0.15:
            b.taint("dedicated", "x", rng.choice(["NoSchedule", "PreferNoSchedule"]))
        if rng.random() < 0.05:
            b.unschedulable()
        nodes.append(b.build())
    pods = []
    shapes = [("100m", "128Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("2", "512Mi")]
    for i in range(400):
        cpu, mem = rng.choice(shapes)
        pb = make_pod(f"p{i}").req(cpu=cpu, memory=mem).priority(rng.choice([0, 0, 10]))
        if rng.random() < 0.2:
            pb.toleration("dedicated", "x", "NoSchedule")
        if rng.random() < 0.2:
            pb.node_selector(tier=rng.choice(["a", "b"]))
        if rng.random() < 0.05:
            pb.host_port(8080)
        if rng.random() < 0.1:
            pb.preferred_node_affinity(10, "tier", "In", ["a"])
        if rng.random() < spread:
            group = f"g{rng.randrange(3)}"
            pb.label("app", group).spread(1, "topology.kubernetes.io/zone", {"app": group})
        pods.append(pb.build())
    return nodes, pods


WEIGHTED = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled: [{name: '*'}]
      enabled:
      - {name: NodeResourcesFit, weight: 3}
      - {name: NodeResourcesBalancedAllocation, weight: 5}
      - {name: TaintToleration, weight: 2}
      - {name: NodeAffinity, weight: 4}
"""
"""Signed plugins with weights other than 1 (their weighted sums are cached together) next to
normalising ones."""


async def place(
    nodes: list[Node], pods: list[Pod], *, node_cache: bool, config: KubeSchedulerConfiguration | None = None
) -> dict[str, tuple[str, str]]:
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(
        config or KubeSchedulerConfiguration(), in_tree_registry(), cluster, clock=lambda: 1.0, node_cache=node_cache
    )
    await cluster.start(scheduler)
    await scheduler.run_until_idle()
    cache = scheduler.profiles["default-scheduler"].node_cache
    if node_cache:
        assert cache is not None and cache.hits > 0, "the workload must reuse cached answers"
    return {
        key: (pod.node_name, scheduler.outcomes[key].message if key in scheduler.outcomes else "")
        for key, pod in cluster.pods.items()
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_cache_on_and_off_decide_the_same(seed: int) -> None:
    nodes, pods = random_cluster(seed)
    with_cache = await place(nodes, pods, node_cache=True)
    without = await place(nodes, pods, node_cache=False)
    assert with_cache == without
    placed = sum(1 for node, _ in with_cache.values() if node)
    assert 0 < placed < len(pods), "the workload must exercise both placement and failure"


@pytest.mark.parametrize("seed", [4, 5])
async def test_cache_on_and_off_decide_the_same_with_score_weights(seed: int) -> None:
    nodes, pods = random_cluster(seed)
    config = parse_scheduler_config(WEIGHTED, source="test")
    with_cache = await place(nodes, pods, node_cache=True, config=config)
    without = await place(nodes, pods, node_cache=False, config=config)
    assert with_cache == without
    assert 0 < sum(1 for node, _ in with_cache.values() if node) < len(pods)


@pytest.mark.parametrize("seed", [6, 7, 8])
async def test_cache_on_and_off_decide_the_same_with_spread_pods(seed: int) -> None:
    """Mixed pods: the signed plugins are answered from the cache around PodTopologySpread, which runs
    directly; placements and messages must not change."""
    nodes, pods = random_cluster(seed, spread=0.35)
    with_cache = await place(nodes, pods, node_cache=True)
    without = await place(nodes, pods, node_cache=False)
    assert with_cache == without
    assert 0 < sum(1 for node, _ in with_cache.values() if node) < len(pods)
    spread = [p.key for p in pods if p.topology_spread_constraints]
    assert spread and any(with_cache[key][0] for key in spread) and not all(with_cache[key][0] for key in spread)


async def test_signed_plugins_share_one_entry_across_pods_that_differ_in_an_unsigned_one() -> None:
    """Pods of one request shape, half with a spread constraint: the signed plugins' answers are one
    cache entry for both halves, not one per whole-pod signature."""
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=20).zone(f"z{i % 3}").build() for i in range(9)]
    pods = []
    for i in range(12):
        pb = make_pod(f"p{i}").req(cpu="100m", memory="128Mi")
        if i % 2:
            pb.label("app", "web").spread(1, "topology.kubernetes.io/zone", {"app": "web"})
        pods.append(pb.build())
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(KubeSchedulerConfiguration(), in_tree_registry(), cluster, clock=lambda: 1.0)
    await cluster.start(scheduler)
    await scheduler.run_until_idle()
    cache = scheduler.profiles["default-scheduler"].node_cache
    assert cache is not None
    assert all(p.node_name for p in cluster.pods.values())
    assert cache.filter_entries == 1
    assert cache.hits >= len(pods) - 1


def random_mixed_cluster(seed: int) -> tuple[list[Node], list[Pod], list[Pod]]:
    """120 nodes of four sizes over three zones (720 pod slots), 800 pods and 200 more of 16 request shapes
    in random order, a third with a zone spread constraint: each shape's entries are visited every 16 pods
    or so, so they recompute some 5-40 changed nodes at a time (the batch forms on a subset of the nodes,
    not one or two nodes nor all of them). Some nodes fill up, some carry taints or are cordoned."""
    rng = random.Random(seed)
    sizes = [("2", "4Gi"), ("4", "8Gi"), ("8", "16Gi"), ("16", "32Gi")]
    nodes = []
    for i in range(120):
        cpu, memory = sizes[i % 4]
        b = make_node(f"n{i}").capacity(cpu=cpu, memory=memory, pods=6).zone(f"z{i % 3}")
        if rng.random() < 0.1:
            b.taint("dedicated", "x", rng.choice(["NoSchedule", "PreferNoSchedule"]))
        if rng.random() < 0.03:
            b.unschedulable()
        nodes.append(b.build())
    shapes = [(cpu, mem) for cpu in ("100m", "250m", "500m", "1") for mem in ("256Mi", "512Mi", "1Gi", "2Gi")]
    pods = []
    for i in range(1000):
        cpu, mem = rng.choice(shapes)
        pb = make_pod(f"p{i}").req(cpu=cpu, memory=mem)
        if rng.random() < 0.1:
            pb.toleration("dedicated", "x", "NoSchedule")
        if rng.random() < 1 / 3:
            group = f"g{rng.randrange(4)}"
            pb.label("app", group).spread(1, "topology.kubernetes.io/zone", {"app": group})
        pods.append(pb.build())
    return nodes, pods[:800], pods[800:]


async def _place_recording(
    nodes: list[Node], pods: list[Pod], more: list[Pod], *, node_cache: bool, config: KubeSchedulerConfiguration
) -> tuple[dict[str, tuple[str, str]], list[int]]:
    """:func:`place`, then a third of the bound pods deleted and ``more`` pods scheduled; also the number
    of changed nodes each cached entry recomputed."""
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(config, in_tree_registry(), cluster, clock=lambda: 1.0, node_cache=node_cache)
    recomputed: list[int] = []
    cache = scheduler.profiles["default-scheduler"].node_cache
    if cache is not None:
        for name in ("filter_ids", "weighted_sums"):
            original = getattr(cache, name)

            def recording(*args: Any, _original: Any = original) -> Any:
                *head, compute = args

                def counted(dirty: Any) -> Any:
                    recomputed.append(len(dirty))
                    return compute(dirty)

                return _original(*head, counted)

            setattr(cache, name, recording)
    await cluster.start(scheduler)
    await scheduler.run_until_idle()
    # Free room (nodes that were full pass again: entries must turn their failures back into passes),
    # then schedule more pods of the same shapes.
    rng = random.Random(len(pods))
    bound = sorted(key for key, pod in cluster.pods.items() if pod.node_name)
    for key in rng.sample(bound, len(bound) // 3):
        await cluster.delete_pod(cluster.pods[key], reason="test")
    for pod in more:
        cluster.pods[pod.key] = pod
        scheduler.on_pod(EventType.ADDED, None, pod)
    await scheduler.run_until_idle()
    placements = {
        key: (pod.node_name, scheduler.outcomes[key].message if key in scheduler.outcomes else "")
        for key, pod in cluster.pods.items()
    }
    return placements, recomputed


@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("weighted", [False, True], ids=["default-weights", "score-weights"])
async def test_cache_on_and_off_decide_the_same_with_sixteen_shapes(seed: int, weighted: bool) -> None:
    nodes, pods, more = random_mixed_cluster(seed)
    config = parse_scheduler_config(WEIGHTED, source="test") if weighted else KubeSchedulerConfiguration()
    with_cache, recomputed = await _place_recording(nodes, pods, more, node_cache=True, config=config)
    without, _ = await _place_recording(nodes, pods, more, node_cache=False, config=config)
    assert with_cache == without
    assert 0 < sum(1 for node, _ in with_cache.values() if node) < len(with_cache)
    assert any(node for key, (node, _) in with_cache.items() if key in {p.key for p in more})
    subsets = [n for n in recomputed if FEW_NODES < n < len(nodes) // 2]
    assert len(subsets) > 50, "entries must recompute subsets of the nodes through the batch forms"
    assert any(0 < n <= FEW_NODES for n in recomputed), "and a few nodes through the per-node forms"
