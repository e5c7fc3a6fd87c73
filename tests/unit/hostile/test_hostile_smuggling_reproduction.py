"""The request-smuggling reproduction, end to end, on a stand-in API server that records request lines.

A forged AdmissionReview posted to ``/mutate-pod`` whose ``request.namespace`` carries CR/LF and a second
request line, and the same namespace in an extender ``/bind`` (the cluster client's bind): neither may
reach the API server as a second request. On the code before the fix the stand-in saw
``GET /api/v1/namespaces/default/pods/x HTTP/1.1`` followed by ``DELETE
/api/v1/namespaces/default/pods/victim HTTP/1.1`` (and a POST before a DELETE for the bind). This module
uses only interfaces that existed then, so it can be run against that code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from standin_api import StandInApi

from apis.core.types import ObjectMeta, Pod
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.webhook.admission import PodMutator
from koord_scheduler.webhook.kube import KubeColocationLookup
from koord_scheduler.webhook.server import webhook_app
from kubeapi.client import KubeClusterClient
from kubeapi.events import EventRecorder
from kubeapi.http import ApiHttp
from kubeapi.ratelimit import TokenBucket

SMUGGLED = "\r\nHost: a\r\n\r\nDELETE /api/v1/namespaces/default/pods/victim"
HOSTILE_NAMESPACE = "default/pods/x HTTP/1.1" + SMUGGLED

PROFILE: dict[str, Any] = {
    "apiVersion": "config.koordinator.sh/v1alpha1",
    "kind": "ClusterColocationProfile",
    "metadata": {"name": "by-namespace", "uid": "u-1", "resourceVersion": "1"},
    "spec": {"namespaceSelector": {"matchLabels": {"team": "a"}}, "labels": {"mutated": "true"}},
}


def pod_review(namespace: str, *, uid: str = "r-1") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


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


async def test_webhook_namespace_lookup_cannot_smuggle_a_delete(standin: StandInApi, http: ApiHttp) -> None:
    """The reproduction: a forged pod review posted to /mutate-pod whose namespace carries a second request
    line. Before the fix the stand-in saw ``GET .../pods/x`` and then ``DELETE .../pods/victim``; now the
    review is denied, naming the field, before any lookup."""
    lookup = KubeColocationLookup(http)
    lookup.profiles_reflector.replace([PROFILE], "1")
    assert [p.name for p in lookup.profiles()] == ["by-namespace"]
    async with TestClient(TestServer(webhook_app(PodMutator(lookup)))) as client:
        resp = await client.post("/mutate-pod", json=pod_review(HOSTILE_NAMESPACE))
        assert resp.status == 200
        answer = await resp.json()
    assert_not_smuggled(standin, at_most=0)
    assert answer["response"]["uid"] == "r-1"
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["message"].startswith("request.namespace 'default/pods/x HTTP/1.1\\r\\n")


async def test_extender_bind_cannot_smuggle_a_delete(standin: StandInApi, http: ApiHttp) -> None:
    """``/bind`` binds through the cluster client with the request's PodNamespace and PodName."""
    client = KubeClusterClient(http, EventRecorder(http))
    with pytest.raises(ClusterError):
        await client.bind(Pod(meta=ObjectMeta(name="x", namespace=HOSTILE_NAMESPACE, uid="u")), "node-1")
    assert_not_smuggled(standin, at_most=0)


def assert_not_smuggled(api: StandInApi, *, at_most: int = 1) -> None:
    assert "DELETE" not in api.methods, api.request_lines
    assert len(api.request_lines) <= at_most, api.request_lines
    assert b"victim" not in api.raw
