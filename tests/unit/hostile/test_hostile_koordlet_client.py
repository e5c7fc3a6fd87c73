"""koordlet's API requests (through kubeapi on its ApiLoop) against a stand-in API server on a real socket:
hostile names and header values never turn into a second request, for the writes koordlet sends from its
worker threads (eviction POST and its Event, NodeResourceTopology GET/POST/PUT)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from standin_api import StandInApi

from apis.core.paths import InvalidNameError
from apis.extension import PriorityClass, QoSClass
from apis.extension.qos import KubeQOSClass
from koordlet.qosmanager.evictor import EvictionOutcome, KubeEvictionAPI, PodEvictor
from koordlet.statesinformer import PodMeta
from koordlet.statesinformer.apiloop import ApiLoop
from koordlet.statesinformer.topology_writer import KubeTopologyWriter
from kubeapi.paths import InvalidRequestError

SMUGGLED = " HTTP/1.1\r\nHost: a\r\n\r\nDELETE /api/v1/namespaces/default/pods/victim"


@pytest.fixture
async def standin() -> AsyncIterator[StandInApi]:
    api = await StandInApi().start()
    yield api
    await api.stop()


@pytest.fixture
def loops() -> Iterator[list[ApiLoop]]:
    made: list[ApiLoop] = []
    yield made
    for loop in made:
        loop.stop()


def api_loop(standin: StandInApi, loops: list[ApiLoop], *, token: str = "Bearer t") -> ApiLoop:
    loop = ApiLoop(standin.connection(token))
    loops.append(loop)
    return loop


def be_pod(namespace: str = "default", name: str = "x") -> PodMeta:
    return PodMeta(
        uid="u",
        namespace=namespace,
        name=name,
        kube_qos=KubeQOSClass.BEST_EFFORT,
        qos=QoSClass.BE,
        priority_class=PriorityClass.BATCH,
        priority=None,
        cgroup_dir="kubepods/podu",
        labels={"koordinator.sh/qosClass": "BE"},
    )


async def test_eviction_with_a_hostile_namespace_is_refused_before_sending(
    standin: StandInApi, loops: list[ApiLoop]
) -> None:
    evictor = PodEvictor(KubeEvictionAPI(api_loop(standin, loops), "node-1"), node_name="node-1")
    pod = be_pod(namespace="default/pods/victim" + SMUGGLED)
    outcome = await asyncio.to_thread(evictor.evict, pod, "BECPUEvict", "test")
    assert outcome is EvictionOutcome.FAILED
    assert standin.request_lines == []


async def test_eviction_with_a_hostile_token_is_refused_before_sending(
    standin: StandInApi, loops: list[ApiLoop]
) -> None:
    api = KubeEvictionAPI(api_loop(standin, loops, token="Bearer t\r\nX-Smuggled: 1"), "node-1")
    with pytest.raises(InvalidRequestError, match=r"(?i)header authorization"):
        await asyncio.to_thread(api.evict, "default", "x", "u")
    outcome = await asyncio.to_thread(PodEvictor(api, node_name="node-1").evict, be_pod(), "BECPUEvict", "test")
    assert outcome is EvictionOutcome.FAILED
    assert standin.request_lines == []


async def test_an_eviction_answered_404_sends_one_post_and_no_retry(standin: StandInApi, loops: list[ApiLoop]) -> None:
    """The stand-in answers 404: the pod is gone, one request line, no Event (a gone pod gets none)."""
    evictor = PodEvictor(KubeEvictionAPI(api_loop(standin, loops), "node-1"), node_name="node-1")
    outcome = await asyncio.to_thread(evictor.evict, be_pod(), "BECPUEvict", "test")
    assert outcome is EvictionOutcome.GONE
    assert standin.request_lines == ["POST /api/v1/namespaces/default/pods/x/eviction HTTP/1.1"]


async def test_topology_writer_refuses_a_hostile_node_name(standin: StandInApi, loops: list[ApiLoop]) -> None:
    writer = KubeTopologyWriter(api_loop(standin, loops), "n" + SMUGGLED)
    with pytest.raises(InvalidNameError):
        await asyncio.to_thread(writer.write, {"metadata": {"name": "n"}})
    assert standin.request_lines == []
