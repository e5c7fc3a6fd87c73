"""Gang scenarios on the in-memory cluster (the simulator, virtual time): Koordinator's gang cases with
every pod requesting 4 cpu on 4-cpu nodes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gang_harness import ANN, CONFIG, NOW, gang_pod, node, pod, pod_group, simulate

from apis.config import parse_scheduler_config
from apis.core.parse import parse_node, parse_pod
from apis.scheduling import podgroup as pg
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import SchedulerOptions


async def test_complete_gang_binds_together_with_group_annotations() -> None:
    run = await simulate(*(node(f"n{i}") for i in range(3)), *(gang_pod(f"p{i}", "g", 3) for i in range(3)))
    assert run.bound() == {"p0", "p1", "p2"}
    for name in ("p0", "p1", "p2"):
        notes = run.cluster.pods[f"default/{name}"].annotations
        assert notes[pg.ANNOTATION_BIND_GANG_GROUP_ID] == "default/g"
        assert notes[pg.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "3"


async def test_too_few_members_are_held_with_a_reason_and_an_event() -> None:
    run = await simulate(*(node(f"n{i}") for i in range(3)), *(gang_pod(f"p{i}", "g", 3) for i in range(2)))
    reason = (
        "gangGroup [default/g] basic check: memberGangs [default/g (2/3)] child pod not collect enough, "
        "current gang: default/g, podName: default/p0"
    )
    assert run.placements["p0"] == (None, f"waiting in PreEnqueue: {reason}")
    assert run.bound() == set()
    events = run.events("GangNotReady")
    assert set(events) == {"default/p0", "default/p1"}
    assert "child pod not collect enough" in events["default/p1"]


async def test_strict_gang_short_of_capacity_binds_none_and_releases_everything() -> None:
    pods = [pod(f"p{i}", labels={pg.LABEL_POD_GROUP: "pg"}) for i in range(3)]
    run = await simulate(node("n0"), node("n1"), pod_group("pg", 3), *pods)
    assert run.bound() == set()
    messages = [m for _, m in run.placements.values()]
    assert any('GangGroup "default/pg" gets rejected due to member Pod' in m for m in messages), messages
    assert any("Insufficient cpu" in m for m in messages)
    assert all(a.requested.get("cpu", 0) == 0 for a in run.result.after), "nothing stays assumed"
    failed = {e.object_key for e in run.cluster.events if e.reason == "FailedScheduling"}
    assert failed == {"default/p0", "default/p1", "default/p2"}, "an Event on each member"


async def test_non_strict_gang_is_rejected_when_the_round_ends() -> None:
    pods = [pod(f"p{i}", labels={pg.LABEL_POD_GROUP: "pg"}) for i in range(3)]
    group = pod_group("pg", 3, annotations={ANN + "mode": "NonStrict"})
    run = await simulate(node("n0"), node("n1"), group, *pods)
    assert run.bound() == set()
    # The round's end rejects the members waiting at Permit; later rounds (after the group backoff) may
    # leave other last messages, so read every FailedScheduling Event of the run.
    messages = [e.message for e in run.cluster.events if e.reason == "FailedScheduling"]
    assert any("all pending pods is already been attempted" in m for m in messages), messages
    assert all(a.requested.get("cpu", 0) == 0 for a in run.result.after), "nothing stays assumed"


async def test_two_gang_groups_bind_together() -> None:
    groups = '["default/ga","default/gb"]'
    pods = [gang_pod(f"a{i}", "ga", 2, groups=groups) for i in range(2)]
    pods += [gang_pod(f"b{i}", "gb", 2, groups=groups) for i in range(2)]
    run = await simulate(*(node(f"n{i}") for i in range(4)), *pods)
    assert run.bound() == {"a0", "a1", "b0", "b1"}
    notes = run.cluster.pods["default/b1"].annotations
    assert notes[pg.ANNOTATION_BIND_GANG_GROUP_ID] == "default/ga,default/gb"
    assert notes[pg.ANNOTATION_BIND_GANG_MEMBER_COUNT] == "4"


async def test_a_gang_group_waits_for_its_short_member_gang() -> None:
    groups = '["default/ga","default/gb"]'
    pods = [gang_pod(f"a{i}", "ga", 2, groups=groups) for i in range(2)]
    pods += [gang_pod("b0", "gb", 2, groups=groups)]
    run = await simulate(*(node(f"n{i}") for i in range(4)), *pods)
    assert run.bound() == set()
    _, message = run.placements["a0"]
    assert "memberGangs [default/gb (1/2)] child pod not collect enough" in message


async def test_once_satisfied_gang_schedules_the_rest_as_plain_pods() -> None:
    pods = [gang_pod(f"p{i}", "g", 2, total_number="3") for i in range(3)]
    run = await simulate(node("n0"), node("n1"), *pods)
    assert len(run.bound()) == 2
    (left,) = {"p0", "p1", "p2"} - run.bound()
    message = run.placements[left][1]
    assert message.startswith("0/2 nodes are available: 2 Insufficient cpu."), message
    assert "GangGroup" not in message


async def test_strict_timeout_releases_every_assumed_member() -> None:
    pods = [gang_pod(f"p{i}", "g", 3, waiting_time="30s") for i in range(2)]
    gated = pod(
        "p2",
        annotations={ANN + "name": "g", ANN + "min-available": "3", ANN + "waiting-time": "30s"},
        gates=("example.com/hold",),
    )
    run = await simulate(*(node(f"n{i}") for i in range(3)), *pods, gated)
    assert run.bound() == set()
    messages = sorted(run.placements[n][1] for n in ("p0", "p1"))
    # Both waits started at the same virtual instant, so both run out together.
    want = "0/1 nodes are available: 1 rejected due to timeout after waiting 30s at plugin Coscheduling."
    assert messages == [want, want]
    assert all(a.requested.get("cpu", 0) == 0 for a in run.result.after)


async def test_bad_annotation_gives_an_event_and_an_unschedulable_message() -> None:
    run = await simulate(node("n0"), gang_pod("p0", "g", 1, waiting_time="abc"), pod("plain"))
    node_name, message = run.placements["p0"]
    assert node_name is None
    assert 'gang.scheduling.koordinator.sh/waiting-time: time: invalid duration "abc"' in message
    assert "waiting-time" in run.events("InvalidGang")["default/p0"]
    assert run.bound() == {"plain"}, "the cycle keeps running for other pods"


async def test_pod_group_label_without_pod_group_is_not_init() -> None:
    run = await simulate(node("n0"), pod("p", labels={pg.LABEL_POD_GROUP: "pg1"}))
    assert run.placements["p"] == (
        None,
        "waiting in PreEnqueue: gang has not init, gangName: default/pg1, podName: default/p: "
        "PodGroup default/pg1 does not exist",
    )


AWARE_CONFIG = (
    CONFIG
    + """  pluginConfig:
  - name: Coscheduling
    args: {awareNetworkTopology: true}
