"""The victim search by resource arithmetic against the generic per-node Filter search: same candidates,
same victims, same node statuses, on hand-built and randomized clusters; and its pure core by hand."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from apis.config import KubeSchedulerConfiguration
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.status import Status
from koord_scheduler.plugins.defaultpreemption import policy
from koord_scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from koord_scheduler.plugins.defaultpreemption.resource_reprieve import NodeRows, reprieve_rows, resource_fit_request
from koord_scheduler.plugins.noderesources.plugin import Fit
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.plugins.resource_fit import fit_request
from koord_scheduler.scheduler.algorithm import Sampler, find_nodes_that_fit
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod

NOW = 1_800_000_000.0
HOSTNAME = "kubernetes.io/hostname"
Outcome = tuple[list[tuple[str, tuple[str, ...], int]], dict[str, Status]]


class Both:
    """One cluster; the same dry run by either search."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        plugin = scheduler.profiles["default-scheduler"].plugins["DefaultPreemption"]
        assert isinstance(plugin, DefaultPreemption)
        self.plugin = plugin
        self.fast_batches = 0
        fast_chunk = self.plugin.search._fast_chunk

        def counting(*args: Any) -> Any:
            found = fast_chunk(*args)
            self.fast_batches += bool(found)
            return found

        self.plugin.search._fast_chunk = counting  # type: ignore[method-assign, assignment]

    def dry_run(self, pod: Pod, *, fast: bool, offset: int = 0, wanted: int | None = None) -> Outcome:
        fwk = self.scheduler.profiles["default-scheduler"]
        snapshot = self.scheduler.cache.snapshot
        state = CycleState()
        diagnosis = Diagnosis(num_all_nodes=snapshot.num_nodes)
        _, feasible = find_nodes_that_fit(
            fwk, state, pod, snapshot, sampler=Sampler(), diagnosis=diagnosis, nominator=self.scheduler.nominator
        )
        assert len(feasible) == 0, "the pod must not fit anywhere"
        order = [info.name for info in snapshot.iter_nodes()]
        potential = policy.potential_nodes(diagnosis.node_statuses(snapshot), order)
        if not potential:
            return [], {}
        self.plugin.fast_reprieve = fast
        want = wanted or policy.num_candidates(len(potential), 10, 100)
        before = snapshot.requested.copy(), snapshot.pod_count.copy()
        candidates, statuses = self.plugin.dry_run(state, pod, potential, offset % len(potential), want)
        assert np.array_equal(before[0], snapshot.requested) and np.array_equal(before[1], snapshot.pod_count), (
            "the dry run leaves the snapshot as it found it"
        )
        return [(c.node_name, tuple(v.key for v in c.victims), c.num_pdb_violations) for c in candidates], statuses

    def compare(self, pod: Pod, **kw: Any) -> Outcome:
        want = self.dry_run(pod, fast=False, **kw)
        got = self.dry_run(pod, fast=True, **kw)
        assert got == want
        return got


async def cluster(nodes: list[Node], pods: list[Pod], pdbs: list[dict[str, Any]] = ()) -> Both:  # type: ignore[assignment]
    mem = MemoryCluster.from_objects(
        nodes, pods, {"PodDisruptionBudget": [(f"default/{p['metadata']['name']}", p) for p in pdbs]}
    )
    scheduler = build_scheduler(KubeSchedulerConfiguration(), in_tree_registry(), mem, clock=lambda: NOW)
    await mem.start(scheduler, list(scheduler.watched_kinds.values()))
    for pod in pods:
        if pod.nominated_node_name and not pod.node_name:
            scheduler.nominator.add(pod, pod.nominated_node_name)
    return Both(scheduler)


def node(name: str, cpu: str = "4", pods: int = 110) -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=pods).build()


def running(name: str, on: str, cpu: str, prio: int, *, mem: str = "1Gi", created: int = 0, **labels: str) -> Pod:
    b = make_pod(name).req(cpu=cpu, memory=mem).priority(prio).node(on).created(f"2024-01-01T00:{created:02d}:00Z")
    for k, v in labels.items():
        b.label(k, v)
    return b.build()


