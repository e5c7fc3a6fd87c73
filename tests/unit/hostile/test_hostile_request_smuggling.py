"""No name from outside can smuggle a request to the API server (the reproduction through the webhook and
the extender's /bind is in test_hostile_smuggling_reproduction.py).

A stand-in API server on a real socket (:mod:`standin_api`) records every request line it receives. A
namespace or name carrying CR/LF and a second request line, sent through each surface that takes names
from outside (the pod webhook's namespace lookup, the cluster client's writes, koordlet's evictions) and
straight into each HTTP client with every verb the product sends (GET, POST, PUT, PATCH, DELETE, watch),
never reaches it as a second request: the stand-in sees no smuggled DELETE, and nothing at all for a
request that was refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from standin_api import StandInApi

from apis.core.types import ObjectMeta, Pod
from koord_scheduler.webhook.admission import ClusterLookupError
from koord_scheduler.webhook.kube import KubeColocationLookup
from kubeapi.client import KubeClusterClient
from kubeapi.events import EventRecorder
from kubeapi.http import ApiHttp
from kubeapi.paths import InvalidRequestError
from kubeapi.ratelimit import TokenBucket

SMUGGLED = "\r\nHost: a\r\n\r\nDELETE /api/v1/namespaces/default/pods/victim"
HOSTILE_NAMESPACE = "default/pods/x HTTP/1.1" + SMUGGLED
HOSTILE_NAME = "x HTTP/1.1" + SMUGGLED
HOSTILE_TARGETS = [
    pytest.param("/api/v1/namespaces/default/pods/x HTTP/1.1" + SMUGGLED, id="crlf-request-line"),
    pytest.param("/api/v1/namespaces/default/pods/x\nDELETE /api/v1/namespaces/default/pods/victim", id="bare-lf"),
    pytest.param("/api/v1/namespaces/default/pods/x\x00DELETE", id="nul"),
    pytest.param("/api/v1/namespaces/default/pods/x y", id="space"),
    pytest.param("/api/v1/namespaces/default/pods/x\x0bvictim", id="vertical-tab"),
    pytest.param("/api/v1/namespaces/default/pods/\u0130victim", id="non-ascii"),
]
VERBS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


@pytest.fixture
async def standin() -> AsyncIterator[StandInApi]:
    api = await StandInApi().start()
    yield api
    await api.stop()


@pytest.fixture
async def http(standin: StandInApi) -> AsyncIterator[ApiHttp]:
    client = ApiHttp(standin.connection(), TokenBucket(0, 1))
    yield client
    await client.close()


def assert_not_smuggled(api: StandInApi, *, at_most: int = 1) -> None:
    assert "DELETE" not in api.methods, api.request_lines
    assert len(api.request_lines) <= at_most, api.request_lines
    assert b"victim" not in api.raw


async def test_namespace_lookup_refuses_a_name_before_asking(standin: StandInApi, http: ApiHttp) -> None:
    lookup = KubeColocationLookup(http)
    with pytest.raises(ClusterLookupError, match="RFC 1123 label"):
        await lookup.namespace_labels(HOSTILE_NAMESPACE)
    with pytest.raises(ClusterLookupError, match="RFC 1123 subdomain"):
        await lookup.priority_class(HOSTILE_NAME)
    assert standin.request_lines == []


WRITES: list[Any] = [
    pytest.param(lambda c, p: c.bind(p, "node-1"), id="bind-POST"),
    pytest.param(lambda c, p: c.patch_pod_metadata(p, labels={"a": "b"}), id="metadata-PATCH"),
    pytest.param(lambda c, p: c.set_nominated_node_name(p, "node-1"), id="status-PATCH"),
    pytest.param(lambda c, p: c.delete_pod(p, reason=""), id="DELETE"),
]


@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize(
    "meta",
    [
        pytest.param(ObjectMeta(name="x", namespace=HOSTILE_NAMESPACE, uid="u"), id="namespace"),
        pytest.param(ObjectMeta(name=HOSTILE_NAME, namespace="default", uid="u"), id="name"),
    ],
)
async def test_cluster_client_writes_are_refused_before_sending(
    standin: StandInApi, http: ApiHttp, write: Callable[[KubeClusterClient, Pod], Awaitable[None]], meta: ObjectMeta
) -> None:
    client = KubeClusterClient(http, EventRecorder(http))
    with pytest.raises(InvalidRequestError, match="is invalid: a lowercase RFC 1123"):
        await write(client, Pod(meta=meta))
    assert standin.request_lines == []


@pytest.mark.parametrize("target", HOSTILE_TARGETS)
@pytest.mark.parametrize("verb", VERBS)
async def test_http_client_refuses_hostile_request_lines_for_every_verb(
    standin: StandInApi, http: ApiHttp, verb: str, target: str
) -> None:
    """The one check in the HTTP client, whoever built the path: nothing is written to the connection."""
    with pytest.raises(InvalidRequestError, match="refused before sending"):
        await http.request(verb, target, body={"a": 1} if verb != "GET" else None)
    assert standin.request_lines == []


@pytest.mark.parametrize("target", HOSTILE_TARGETS)
async def test_watch_refuses_hostile_request_lines(standin: StandInApi, http: ApiHttp, target: str) -> None:
    with pytest.raises(InvalidRequestError, match="refused before sending"):
        async with http.stream(target, {"watch": "1"}):
            pass
    assert standin.request_lines == []


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("Bearer t\r\nX-Smuggled: 1", id="crlf"),
        pytest.param("Bearer t\nDELETE /x HTTP/1.1", id="lf"),
        pytest.param("Bearer t\x00", id="nul"),
    ],
)
async def test_header_values_with_control_characters_are_refused(standin: StandInApi, value: str) -> None:
    http = ApiHttp(standin.connection(authorization=value), TokenBucket(0, 1))
    try:
        for verb in VERBS:
            with pytest.raises(InvalidRequestError, match="header Authorization"):
                await http.request(verb, "/api/v1/nodes")
        with pytest.raises(InvalidRequestError, match="header Authorization"):
            async with http.stream("/api/v1/nodes", {"watch": "1"}):
                pass
        with pytest.raises(InvalidRequestError, match="header Content-Type"):
            await ApiHttp(standin.connection(), TokenBucket(0, 1)).request(
                "POST", "/api/v1/nodes", body={}, content_type="application/json\r\nX-Smuggled: 1"
            )
    finally:
        await http.close()
    assert standin.request_lines == []


async def test_query_values_are_escaped_into_one_request_line(standin: StandInApi, http: ApiHttp) -> None:
    """A selector value goes into the query string percent-encoded: one request line, whatever it holds."""
    standin.answers["/api/v1/pods"] = {"kind": "PodList", "items": []}
    assert await http.request_json("GET", "/api/v1/pods", params={"labelSelector": "a=b" + SMUGGLED}) == {
        "kind": "PodList",
        "items": [],
    }
    assert standin.methods == ["GET"], standin.request_lines
    assert standin.request_lines[0].startswith("GET /api/v1/pods?labelSelector=a%3Db%0D%0AHost")
