"""DefaultPreemption's PostFilter over the default profile: victims, PDBs, node choice, messages, metrics."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from apis.config import KubeSchedulerConfiguration, parse_scheduler_config
from apis.core.types import Node, Pod
from apis.scheduling import ANNOTATION_RESERVE_POD
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import ObjectKind, PostFilterResult
from koord_scheduler.plugins.defaultpreemption.metrics import PreemptionMetrics
from koord_scheduler.plugins.defaultpreemption.pdb import PDB_KIND
from koord_scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.plugins.victim_execution import POD_KIND
from koord_scheduler.scheduler.algorithm import Sampler, find_nodes_that_fit
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod

NOW = 1_800_000_000.0
T0, T1 = "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z"


@dataclass
class Env:
    scheduler: Scheduler
    cluster: MemoryCluster
    plugin: DefaultPreemption

    def attempt(self, pod: Pod) -> tuple[PostFilterResult | None, Status]:
        """One scheduling cycle's Filter (which must fail) and the PostFilter."""
        fwk = self.scheduler.profiles["default-scheduler"]
        snapshot = self.scheduler.cache.snapshot
        state = CycleState()
        diagnosis = Diagnosis(num_all_nodes=snapshot.num_nodes)
        _, feasible = find_nodes_that_fit(
            fwk, state, pod, snapshot, sampler=Sampler(), diagnosis=diagnosis, nominator=self.scheduler.nominator
        )
        assert len(feasible) == 0, "the pod must not fit anywhere"
        return self.plugin.post_filter(state, pod, diagnosis)


async def env(
    nodes: list[Node],
    pods: list[Pod],
    pdbs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    *,
    cluster_type: type[MemoryCluster] = MemoryCluster,
) -> Env:
    cluster = cluster_type.from_objects(
        nodes,
        pods,
        {
            "PodDisruptionBudget": [
                (f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}", p) for p in pdbs
            ]
        },
    )
    scheduler = build_scheduler(KubeSchedulerConfiguration(), in_tree_registry(), cluster, clock=lambda: NOW)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    plugin = scheduler.profiles["default-scheduler"].plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    plugin._offset = lambda n: 0  # deterministic dry-run start
    return Env(scheduler, cluster, plugin)


def node(name: str, cpu: str = "4", **labels: str) -> Node:
    b = make_node(name).capacity(cpu=cpu, memory="16Gi", pods=110)
    for k, v in labels.items():
        b.label(k, v)
    return b.build()


def running(name: str, on: str, cpu: str, prio: int, *, created: str = T0, **labels: str) -> Pod:
    b = make_pod(name).req(cpu=cpu).priority(prio).node(on).created(created)
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


def preemptor(cpu: str, prio: int = 100) -> Pod:
    return make_pod("high").req(cpu=cpu).priority(prio).build()


def victims_of(e: Env) -> list[str]:
    return [v.split("/")[1] for v in e.plugin.history[-1].victims]


async def test_minimal_victims_most_important_reprieved_first() -> None:
    pods = [running(f"p{i}", "n1", "1", i) for i in (1, 2, 3, 4)]
    e = await env([node("n1")], pods)
    result, status = e.attempt(preemptor("2"))
    assert (result, status) == (PostFilterResult("n1"), Status(plugin=""))
    assert victims_of(e) == ["p2", "p1"], "p4 and p3 go back first (1+1+2 = 4 fits), p2 and p1 no longer fit"
    await e.plugin.drain()
    assert sorted(e.cluster.pods) == ["default/p3", "default/p4"], "victims are deleted through the cluster"
    assert [ev.message for ev in e.cluster.events if ev.reason == "Preempted"] == [
        "Preempted by pod uid-default-high on node n1",
        "Preempted by pod uid-default-high on node n1",
    ]


async def test_equal_priority_start_time_decides_reprieve_order() -> None:
    pods = [running("old", "n1", "2", 5, created=T0), running("young", "n1", "2", 5, created=T1)]
    e = await env([node("n1")], pods)
    e.attempt(preemptor("2"))
    assert victims_of(e) == ["young"], "the earlier-started pod is more important and is spared"


