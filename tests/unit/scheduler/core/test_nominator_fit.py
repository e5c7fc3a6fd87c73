"""The Filter pass with nominated pods (``FilterPhase.filter_with_nominated_pods``): the arithmetic pass
NodeResourcesFit offers (``added_pods_check``) when only resource-like filters are active gives the same
nodes and statuses as the generic per-node Filter pass."""

from __future__ import annotations

import random

import pytest

from apis.config import KubeSchedulerConfiguration
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.plugins.noderesources import plugin as fit_plugin
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.algorithm import Sampler, find_nodes_that_fit
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod

Outcome = tuple[list[str], dict[str, str]]


async def scheduler_for(nodes: list[Node], pods: list[Pod]) -> Scheduler:
    mem = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(KubeSchedulerConfiguration(), in_tree_registry(), mem, clock=lambda: 1.8e9)
    await mem.start(scheduler, list(scheduler.watched_kinds.values()))
    for pod in pods:
        if pod.nominated_node_name and not pod.node_name:
            scheduler.nominator.add(pod, pod.nominated_node_name)
    return scheduler


def outcome(scheduler: Scheduler, pod: Pod) -> Outcome:
    snapshot = scheduler.cache.snapshot
    diagnosis = Diagnosis(num_all_nodes=snapshot.num_nodes)
    _, feasible = find_nodes_that_fit(
        scheduler.profiles["default-scheduler"],
        CycleState(),
        pod,
        snapshot,
        sampler=Sampler(),
        diagnosis=diagnosis,
        nominator=scheduler.nominator,
    )
    statuses = {name: repr(status) for name, status in diagnosis.node_statuses(snapshot).items()}
    return sorted(snapshot.info(p).name for p in feasible.tolist()), statuses


def both_passes(
    scheduler: Scheduler, pod: Pod, monkeypatch: pytest.MonkeyPatch, *, by_arithmetic: bool = False
) -> Outcome:
    """The outcome by the arithmetic pass, after checking the generic pass gives the same; with
    ``by_arithmetic`` also that the arithmetic pass did run."""
    calls: list[int] = []
    real = fit_plugin._FitWithAddedPods.rejections

    def counting(self: fit_plugin._FitWithAddedPods, *args: object) -> object:
        calls.append(1)
        return real(self, *args)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(fit_plugin._FitWithAddedPods, "rejections", counting)
        fast = outcome(scheduler, pod)
    assert calls or not by_arithmetic, "the arithmetic pass ran"
    with monkeypatch.context() as m:
        m.setattr(fit_plugin.Fit, "added_pods_check", lambda *_: None)
        assert outcome(scheduler, pod) == fast, "the generic pass agrees"
    return fast


def node(name: str, cpu: str = "4", pods: int = 110) -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=pods).build()


def nominated(name: str, to: str, cpu: str, prio: int) -> Pod:
    return make_pod(name).req(cpu=cpu, memory="1Gi").priority(prio).nominated(to).build()


def running(name: str, on: str, cpu: str) -> Pod:
    return make_pod(name).req(cpu=cpu, memory="1Gi").priority(0).node(on).build()


def pending(cpu: str, prio: int) -> Pod:
    return make_pod("p").req(cpu=cpu, memory="1Gi").priority(prio).build()


async def test_only_nominated_pods_of_equal_or_higher_priority_take_room(monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler = await scheduler_for(
        [node("n1"), node("n2"), node("n3"), node("n4", pods=2)],
        [
            running("r1", "n1", "1"),
            nominated("hi", "n1", "2", 10),
            nominated("lo", "n2", "3", 5),
            nominated("eq", "n3", "3", 10),
            running("r4", "n4", "100m"),
            nominated("slot", "n4", "100m", 20),
        ],
    )
    feasible, statuses = both_passes(scheduler, pending("2", 10), monkeypatch, by_arithmetic=True)
    assert feasible == ["n2"], "n1: 1+2+2 > 4; n2: a lower-priority nomination does not count; n3: 3+2 > 4; n4: pods"
    assert "Insufficient cpu" in statuses["n1"] and "NodeResourcesFit" in statuses["n1"]
    assert "Insufficient cpu" in statuses["n3"]
    assert "Too many pods" in statuses["n4"]


async def test_a_pod_does_not_yield_to_itself_nor_count_an_assumed_pod_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    me = nominated("p", "n1", "3", 10)
    scheduler = await scheduler_for([node("n1")], [me])
    assert both_passes(scheduler, me, monkeypatch) == (["n1"], {}), "its own nomination leaves room for itself"
    placed = running("other", "n1", "2")
    scheduler2 = await scheduler_for([node("n1")], [placed])
    scheduler2.nominator.add(nominated("other", "n1", "2", 10), "n1")  # assumed and still nominated
    feasible, _ = both_passes(scheduler2, pending("2", 10), monkeypatch, by_arithmetic=True)
    assert feasible == ["n1"], "2 + 2 <= 4: the nominated pod already on the node is not added again"


@pytest.mark.parametrize("seed", range(40))
async def test_random_clusters_same_by_both_passes(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    nodes = [
        node(f"n{i}", cpu=str(rng.choice((2, 4, 8))), pods=rng.choice((3, 110))) for i in range(rng.randint(2, 10))
    ]
    pods: list[Pod] = []
    for i in range(rng.randint(0, 12)):
        pods.append(running(f"r{i}", rng.choice(nodes).name, f"{rng.choice((250, 500, 1000))}m"))
    for i in range(rng.randint(1, 10)):
        cpu = f"{rng.choice((500, 1000, 2000))}m"
        pods.append(nominated(f"nom{i}", rng.choice(nodes).name, cpu, rng.choice((1, 5, 9))))
    scheduler = await scheduler_for(nodes, pods)
    feasible, statuses = both_passes(scheduler, pending(f"{rng.choice((500, 1000, 2000))}m", 5), monkeypatch)
    assert sorted(feasible + list(statuses)) == sorted(n.name for n in nodes), "every node is accounted for"