def pdb(name: str, allowed: int, **match: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": match}},
        "status": {"disruptionsAllowed": allowed},
    }


def high(cpu: str, prio: int = 100, mem: str = "1Gi") -> Pod:
    return make_pod("high").req(cpu=cpu, memory=mem).priority(prio).build()


async def test_minimal_victims_same_by_both_searches() -> None:
    both = await cluster(
        [node("n1"), node("n2")],
        [
            *(running(f"a{i}", "n1", "1", i) for i in (1, 2, 3, 4)),
            running("b1", "n2", "3", 1),
            running("b2", "n2", "1", 7),
        ],
    )
    got = both.compare(high("2"))
    assert got == ([("n1", ("default/a2", "default/a1"), 0), ("n2", ("default/b1",), 0)], {})
    assert both.fast_batches == 1, "the arithmetic search ran"


async def test_pdb_violations_and_mixed_groups_same_by_both_searches() -> None:
    pods = [
        running("v1", "n1", "2", 1, app="db"),
        running("v2", "n1", "1", 2, app="db"),
        running("w1", "n1", "1", 3),
        running("x1", "n2", "4", 5, app="db"),
    ]
    both = await cluster([node("n1"), node("n2")], pods, [pdb("db", 1, app="db")])
    got = both.compare(high("3"))
    assert got == ([("n2", ("default/x1",), 0), ("n1", ("default/v2", "default/v1"), 1)], {}), (
        "n1: v1 would take the budget below zero and is tried first (2+3 > 4, victim); w1 is spared (1+3 = 4), "
        "v2 is not; victims from both groups are ordered most important first; the violating candidate goes last"
    )
    assert both.fast_batches == 1


async def test_nominated_pods_and_pod_slots_same_by_both_searches() -> None:
    pods = [
        running("a1", "n1", "1", 1),
        running("a2", "n1", "1", 1, created=1),
        make_pod("other").req(cpu="2", memory="1Gi").priority(100).nominated("n1").build(),
        running("c1", "n2", "100m", 1),
        running("c2", "n2", "100m", 2),
    ]
    both = await cluster([node("n1"), node("n2", pods=2)], pods)
    got = both.compare(high("2"))
    assert got == ([("n1", ("default/a1", "default/a2"), 0), ("n2", ("default/c1",), 0)], {}), (
        "n1: the nominated pod's 2 CPU count, so both pods go (a1 started first); n2: one pod slot is enough"
    )
    assert both.fast_batches == 1


async def test_nodes_without_room_keep_the_generic_statuses() -> None:
    pods = [running("peer", "n1", "4", 100), running("low", "n2", "1", 1), running("big", "n2", "3", 200)]
    both = await cluster([node("n1"), node("n2")], pods)
    got = both.compare(high("2"))
    assert got[0] == []
    assert {n: s.message for n, s in got[1].items()} == {"n1": policy.NO_VICTIMS, "n2": "Insufficient cpu"}


async def test_host_ports_turn_the_arithmetic_off_and_the_generic_search_decides() -> None:
    port_pod = running("web", "n1", "1", 1)
    both = await cluster([node("n1")], [port_pod, running("fill", "n1", "3", 1)])
    pod = make_pod("high").req(cpu="2", memory="1Gi").priority(100).host_port(8080).build()
    got = both.compare(pod)
    assert got == ([("n1", ("default/fill",), 0)], {})
    assert both.fast_batches == 0, "NodePorts is active for this pod, so only the generic search runs"


@pytest.mark.parametrize(
    ("pod", "want_exact"),
    [
        pytest.param(high("1"), True, id="resources-only"),
        pytest.param(make_pod("p").req(cpu="1").priority(9).host_port(80).build(), False, id="nodeports-active"),
        pytest.param(
            make_pod("p").req(cpu="1").priority(9).pod_affinity(HOSTNAME, {"app": "x"}, anti=True).build(),
            False,
            id="interpodaffinity-active",
        ),
    ],
)
async def test_resource_fit_request_only_when_exact(pod: Pod, want_exact: bool) -> None:
    both = await cluster([node("n1")], [])
    fwk = both.scheduler.profiles["default-scheduler"]
    state = CycleState()
    fwk.run_pre_filter(state, pod)
    assert (resource_fit_request(fwk, state) is not None) == want_exact