@pytest.mark.parametrize(
    ("pods", "want_message"),
    [
        pytest.param(
            [running("peer", "n1", "4", 100)],
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
            id="equal-priority-is-no-victim",
        ),
        pytest.param(
            [make_pod("rsv").req(cpu="4").priority(0).node("n1").annotation(ANNOTATION_RESERVE_POD, "true").build()],
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
            id="reserve-pod-is-never-a-victim",
        ),
        pytest.param(
            [running("low", "n1", "1", 1), running("peer", "n1", "3", 100)],
            "preemption: 0/1 nodes are available: 1 Insufficient cpu.",
            id="still-no-fit-after-removing-all-lower-priority",
        ),
    ],
)
async def test_no_candidate_messages(pods: list[Pod], want_message: str) -> None:
    e = await env([node("n1")], pods)
    result, status = e.attempt(preemptor("2"))
    assert result == PostFilterResult(""), "no candidate clears the nomination"
    assert (status.code, status.message) == (Code.UNSCHEDULABLE, want_message)


async def test_unresolvable_nodes_are_not_candidates() -> None:
    tainted = make_node("n2").capacity(cpu="4", memory="16Gi", pods=110).taint("dedicated", "x").build()
    e = await env([node("n1"), tainted], [running("peer", "n1", "4", 100), running("low", "n2", "4", 0)])
    _, status = e.attempt(preemptor("2"))
    assert status.message == (
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )


async def test_pod_larger_than_any_node_is_not_helped() -> None:
    e = await env([node("n1")], [running("low", "n1", "1", 0)])
    _, status = e.attempt(preemptor("8"))
    assert status.message == "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


async def test_preemption_policy_never() -> None:
    e = await env([node("n1")], [running("low", "n1", "4", 0)])
    pod = make_pod("polite").req(cpu="2").priority(100).preemption_policy("Never").build()
    result, status = e.attempt(pod)
    assert result is None
    assert status.message == "preemption: not eligible due to preemptionPolicy=Never."
    assert e.plugin.history == []


async def test_pdb_violating_pod_reprieved_first() -> None:
    pods = [running("web", "n1", "1", 0, app="web"), running("batch", "n1", "1", 0, created=T1)]
    e = await env([node("n1", cpu="2")], pods, [pdb("web-pdb", 0, app="web")])
    assert len(e.plugin.budgets) == 1
    e.attempt(preemptor("1"))
    assert victims_of(e) == ["batch"], "web is tried first (PDB-violating) and fits; batch is the victim"


async def test_pdb_violation_counted_when_unavoidable_and_other_node_preferred() -> None:
    pods = [
        running("web", "n1", "2", 0, app="web"),
        running("batch", "n2", "2", 50),
    ]
    e = await env([node("n1", cpu="2"), node("n2", cpu="2")], pods, [pdb("web-pdb", 0, app="web")])
    result, _ = e.attempt(preemptor("2"))
    assert result == PostFilterResult("n2"), "n1 would violate a PDB; n2's victim has a higher priority but none"


async def test_node_choice_lowest_highest_priority_victim() -> None:
    pods = [running("a", "n1", "4", 50), running("b", "n2", "2", 10), running("c", "n2", "2", 10)]
    e = await env([node("n1"), node("n2")], pods)
    result, _ = e.attempt(preemptor("4"))
    assert result == PostFilterResult("n2"), "two priority-10 victims beat one priority-50 victim"


async def test_terminating_victim_on_nominated_node_blocks_a_second_preemption() -> None:
    e = await env([node("n1")], [running("low", "n1", "4", 0)])
    pod = preemptor("2")
    result, _ = e.attempt(pod)
    assert result == PostFilterResult("n1")
    # Before the deletion lands, the preemptor is tried again with its nomination.
    nominated = make_pod("high").req(cpu="2").priority(100).nominated("n1").build()
    again, status = e.attempt(nominated)
    assert again is None, "the nomination is kept"
    assert status.message == "preemption: not eligible due to a terminating pod on the nominated node."
    await e.plugin.drain()


async def test_nominated_higher_priority_pod_is_counted_in_the_dry_run() -> None:
    e = await env([node("n1")], [running("low", "n1", "4", 0)])
    other = make_pod("other").req(cpu="3").priority(200).nominated("n1").build()
    e.scheduler.nominator.add(other)
    _, status = e.attempt(preemptor("2"))
    assert status.message == "preemption: 0/1 nodes are available: 1 Insufficient cpu.", (
        "a priority-200 pod is promised 3 of the 4 cpus: removing low does not make room for 2 more"
    )


async def test_lower_priority_nomination_on_the_chosen_node_is_cleared() -> None:
    low_pending = make_pod("mid").req(cpu="1").priority(50).nominated("n1").build()
    e = await env([node("n1")], [running("low", "n1", "4", 0), low_pending])
    assert e.scheduler.nominator.node_of("default/mid") == "n1"
    e.attempt(preemptor("4"))
    await e.plugin.drain()
    assert e.cluster.pods["default/mid"].nominated_node_name == ""
    assert e.scheduler.nominator.node_of("default/mid") == ""


