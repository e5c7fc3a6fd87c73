"""``koord-scheduler extender-server`` on the in-memory cluster: its HTTP answers, read back with the
extender client the scheduler itself uses."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from apis.config import KubeSchedulerConfiguration
from apis.config.extender import Extender
from apis.core.types import Pod
from koord_scheduler.app.extender_http import make_app
from koord_scheduler.app.extender_server import build_extender_scheduler, service_for
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.extenders import HTTPExtender
from koord_scheduler.scheduler.extenders.service import UNKNOWN_NODE, protocol_score
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests.builders import make_node, make_pod

NODES = [
    make_node("big").capacity(cpu="8", memory="16Gi", pods=110).build(),
    # Busier, and tainted PreferNoSchedule: the framework's total differs by more than one extender point
    # (a twelfth of the total range with the default profile's weights).
    make_node("half").capacity(cpu="8", memory="16Gi", pods=110).taint("dedicated", "x", "PreferNoSchedule").build(),
    make_node("small").capacity(cpu="1", memory="16Gi", pods=110).build(),
    make_node("full").capacity(cpu="4", memory="16Gi", pods=110).build(),
]
RUNNING = [
    make_pod("busy").uid("uid-busy").req(cpu="4", memory="1Gi").node("half").build(),
    make_pod("filler").uid("uid-filler").req(cpu="3", memory="1Gi").node("full").build(),
]
POD = make_pod("p").uid("uid-p").req(cpu="2", memory="1Gi").build()


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, MemoryCluster]]:
    cluster = MemoryCluster.from_objects(NODES, RUNNING)
    scheduler = build_extender_scheduler(KubeSchedulerConfiguration(), in_tree_registry(), cluster)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))

    async def get_pod(namespace: str, name: str) -> Pod | None:
        return cluster.pods.get(f"{namespace}/{name}")

    app = make_app(service_for(scheduler), cluster, synced=lambda: True, get_pod=get_pod)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", cluster
    finally:
        await runner.cleanup()


def client(url: str, **fields: Any) -> HTTPExtender:
    return HTTPExtender(Extender.model_validate({"urlPrefix": url, **fields}))


@pytest.mark.parametrize("cache_capable", [True, False], ids=["node-names", "whole-nodes"])
async def test_filter_answers_with_framework_verdicts(server: tuple[str, MemoryCluster], cache_capable: bool) -> None:
    url, _ = server
    ext = client(url, filterVerb="filter", nodeCacheCapable=cache_capable)
    ghost = make_node("ghost").capacity(cpu="64").build()
    reply = await asyncio.to_thread(ext.filter, POD, [*NODES, ghost])
    assert reply.node_names == ("big", "half")
    assert reply.failed == {"full": "Insufficient cpu"}
    # More than the node's whole allocatable: no preemption can help (kube-scheduler's Fit says so too).
    assert reply.failed_and_unresolvable == {"small": "Insufficient cpu", "ghost": UNKNOWN_NODE}


async def test_prioritize_prefers_the_emptier_node_in_protocol_range(server: tuple[str, MemoryCluster]) -> None:
    url, _ = server
    ext = client(url, prioritizeVerb="prioritize", weight=1, nodeCacheCapable=True)
    scores = dict(await asyncio.to_thread(ext.prioritize, POD, NODES[:2]))
    assert set(scores) == {"big", "half"}
    assert all(0 <= s <= 10 for s in scores.values())
    assert scores["big"] > scores["half"]


async def test_bind_binds_through_the_cluster_source(server: tuple[str, MemoryCluster]) -> None:
    url, cluster = server
    cluster.pods[POD.key] = POD
    ext = client(url, bindVerb="bind")
    await asyncio.to_thread(ext.bind, POD, "big")
    assert cluster.pods[POD.key].node_name == "big"


@pytest.mark.parametrize("cache_capable", [True, False], ids=["uids", "whole-pods"])
async def test_preempt_keeps_the_candidates_where_the_profile_fits_the_pod(
    server: tuple[str, MemoryCluster], cache_capable: bool
) -> None:
    url, _ = server
    ext = client(url, preemptVerb="preempt", nodeCacheCapable=cache_capable)
    busy, filler = RUNNING
    # full: 4 cpu, filler takes 3; without it the 2-cpu pod fits. small: 1 cpu, the pod never fits there
    # (the victim named is not even on it). half fits anyway; its victims and violations come back as sent.
    victims = {"full": [filler], "small": [filler], "half": [busy]}
    got = await asyncio.to_thread(ext.process_preemption, POD, victims, {"full": 0, "small": 0, "half": 2})
    assert got == {"full": (("uid-filler",), 0), "half": (("uid-busy",), 2)}


async def test_malformed_preempt_request_is_a_bad_request(server: tuple[str, MemoryCluster]) -> None:
    import aiohttp

    url, _ = server
    from koord_scheduler.scheduler.extenders.wire import encode_pod

    bad = {"Pod": encode_pod(POD), "NodeNameToMetaVictims": {"full": {"Pods": [{}]}}}
    async with aiohttp.ClientSession() as session, session.post(f"{url}/preempt", json=bad) as resp:
        text = await resp.text()
    assert resp.status == 400
    assert text == "bad ExtenderPreemptionArgs: NodeNameToMetaVictims['full'].Pods[0]: no UID"


async def test_malformed_request_gets_an_error_field(server: tuple[str, MemoryCluster]) -> None:
    import aiohttp

    url, _ = server
    bad = {"Pod": {"metadata": {}}, "NodeNames": ["big"]}
    async with aiohttp.ClientSession() as session, session.post(f"{url}/filter", json=bad) as resp:
        body = await resp.json()
    assert resp.status == 200
    assert body["Error"].startswith("bad ExtenderArgs:")


@pytest.mark.parametrize(
    ("total", "max_total", "want"),
    [
        pytest.param(0, 300, 0, id="zero"),
        pytest.param(300, 300, 10, id="max"),
        pytest.param(149, 300, 4, id="rounds-down"),
        pytest.param(500, 300, 10, id="clamped"),
        pytest.param(10, 0, 0, id="no-score-plugins"),
    ],
)
def test_protocol_score(total: int, max_total: int, want: int) -> None:
    assert protocol_score(total, max_total) == want
