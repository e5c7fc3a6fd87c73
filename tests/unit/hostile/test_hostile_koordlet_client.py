"""koordlet's API client (the kubernetes client's ApiClient with the shared request-line check) against a
stand-in API server on a real socket: hostile names never turn into a second request, for every verb
koordlet sends (its list and watch, NodeMetric GET/POST/PUT, Device PATCH, eviction POST, DELETE)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes import client
from standin_api import StandInApi

from apis.core.paths import UnsafeRequestError
from apis.extension import PriorityClass, QoSClass
from apis.extension.qos import KubeQOSClass
from koordlet.qosmanager.evictor import EvictionOutcome, KubeEvictionAPI, PodEvictor
from koordlet.statesinformer import PodMeta
from koordlet.statesinformer.apiclient import CheckedApiClient

SMUGGLED = " HTTP/1.1\r\nHost: a\r\n\r\nDELETE /api/v1/namespaces/default/pods/victim"


@pytest.fixture
async def standin() -> AsyncIterator[StandInApi]:
    api = await StandInApi().start()
    yield api
    await api.stop()


def api_client(standin: StandInApi, *, token: str = "t") -> CheckedApiClient:
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{standin.port}"
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return CheckedApiClient(cfg)


@pytest.mark.parametrize("verb", ["GET", "POST", "PUT", "PATCH", "DELETE"])
async def test_every_verb_refuses_a_hostile_request_line(standin: StandInApi, verb: str) -> None:
    api = api_client(standin)

    def call() -> Any:
        url = f"http://127.0.0.1:{standin.port}/api/v1/namespaces/default/pods/x{SMUGGLED}"
        return api.call_api(verb, url, header_params={"Accept": "application/json"})

    with pytest.raises(UnsafeRequestError, match="request target"):
        await asyncio.to_thread(call)
    assert standin.request_lines == []


async def test_a_hostile_header_is_refused_for_list_and_watch(standin: StandInApi) -> None:
    core = client.CoreV1Api(api_client(standin, token="t\r\nX-Smuggled: 1"))
    with pytest.raises(UnsafeRequestError, match=r"(?i)header authorization"):
        await asyncio.to_thread(core.list_node, field_selector="metadata.name=n", _preload_content=False)
    with pytest.raises(UnsafeRequestError, match=r"(?i)header authorization"):
        await asyncio.to_thread(core.list_node, watch=True, _preload_content=False)
    assert standin.request_lines == []


async def test_generated_calls_escape_names_into_one_request_line(standin: StandInApi) -> None:
    """The typed methods koordlet uses percent-escape their path parameters: one request line, no DELETE."""
    custom = client.CustomObjectsApi(api_client(standin))
    with pytest.raises(client.ApiException):  # the stand-in answers 404
        await asyncio.to_thread(
            custom.get_cluster_custom_object,
            "slo.koordinator.sh",
            "v1alpha1",
            "nodemetrics",
            "n" + SMUGGLED,
            _preload_content=False,
        )
    assert [line.split(" ", 1)[0] for line in standin.request_lines] == ["GET"]
    assert standin.request_lines[0].startswith("GET /apis/slo.koordinator.sh/v1alpha1/nodemetrics/n%20HTTP%2F1.1%0D%0A")


async def test_eviction_with_a_hostile_namespace_is_refused_before_sending(standin: StandInApi) -> None:
    evictor = PodEvictor(KubeEvictionAPI(api_client(standin), "node-1"), node_name="node-1")
    pod = PodMeta(
        uid="u",
        namespace="default/pods/victim" + SMUGGLED,
        name="x",
        kube_qos=KubeQOSClass.BEST_EFFORT,
        qos=QoSClass.BE,
        priority_class=PriorityClass.BATCH,
        priority=None,
        cgroup_dir="kubepods/podu",
        labels={"koordinator.sh/qosClass": "BE"},
    )
    outcome = await asyncio.to_thread(evictor.evict, pod, "BECPUEvict", "test")
    assert outcome is EvictionOutcome.FAILED
    assert standin.request_lines == []