async def test_dry_run_restores_the_snapshot() -> None:
    pods = [running(f"p{i}", "n1", "1", i) for i in (1, 2, 3)] + [running("q", "n2", "4", 1)]
    e = await env([node("n1"), node("n2")], pods)
    snap = e.scheduler.cache.snapshot
    before = (snap.requested.copy(), snap.pod_count.copy(), {i.name: list(i.pods) for i in snap.iter_nodes()})
    e.attempt(preemptor("4"))  # (the victims are deleted only once the API calls run, after this cycle)
    after = (snap.requested, snap.pod_count, {i.name: sorted(i.pods) for i in snap.iter_nodes()})
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    assert {k: sorted(v) for k, v in before[2].items()} == after[2]
    await e.plugin.drain()


async def test_dry_run_stops_at_enough_candidates() -> None:
    nodes = [node(f"n{i}") for i in range(5)]
    pods = [running(f"p{i}", f"n{i}", "4", 0) for i in range(5)]
    e = await env(nodes, pods)
    e.plugin.args = e.plugin.args.model_copy(update={"min_candidate_nodes_absolute": 2})
    fwk = e.scheduler.profiles["default-scheduler"]
    state = CycleState()
    fwk.run_pre_filter(state, preemptor("4"))
    candidates, statuses = e.plugin.dry_run(state, preemptor("4"), [n.name for n in nodes], 3, 2)
    assert [c.node_name for c in candidates] == ["n3", "n4"], "starts at the offset, stops at 2 candidates"
    assert statuses == {}


async def test_metrics() -> None:
    e = await env([node("n1")], [running("a", "n1", "2", 0), running("b", "n1", "2", 0)])
    e.attempt(preemptor("4"))
    e.attempt(make_pod("x").req(cpu="4").priority(100).preemption_policy("Never").build())
    registry = e.scheduler.metrics.registry
    assert registry.get_sample_value("scheduler_preemption_attempts_total") == 2
    assert registry.get_sample_value("scheduler_preemption_victims_count") == 1
    assert registry.get_sample_value("scheduler_preemption_victims_sum") == 2
    assert registry.get_sample_value("scheduler_preemption_victims_bucket", {"le": "2.0"}) == 1


def test_metrics_are_created_once_per_registry() -> None:
    registry = CollectorRegistry()
    first, second = PreemptionMetrics.of(registry), PreemptionMetrics.of(registry)
    assert first is second
    first.attempts.inc()
    second.attempts.inc()
    assert registry.get_sample_value("scheduler_preemption_attempts_total") == 2
    assert PreemptionMetrics.of(CollectorRegistry()) is not first
    assert PreemptionMetrics.of(None) is not PreemptionMetrics.of(None), "no registry: metrics of their own"


async def test_two_profiles_count_their_attempts_in_one_metric() -> None:
    config = parse_scheduler_config(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: a\n- schedulerName: b\n",
        source="test",
    )
    cluster = MemoryCluster.from_objects([node("n1")], [])
    scheduler = build_scheduler(config, in_tree_registry(), cluster, clock=lambda: NOW)
    pod = preemptor("2")
    for profile in ("a", "b"):
        plugin = scheduler.profiles[profile].plugins["DefaultPreemption"]
        assert isinstance(plugin, DefaultPreemption)
        plugin.post_filter(CycleState(), pod, Diagnosis(num_all_nodes=1))
    assert scheduler.metrics.registry.get_sample_value("scheduler_preemption_attempts_total") == 2


async def test_pdb_deleted_is_forgotten() -> None:
    e = await env([node("n1")], [], [pdb("web-pdb", 0, app="web")])
    e.cluster.delete_object(PDB_KIND, "web-pdb", namespace="default")
    assert len(e.plugin.budgets) == 0