"""
)


async def test_network_topology_spec_without_a_topology_gets_koordinators_message_when_aware() -> None:
    spec_pod = gang_pod("p", "g", 1, network_topology_spec='{"gatherStrategy":[]}')
    run = await simulate(node("n0"), spec_pod, config=AWARE_CONFIG)
    assert "no cluster network topology" in run.placements["p"][1]


async def test_network_topology_spec_is_ignored_when_not_aware() -> None:
    run = await simulate(node("n0"), gang_pod("p", "g", 1, network_topology_spec='{"gatherStrategy":[]}'))
    assert run.bound() == {"p"}


async def test_gang_of_one_and_plain_pods_schedule_as_before() -> None:
    run = await simulate(node("n0"), node("n1"), gang_pod("solo", "g", 1), pod("plain"))
    assert run.bound() == {"solo", "plain"}
    assert pg.ANNOTATION_BIND_GANG_GROUP_ID not in run.cluster.pods["default/solo"].annotations


async def test_shipped_gang_cluster_file_gives_the_placements_its_comment_promises() -> None:
    repo = Path(__file__).resolve().parents[5]
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "koord-scheduler"),
            "simulate",
            "-o",
            "json",
            "--cluster",
            str(repo / "config" / "simulate" / "gang-cluster.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    pods = {p["name"]: (p["node"], p["message"]) for p in json.loads(result.stdout)["pods"]}
    assert {n for n, (node, _) in pods.items() if node} == {"training-0", "training-1", "training-2", "web"}
    messages = [pods["inference-0"][1], pods["inference-1"][1]]
    assert any(m.startswith("0/3 nodes are available: 3 Insufficient cpu.") for m in messages), messages
    assert any('GangGroup "default/inference" gets rejected due to member Pod' in m for m in messages), messages
    assert 'waiting-time: time: invalid duration "ten minutes"' in pods["broken-0"][1]


async def test_a_gang_larger_than_the_binding_pool_still_binds() -> None:
    """Members waiting at Permit hold no binding slot, so a gang of 6 binds with 2 slots."""
    nodes = [parse_node(json.loads(node(f"n{i}"))) for i in range(6)]
    pods = [parse_pod(json.loads(gang_pod(f"p{i}", "g", 6))) for i in range(6)]
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(
        parse_scheduler_config(CONFIG),
        in_tree_registry(),
        cluster,
        clock=lambda: NOW,
        options=SchedulerOptions(max_concurrent_bindings=2),
    )
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    assert sorted(p.name for p in cluster.pods.values() if p.node_name) == [f"p{i}" for i in range(6)]
