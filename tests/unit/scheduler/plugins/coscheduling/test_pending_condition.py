"""``PodScheduled=False`` on pending gang members (GangPendingPodsConditionPatch): the round's untried members
get the quick-failed member's message at once, members held at PreEnqueue get the gang's reason, and the gate
turns both off."""

from __future__ import annotations

import asyncio
import json

import pytest
from gang_harness import CONFIG, NOW, gang_pod, node, pod, simulate

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from apis.core.types import Pod
from apis.feature_gates import SchedulerFeatureGates
from koord_scheduler.app.simulate import run_simulation
from koord_scheduler.plugins.coscheduling.pending_condition import condition_patch
from koord_scheduler.plugins.coscheduling.plugin import Coscheduling
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler, SchedulerOptions
from tests.builders import make_pod

GATE_OFF = SchedulerFeatureGates.resolve({"GangPendingPodsConditionPatch": False})


def failed_scheduling(cluster: MemoryCluster) -> set[str]:
    return {e.object_key for e in cluster.events if e.reason == "FailedScheduling"}


async def start(*objects: str, gates: SchedulerFeatureGates | None = None) -> tuple[Scheduler, MemoryCluster]:
    docs = [json.loads(o) for o in objects]
    nodes = [parse_node(d) for d in docs if d["kind"] == "Node"]
    pods = [parse_pod(d) for d in docs if d["kind"] == "Pod"]
    cluster = MemoryCluster.from_objects(nodes, pods)
    options = SchedulerOptions(feature_gates=gates) if gates is not None else SchedulerOptions()
    scheduler = build_scheduler(
        parse_scheduler_config(CONFIG), in_tree_registry(), cluster, clock=lambda: NOW, options=options
    )
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    return scheduler, cluster


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_rounds_untried_members_get_the_quick_failed_members_message_at_once() -> None:
    # One node for a gang of five: p0 waits at Permit, p1 fails (the round's root cause), p2 quick-fails.
    scheduler, cluster = await start(node("n0"), *(gang_pod(f"p{i}", "g", 5) for i in range(5)))
    scheduler.warm_up()
    for _ in range(3):
        assert scheduler.schedule_one()
    await settle()
    tried = failed_scheduling(cluster)
    assert "default/p2" in tried and not tried & {"default/p3", "default/p4"}, "p3 and p4 not tried yet"
    want = cluster.conditions["default/p2"]
    assert want[0] == "Unschedulable"
    assert want[1].startswith('0/1 nodes are available: GangGroup "default/g" gets rejected due to member Pod')
    assert cluster.conditions["default/p3"] == want
    assert cluster.conditions["default/p4"] == want
    assert cluster.pods["default/p3"].conditions["PodScheduled"] == "False"
    assert cluster.pods["default/p3"].nominated_node_name == ""
    await scheduler.run_until_idle()


async def test_once_per_round_and_not_for_pods_tried_already() -> None:
    scheduler, _ = await start(node("n0"), *(gang_pod(f"p{i}", "g", 5) for i in range(5)))
    plugin = scheduler.profiles["default-scheduler"].plugins["Coscheduling"]
    assert isinstance(plugin, Coscheduling)
    scheduler.warm_up()
    held = plugin.conditions.written
    assert held == 4, "p0..p3 arrived before the gang had five pods"
    for _ in range(4):
        assert scheduler.schedule_one()
    await settle()
    assert plugin.conditions.written - held == 2, "p3 and p4 when p2 quick-failed; nothing again when p3 did"
    await scheduler.run_until_idle()


async def test_members_held_at_pre_enqueue_get_the_gangs_reason_without_counts() -> None:
    run = await simulate(*(node(f"n{i}") for i in range(3)), *(gang_pod(f"p{i}", "g", 3) for i in range(2)))
    for name in ("p0", "p1"):
        assert run.cluster.conditions[f"default/{name}"] == (
            "Unschedulable",
            "gangGroup [default/g] basic check: memberGangs [default/g] child pod not collect enough, "
            f"current gang: default/g, podName: default/{name}",
        )


async def test_a_member_with_unusable_annotations_gets_the_problem_as_its_condition() -> None:
    run = await simulate(node("n0"), gang_pod("p0", "g", 1, waiting_time="ten minutes"))
    reason, message = run.cluster.conditions["default/p0"]
    assert reason == "Unschedulable"
    assert 'waiting-time: time: invalid duration "ten minutes"' in message


async def test_scheduling_gated_members_keep_the_api_servers_condition() -> None:
    gated = json.loads(gang_pod("p1", "g", 3))
    gated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    run = await simulate(node("n0"), gang_pod("p0", "g", 3), json.dumps(gated))
    assert "default/p0" in run.cluster.conditions
    assert "default/p1" not in run.cluster.conditions


async def test_the_gate_off_writes_nothing_for_held_members() -> None:
    text = "\n---\n".join([node("n0"), gang_pod("p0", "g", 3), gang_pod("p1", "g", 3)])
    _, scheduler = await run_simulation(
        None, parse_scheduler_config(CONFIG), in_tree_registry(), now=NOW, cluster_text=text, feature_gates=GATE_OFF
    )
    assert isinstance(scheduler.source, MemoryCluster)
    assert scheduler.source.conditions == {}


async def test_the_gate_off_leaves_untried_members_alone() -> None:
    scheduler, cluster = await start(node("n0"), *(gang_pod(f"p{i}", "g", 5) for i in range(5)), gates=GATE_OFF)
    scheduler.warm_up()
    for _ in range(3):
        assert scheduler.schedule_one()
    await settle()
    assert "default/p3" not in cluster.conditions
    await scheduler.run_until_idle()


async def test_a_bound_member_is_not_written_and_a_plain_pod_never() -> None:
    members = (gang_pod(f"p{i}", "g", 2) for i in range(2))
    run = await simulate(node("n0", "5"), node("n1", "5"), *members, pod("web", cpu="1"))
    assert run.bound() == {"p0", "p1", "web"}
    assert run.cluster.conditions == {}


@pytest.mark.parametrize(
    ("scheduled", "want_transition"),
    [
        pytest.param("", True, id="no-condition-yet"),
        pytest.param("True", True, id="status-changes"),
        pytest.param("False", False, id="already-false-keeps-its-time"),
    ],
)
def test_condition_patch(scheduled: str, want_transition: bool) -> None:
    base = make_pod("p").build()
    pod = Pod(
        **{
            **{f: getattr(base, f) for f in base.__dataclass_fields__ if f != "key"},
            "conditions": {"PodScheduled": scheduled} if scheduled else {},
        }
    )
    patch = condition_patch(pod, "why", now=NOW)
    condition = patch["status"]["conditions"][0]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "why",
    }
    assert ("lastTransitionTime" in condition) is want_transition
    assert patch.get("metadata", {}).get("uid", "") == pod.uid