@pytest.mark.parametrize("bulk_screen", [True, False], ids=["bulk-screen", "per-node-only"])
async def test_bulk_screen_gives_the_same_candidates_and_statuses(bulk_screen: bool) -> None:
    nodes = [node(f"n{i}") for i in range(6)]
    pods = [
        running("a", "n0", "4", 0),  # candidate: one victim
        running("b", "n1", "4", 100),  # no victims
        running("c", "n2", "1", 0),
        running("d", "n2", "3", 200),  # still no fit without c
        running("e", "n3", "2", 0),
        running("f", "n3", "2", 1),  # candidate: two victims
        running("g", "n4", "4", 0),  # a nominated priority-300 pod takes the room
        running("h", "n5", "4", 5),  # candidate
    ]
    e = await env(nodes, pods)
    e.scheduler.nominator.add(make_pod("vip").req(cpu="2").priority(300).build(), "n4")
    if not bulk_screen:
        e.plugin.search.nodes_independent = lambda state: False  # type: ignore[method-assign]
    fwk = e.scheduler.profiles["default-scheduler"]
    state = CycleState()
    pod = preemptor("3")
    fwk.run_pre_filter(state, pod)
    candidates, statuses = e.plugin.dry_run(state, pod, [n.name for n in nodes], 0, 6)
    assert [(c.node_name, [v.name for v in c.victims]) for c in candidates] == [
        ("n0", ["a"]),
        ("n3", ["f", "e"]),
        ("n5", ["h"]),
    ]
    assert {n: s.message for n, s in statuses.items()} == {
        "n1": "No preemption victims found for incoming pod",
        "n2": "Insufficient cpu",
        "n4": "Insufficient cpu",
    }


class PodStatusCluster(MemoryCluster):
    """The in-memory cluster recording the status patches and deletions in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str, Any]] = []

    async def patch_object_status(
        self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        updated = await super().patch_object_status(kind, name, patch, namespace=namespace)
        if kind.kind == "Pod":
            self.calls.append(("patch", f"{namespace}/{name}", patch))
        return updated

    async def delete_pod(self, pod: Pod, *, reason: str) -> None:
        self.calls.append(("delete", pod.key, self.pods[pod.key].conditions.get("DisruptionTarget")))
        await super().delete_pod(pod, reason=reason)


async def test_victims_become_disruption_targets_before_they_are_deleted() -> None:
    e = await env([node("n1")], [running("low", "n1", "3", 1)], cluster_type=PodStatusCluster)
    e.attempt(preemptor("2"))
    await e.plugin.drain()
    cluster = e.cluster
    assert isinstance(cluster, PodStatusCluster)
    assert cluster.calls == [
        (
            "patch",
            "default/low",
            {
                "status": {
                    "conditions": [
                        {
                            "type": "DisruptionTarget",
                            "status": "True",
                            "reason": "PreemptionByScheduler",
                            "message": "default-scheduler: preempting to accommodate a higher priority pod",
                            "lastTransitionTime": "2027-01-15T08:00:00Z",
                        }
                    ]
                }
            },
        ),
        ("delete", "default/low", "True"),
    ], "the condition is written through pods/status first, then the victim is deleted"


class NoPodStatusCluster(MemoryCluster):
    """A cluster that refuses pods/status patches (e.g. RBAC without pods/status patch)."""

    async def patch_object_status(
        self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        if kind.kind == "Pod":
            raise ClusterError(f'pods "{name}" is forbidden')
        return await super().patch_object_status(kind, name, patch, namespace=namespace)


async def test_memory_cluster_merges_pod_conditions_by_type() -> None:
    """What the API server does with the strategic merge patch the plugin sends: the new condition is
    added, the others keep their status and transition times."""
    victim = make_pod("v").node("n1").condition("Ready").build()
    e = await env([node("n1")], [victim])
    patch = {
        "status": {
            "conditions": [{"type": "DisruptionTarget", "status": "True", "lastTransitionTime": "2027-01-15T08:00:00Z"}]
        }
    }
    await e.cluster.patch_object_status(POD_KIND, "v", patch, namespace="default")
    got = e.cluster.pods["default/v"]
    assert dict(got.conditions) == {"Ready": "True", "DisruptionTarget": "True"}
    assert got.condition_times["DisruptionTarget"] == 1_800_000_000.0
    with pytest.raises(ClusterError, match="only conditions"):
        await e.cluster.patch_object_status(POD_KIND, "v", {"status": {"phase": "Failed"}}, namespace="default")


async def test_a_cluster_that_cannot_patch_pods_still_gets_the_victims_deleted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pods = [running(f"p{i}", "n1", "1", i) for i in (1, 2, 3, 4)]
    e = await env([node("n1")], pods, cluster_type=NoPodStatusCluster)
    with caplog.at_level(logging.DEBUG, logger="koord_scheduler.plugins.victim_execution"):
        e.attempt(preemptor("3"))
        await e.plugin.drain()
    assert sorted(e.cluster.pods) == ["default/p4"], "the three victims are deleted anyway"
    failures = [r.levelno for r in caplog.records if "DisruptionTarget failed" in r.getMessage()]
    assert failures == [logging.WARNING, logging.DEBUG, logging.DEBUG], "one warning, then quieter"