def test_reprieve_rows_by_hand() -> None:
    """Two nodes of 4 CPU over one column. n0: pods of 2, 1, 1 to put back (most important first) for a pod
    of 2: 2 goes back (2+2 = 4), 1 does not (5), 1 does not. n1: a nominated 1 CPU and pods of 1, 1 for a
    pod of 2: 1 goes back (1+1+2 = 4), the next does not. n2 never fits (nominated 3 + 2 > 4)."""
    fit = fit_request(np.array([2000], dtype=np.int64), ["cpu"])
    rows = NodeRows(
        allocatable=np.array([[4000], [4000], [4000]]),
        requested=np.zeros((3, 1), dtype=np.int64),
        pod_count=np.zeros(3, dtype=np.int64),
        allowed_pods=np.array([110, 110, 110]),
        nominated_requested=np.array([[0], [1000], [3000]]),
        nominated_count=np.array([0, 1, 1]),
        returned=np.array([[[2000], [1000], [1000]], [[1000], [1000], [0]], [[1000], [0], [0]]]),
        present=np.array([[True, True, True], [True, True, False], [True, False, False]]),
    )
    fits, victim = reprieve_rows(fit, rows)
    assert fits.tolist() == [True, True, False]
    assert victim.tolist() == [[False, True, True], [False, True, False], [False, False, False]]


def _random_cluster(rng: random.Random, max_nodes: int = 12) -> tuple[list[Node], list[Pod], list[dict[str, Any]]]:
    nodes = [
        node(f"n{i}", cpu=str(rng.choice((2, 4, 8))), pods=rng.choice((3, 6, 110)))
        for i in range(rng.randint(1, max_nodes))
    ]
    pods: list[Pod] = []
    for n in nodes:
        budget_cpu = int(n.allocatable["cpu"])
        for j in range(rng.randint(1, 8)):
            cpu = rng.choice((250, 500, 1000, 1500, 2000))
            if cpu > budget_cpu or len([p for p in pods if p.node_name == n.name]) >= n.allocatable["pods"]:
                break
            budget_cpu -= cpu
            labels = {"app": rng.choice(("a", "b"))} if rng.random() < 0.4 else {}
            pods.append(
                running(
                    f"{n.name}-p{j}",
                    n.name,
                    f"{cpu}m",
                    rng.randint(0, 6),
                    mem=f"{rng.randint(1, 4)}Gi",
                    created=rng.randint(0, 3),
                    **labels,
                )
            )
    for k in range(rng.randint(0, 2)):
        target = rng.choice(nodes).name
        pods.append(
            make_pod(f"nom{k}")
            .req(cpu=f"{rng.choice((500, 1000, 2000))}m", memory="1Gi")
            .priority(rng.choice((5, 50, 100)))
            .nominated(target)
            .build()
        )
    pdbs = [pdb(f"pdb-{app}", rng.randint(0, 2), app=app) for app in ("a", "b") if rng.random() < 0.5]
    return nodes, pods, pdbs


def random_preemptor(rng: random.Random) -> Pod:
    return high(f"{rng.choice((2000, 3000, 4000, 6000))}m", prio=rng.choice((3, 7, 100)), mem=f"{rng.randint(1, 15)}Gi")


