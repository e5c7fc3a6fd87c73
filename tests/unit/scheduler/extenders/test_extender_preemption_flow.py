"""DefaultPreemption calls the preemption extenders (kube-scheduler v1.35 ``callExtenders``), end to end on
the in-memory cluster with the in-test HTTP extender: victims are sent (as UIDs with ``nodeCacheCapable``,
as whole pods without), the candidates it returns are the only ones kept, a failing non-ignorable extender
fails the preemption, and a failing ignorable one is skipped."""

from __future__ import annotations

from typing import Any

import pytest

from apis.config import parse_scheduler_config
from apis.core.types import Node, Pod
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod
from tests.extender_fake import Reply, serve_extender

NOW = 1_800_000_000.0


def node(name: str) -> Node:
    return make_node(name).capacity(cpu="4", memory="16Gi", pods=110).build()


def cluster_objects() -> tuple[list[Node], list[Pod]]:
    pods = [
        make_pod("low-a").uid("uid-low-a").req(cpu="4").priority(0).node("a").build(),
        make_pod("low-b").uid("uid-low-b").req(cpu="4").priority(0).node("b").build(),
        make_pod("high").uid("uid-high").req(cpu="3").priority(100).build(),
    ]
    return [node("a"), node("b")], pods


async def run(extender: dict[str, Any]) -> MemoryCluster:
    config = parse_scheduler_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "extenders": [extender],
        }
    )
    nodes, pods = cluster_objects()
    cluster = MemoryCluster.from_objects(nodes, pods)
    scheduler = build_scheduler(config, in_tree_registry(), cluster, clock=lambda: NOW)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    return cluster


def keep_b(body: dict[str, Any]) -> dict[str, Any]:
    """Keep node b only, answering with UIDs whatever form the request had."""
    if body.get("NodeNameToMetaVictims"):
        victims = body["NodeNameToMetaVictims"]["b"]["Pods"]
    else:
        victims = [{"UID": p["metadata"]["uid"]} for p in body["NodeNameToVictims"]["b"]["Pods"]]
    return {"NodeNameToMetaVictims": {"b": {"Pods": victims, "NumPDBViolations": 0}}}


@pytest.mark.parametrize("node_cache_capable", [pytest.param(True, id="uids"), pytest.param(False, id="whole-pods")])
async def test_extender_chooses_among_candidates(node_cache_capable: bool) -> None:
    with serve_extender({"preempt": keep_b}) as fake:
        cluster = await run({"urlPrefix": fake.url, "preemptVerb": "preempt", "nodeCacheCapable": node_cache_capable})
    assert cluster.pods["default/high"].node_name == "b"
    assert "default/low-b" not in cluster.pods
    assert "default/low-a" in cluster.pods
    sent = fake.calls("preempt")[0]
    assert sent["Pod"]["metadata"]["name"] == "high"
    if node_cache_capable:
        assert sent["NodeNameToMetaVictims"] == {
            "a": {"Pods": [{"UID": "uid-low-a"}], "NumPDBViolations": 0},
            "b": {"Pods": [{"UID": "uid-low-b"}], "NumPDBViolations": 0},
        }
        assert not sent.get("NodeNameToVictims")
    else:
        assert sorted(sent["NodeNameToVictims"]) == ["a", "b"]
        assert sent["NodeNameToVictims"]["a"]["Pods"][0]["metadata"]["uid"] == "uid-low-a"
        assert not sent.get("NodeNameToMetaVictims")


async def test_extender_keeping_nothing_stops_preemption() -> None:
    with serve_extender({"preempt": lambda body: {"NodeNameToMetaVictims": {}}}) as fake:
        cluster = await run({"urlPrefix": fake.url, "preemptVerb": "preempt", "nodeCacheCapable": True})
    assert cluster.pods["default/high"].node_name == ""
    assert {"default/low-a", "default/low-b"} <= set(cluster.pods)
    assert cluster.conditions["default/high"][1].endswith("preemption: no candidate node for preemption")


@pytest.mark.parametrize(
    ("ignorable", "want_preempted"),
    [pytest.param(False, False, id="fails-preemption"), pytest.param(True, True, id="skipped")],
)
async def test_failing_extender(ignorable: bool, want_preempted: bool) -> None:
    with serve_extender({"preempt": Reply(b"boom", 500)}) as fake:
        cluster = await run(
            {"urlPrefix": fake.url, "preemptVerb": "preempt", "nodeCacheCapable": True, "ignorable": ignorable}
        )
    assert fake.calls("preempt"), "the extender was asked"
    high = cluster.pods["default/high"]
    if want_preempted:
        assert high.node_name != ""
        assert len([k for k in ("default/low-a", "default/low-b") if k in cluster.pods]) == 1
    else:
        assert high.node_name == ""
        assert {"default/low-a", "default/low-b"} <= set(cluster.pods)
        assert fake.url in cluster.conditions["default/high"][1]


async def test_extender_not_interested_is_not_asked() -> None:
    with serve_extender({"preempt": keep_b}) as fake:
        cluster = await run(
            {
                "urlPrefix": fake.url,
                "preemptVerb": "preempt",
                "nodeCacheCapable": True,
                "managedResources": [{"name": "example.com/gpu"}],
            }
        )
    assert fake.calls("preempt") == []
    assert cluster.pods["default/high"].node_name in {"a", "b"}
