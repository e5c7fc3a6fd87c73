"""Preemption end to end on the in-memory cluster: decide, nominate, delete victims, bind the preemptor;
and the nominator that keeps the freed space for it."""

from __future__ import annotations

from pathlib import Path

from apis.config import KubeSchedulerConfiguration
from apis.core.types import Node, Pod
from koord_scheduler.app.simulate import run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.nominator import PodNominator, yielded_to
from tests.builders import make_node, make_pod

NOW = 1_800_000_000.0
CLUSTER_FILE = Path(__file__).parents[4] / "config" / "simulate" / "preemption-cluster.yaml"


def node(name: str, cpu: str = "4") -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=110).build()


def running(name: str, on: str, cpu: str, prio: int) -> Pod:
    return make_pod(name).req(cpu=cpu).priority(prio).node(on).build()


def pending(name: str, cpu: str, prio: int) -> Pod:
    return make_pod(name).req(cpu=cpu).priority(prio).build()


async def run(nodes: list[Node], pods: list[Pod], nominator_seed: list[tuple[Pod, str]] = ()) -> MemoryCluster:  # type: ignore[assignment]
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(KubeSchedulerConfiguration(), in_tree_registry(), cluster, clock=lambda: NOW)
    for pod, node_name in nominator_seed:
        scheduler.nominator.add(pod, node_name)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    return cluster


async def test_simulate_cluster_file_preempts_and_binds() -> None:
    result, scheduler = await run_simulation(CLUSTER_FILE, KubeSchedulerConfiguration(), in_tree_registry(), now=NOW)
    placements = {p.name: (p.node, p.message) for p in result.placements}
    assert placements == {
        "critical": ("node-2", ""),
        "polite": (
            None,
            "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
            "preemption: not eligible due to preemptionPolicy=Never.",
        ),
    }
    assert result.extra_sections["Preemptions"] == [
        {"preemptor": "default/critical", "node": "node-2", "victims": ["default/batch-2b"]}
    ]
    cluster = scheduler.source
    assert isinstance(cluster, MemoryCluster)
    assert "default/batch-2b" not in cluster.pods, "the victim is deleted"
    assert "default/web-2a" in cluster.pods, "the PDB-protected pod survives: another victim existed"
    # Nominated to node-2 (the Preemptions section), then bound there: the API server clears
    # status.nominatedNodeName at binding (ClearingNominatedNodeNameAfterBinding, on in 1.35).
    assert cluster.pods["default/critical"].nominated_node_name == ""
    assert cluster.pods["default/critical"].node_name == "node-2"
    preempted = [(e.object_key, e.message) for e in cluster.events if e.reason == "Preempted"]
    assert preempted == [("default/batch-2b", "Preempted by pod default/critical on node node-2")]


async def test_high_priority_preempts_low_and_is_bound() -> None:
    cluster = await run([node("n1")], [running("low", "n1", "4", 0), pending("high", "3", 100)])
    assert "default/low" not in cluster.pods
    assert cluster.pods["default/high"].node_name == "n1"


async def test_preemption_policy_never_waits() -> None:
    polite = make_pod("polite").req(cpu="3").priority(100).preemption_policy("Never").build()
    cluster = await run([node("n1")], [running("low", "n1", "4", 0), polite])
    assert "default/low" in cluster.pods
    assert cluster.pods["default/polite"].node_name == ""
    assert cluster.conditions["default/polite"][1].endswith("preemption: not eligible due to preemptionPolicy=Never.")


async def test_nominated_space_is_not_stolen_by_a_lower_priority_pod() -> None:
    pods = [
        running("low", "n1", "4", 0),
        running("full", "n2", "4", 1000),
        pending("high", "4", 100),
        pending("sneaky", "1", 50),
    ]
    cluster = await run([node("n1"), node("n2")], pods)
    assert cluster.pods["default/high"].node_name == "n1"
    assert cluster.pods["default/sneaky"].node_name == ""


async def test_filter_counts_nominated_pods_of_higher_or_equal_priority_only() -> None:
    promised = pending("promised", "3", 100)
    # A lower-priority pod must leave the promised room on n1 and goes to n2.
    cluster = await run([node("n1"), node("n2", cpu="2")], [pending("small", "2", 10)], [(promised, "n1")])
    assert cluster.pods["default/small"].node_name == "n2"
    # A higher-priority pod may take it.
    cluster = await run([node("n1"), node("n2", cpu="1")], [pending("big", "2", 500)], [(promised, "n1")])
    assert cluster.pods["default/big"].node_name == "n1"


async def test_nominated_pod_does_not_block_itself() -> None:
    me = make_pod("me").req(cpu="4").priority(100).nominated("n1").build()
    cluster = await run([node("n1")], [me])
    assert cluster.pods["default/me"].node_name == "n1"


def test_nominator_tracks_status_and_in_memory_nominations() -> None:
    nominator = PodNominator()
    a = pending("a", "1", 5)
    nominator.add(a, "n1")
    assert nominator.node_of("default/a") == "n1"
    # An update without nominatedNodeName on either side keeps the in-memory nomination (watch lag).
    nominator.update(a, a)
    assert nominator.node_of("default/a") == "n1"
    # The status clearing it wins.
    with_status = make_pod("a").req(cpu="1").priority(5).nominated("n1").build()
    nominator.update(with_status, a)
    assert nominator.node_of("default/a") == ""
    # A nomination from the status; binding ends it.
    nominator.update(None, with_status)
    assert [p.name for p in nominator.nominated_pods_for_node("n1")] == ["a"]
    nominator.update(with_status, make_pod("a").node("n1").build())
    assert len(nominator) == 0 and nominator.nominated_pods_for_node("n1") == []


def test_yielded_to_is_higher_or_equal_priority_and_not_self() -> None:
    me = pending("me", "1", 10)
    others = [pending("lower", "1", 9), pending("equal", "1", 10), pending("higher", "1", 11), me]
    assert [p.name for p in yielded_to(others, me)] == ["equal", "higher"]