@pytest.mark.parametrize("seed", range(60))
async def test_random_clusters_same_by_both_searches(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every draw: the Filter pass with nominated pods gives the same nodes and statuses by arithmetic and
    by the generic per-node Filter; when the preemptor fits nowhere, both victim searches agree too."""
    rng = random.Random(seed)
    nodes, pods, pdbs = _random_cluster(rng)
    both = await cluster(nodes, pods, pdbs)
    pod = random_preemptor(rng)
    by_arithmetic = feasible_and_statuses(both, pod)
    with monkeypatch.context() as m:
        m.setattr(Fit, "added_pods_check", lambda *_: None)
        assert feasible_and_statuses(both, pod) == by_arithmetic
    if not by_arithmetic[0]:
        both.compare(pod, offset=rng.randint(0, 20), wanted=rng.randint(1, 4))


def feasible_and_statuses(both: Both, pod: Pod) -> tuple[list[str], dict[str, str]]:
    snapshot = both.scheduler.cache.snapshot
    fwk = both.scheduler.profiles["default-scheduler"]
    diagnosis = Diagnosis(num_all_nodes=snapshot.num_nodes)
    _, feasible = find_nodes_that_fit(
        fwk, CycleState(), pod, snapshot, sampler=Sampler(), diagnosis=diagnosis, nominator=both.scheduler.nominator
    )
    statuses = {name: repr(status) for name, status in diagnosis.node_statuses(snapshot).items()}
    return [snapshot.info(p).name for p in feasible.tolist()], statuses


@pytest.mark.parametrize("seed", range(8))
async def test_random_large_clusters_same_by_both_searches_over_several_batches(seed: int) -> None:
    """40 to 60 full nodes and 18 to 30 wanted candidates: the dry run screens several batches
    (``policy.batch_size``); some nodes hold a pod the preemptor cannot remove."""
    rng = random.Random(1000 + seed)
    nodes = [node(f"n{i}") for i in range(rng.randint(40, 60))]
    pods: list[Pod] = []
    for n in nodes:
        used = 0
        for j in range(8):
            cpu = rng.choice((500, 1000, 1500))
            if used + cpu > 4000:
                break
            used += cpu
            prio = 1000 if rng.random() < 0.15 else rng.randint(0, 5)
            pods.append(running(f"{n.name}-p{j}", n.name, f"{cpu}m", prio, created=rng.randint(0, 3)))
        if used <= 1000:
            pods.append(running(f"{n.name}-fill", n.name, f"{4000 - used}m", rng.randint(0, 5)))
    both = await cluster(nodes, pods)
    got = both.compare(high("3"), offset=rng.randint(0, 100), wanted=rng.randint(18, 30))
    assert got[0], "some node has room after preemption"
    assert both.fast_batches >= 2, "more than one batch was screened"


async def test_random_clusters_exercise_the_arithmetic() -> None:
    """The randomized cases above are not vacuous: most of them take the arithmetic path."""
    used = 0
    for seed in range(60):
        rng = random.Random(seed)
        nodes, pods, pdbs = _random_cluster(rng)
        both = await cluster(nodes, pods, pdbs)
        pod = random_preemptor(rng)
        try:
            both.dry_run(pod, fast=True, offset=rng.randint(0, 20), wanted=rng.randint(1, 4))
        except AssertionError:
            continue
        used += both.fast_batches
    assert used >= 20


async def test_a_wrong_arithmetic_answer_is_caught_by_the_filter_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Correctness never depends on the shortcut: when the arithmetic claims the pod fits with fewer victims
    than it needs, the full Filter pass rejects the node and the generic search decides it."""
    from koord_scheduler.plugins.defaultpreemption import victims as victims_module

    def too_optimistic(fit: Any, rows: NodeRows) -> tuple[Any, Any]:
        fits, victim = reprieve_rows(fit, rows)
        victim[:, 2:] = False  # n1: a4 is spared, a3 stays a victim, a2 and a1 are wrongly spared
        return fits, victim

    both = await cluster([node("n1")], [running(f"a{i}", "n1", "1", i) for i in (1, 2, 3, 4)])
    want = both.dry_run(high("3"), fast=False)
    monkeypatch.setattr(victims_module, "reprieve_rows", too_optimistic)
    assert both.dry_run(high("3"), fast=True) == want == ([("n1", ("default/a3", "default/a2", "default/a1"), 0)], {})
    assert both.fast_batches == 1, "the arithmetic ran and its answer was thrown away"
