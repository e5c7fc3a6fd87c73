"""The evictor's API path (KubeEvictionAPI on an ApiLoop, through kubeapi) against a canned HTTP/1.1 server:
every answer the Eviction API gives maps to the outcome the strategies rely on, a PDB refusal (429) is
answered at once and not retried, and the eviction counter counts evictions."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable

import pytest
from prometheus_client import CollectorRegistry
from qos_helpers import ScriptedEvictionAPI

from apis.extension import PriorityClass, QoSClass
from apis.extension.qos import KubeQOSClass
from koordlet.qosmanager.evictor import EvictionOutcome, KubeEvictionAPI, PodEvictor
from koordlet.statesinformer import PodMeta
from koordlet.statesinformer.apiloop import ApiLoop
from koordlet.system.clock import FakeClock
from kubeapi.connection import Connection
from tests.unit.kubeapi.test_kube_http1 import CannedServer, fixed

POD = PodMeta(
    uid="u-1",
    namespace="default",
    name="be-1",
    kube_qos=KubeQOSClass.BEST_EFFORT,
    qos=QoSClass.BE,
    priority_class=PriorityClass.BATCH,
    priority=None,
    cgroup_dir="kubepods/podu-1",
    labels={"koordinator.sh/qosClass": "BE"},
)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Callable[[int], bytes]], asyncio.Future[tuple[ApiLoop, CannedServer]]]]:
    made: list[tuple[ApiLoop, CannedServer]] = []

    async def make(respond: Callable[[int], bytes]) -> tuple[ApiLoop, CannedServer]:
        server = CannedServer(respond)
        port = await server.start()
        loop = ApiLoop(Connection(f"http://127.0.0.1:{port}", None, lambda: "Bearer t", "canned"))
        made.append((loop, server))
        return loop, server

    yield make  # type: ignore[misc]
    for loop, server in made:
        await asyncio.to_thread(loop.stop)
        await server.stop()


def request_lines(server: CannedServer) -> list[str]:
    return [raw.split(b"\r\n", 1)[0].decode() for raw in server.requests]


def body(raw: bytes) -> dict[str, object]:
    parsed: dict[str, object] = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    return parsed


EVICTION = "POST /api/v1/namespaces/default/pods/be-1/eviction HTTP/1.1"
EVENT = "POST /api/v1/namespaces/default/events HTTP/1.1"


@pytest.mark.parametrize(
    ("status", "outcome", "lines"),
    [
        pytest.param(201, EvictionOutcome.EVICTED, [EVICTION, EVENT], id="201-evicted"),
        pytest.param(200, EvictionOutcome.EVICTED, [EVICTION, EVENT], id="200-evicted"),
        pytest.param(429, EvictionOutcome.BLOCKED, [EVICTION, EVENT], id="429-pdb-at-once"),
        pytest.param(404, EvictionOutcome.GONE, [EVICTION], id="404-gone"),
        pytest.param(409, EvictionOutcome.GONE, [EVICTION], id="409-other-uid"),
        pytest.param(500, EvictionOutcome.FAILED, [EVICTION, EVENT], id="500-failed"),
    ],
)
async def test_each_answer_maps_to_its_outcome(
    serve: Callable[[Callable[[int], bytes]], asyncio.Future[tuple[ApiLoop, CannedServer]]],
    status: int,
    outcome: EvictionOutcome,
    lines: list[str],
) -> None:
    # A 429 carries Retry-After: a throttled request would wait it out five times; the eviction must not.
    extra = "Retry-After: 10\r\n" if status == 429 else ""
    loop, server = await serve(
        lambda i: fixed(b"{}", status=status, extra=extra) if i == 0 else fixed(b"{}", status=201)
    )
    evictor = PodEvictor(KubeEvictionAPI(loop, "node-1", clock=FakeClock()), node_name="node-1", clock=FakeClock())
    assert await asyncio.to_thread(evictor.evict, POD, "BEMemoryEvict", "memory") is outcome
    assert request_lines(server) == lines
    eviction = body(server.requests[0])
    assert eviction["kind"] == "Eviction" and eviction["deleteOptions"] == {"preconditions": {"uid": "u-1"}}
    if EVENT in lines:
        event = body(server.requests[1])
        assert event["reason"] == ("evictPodSuccess" if outcome is EvictionOutcome.EVICTED else "evictPodFail")
        assert event["involvedObject"] == {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": "default",
            "name": "be-1",
            "uid": "u-1",
        }
    assert evictor.recently_evicted("u-1") is outcome.releases


async def test_an_event_refused_by_the_server_is_logged_not_raised(
    serve: Callable[[Callable[[int], bytes]], asyncio.Future[tuple[ApiLoop, CannedServer]]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop, server = await serve(lambda i: fixed(b"{}", status=201 if i == 0 else 403))
    evictor = PodEvictor(KubeEvictionAPI(loop, "node-1"), node_name="node-1")
    assert await asyncio.to_thread(evictor.evict, POD, "BEMemoryEvict", "memory") is EvictionOutcome.EVICTED
    assert request_lines(server) == [EVICTION, EVENT]
    assert "event evictPodSuccess on pod default/be-1 not recorded: HTTP 403" in caplog.text


def test_the_eviction_counter_counts_evictions_by_gate() -> None:
    registry = CollectorRegistry()
    api = ScriptedEvictionAPI({"be-2": 429})
    evictor = PodEvictor(api, node_name="node-1", metrics_registry=registry, clock=FakeClock())
    assert evictor.evict(POD, "BEMemoryEvict", "memory") is EvictionOutcome.EVICTED
    blocked = dataclasses.replace(POD, uid="u-2", name="be-2")
    assert evictor.evict(blocked, "BEMemoryEvict", "memory") is EvictionOutcome.BLOCKED
    labels = {"node": "node-1", "reason": "BEMemoryEvict"}
    assert registry.get_sample_value("koordlet_pod_eviction_total", labels) == 1.0
