"""``HttpOptions(http2=True)`` against the real kube-apiserver: the scheduler's per-pod writes over one
HTTP/2 connection (ALPN h2), the server's 404 / 409 answers, and a restart of the API server while
requests are under way (in-flight requests fail as connection errors, none hangs, and the next request
opens a new connection).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from controlplane import ControlPlane

from apis.core.parse import parse_pod
from apis.core.types import Pod
from kubeapi import ApiHttp, HttpOptions, TokenBucket, load_connection
from kubeapi.client import KubeClusterClient
from kubeapi.events import EventOptions, EventRecorder
from kubeapi.http import ApiConnectionError, ApiError

pytestmark = pytest.mark.integration


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"h2-{uuid.uuid4().hex[:8]}"
    result = control_plane.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert result.status == 201, result.body[:300]
    yield name
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
async def http(control_plane: ControlPlane) -> AsyncIterator[ApiHttp]:
    client = ApiHttp(load_connection(str(control_plane.kubeconfig)), TokenBucket(0, 0), options=HttpOptions(http2=True))
    yield client
    await client.close()


def _create_pod(plane: ControlPlane, namespace: str, name: str) -> Pod:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    result = plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    assert result.status == 201, result.body[:300]
    return parse_pod(result.json())


async def test_binds_and_events_go_over_one_http2_connection(
    control_plane: ControlPlane, namespace: str, http: ApiHttp
) -> None:
    pods = [_create_pod(control_plane, namespace, f"p{i}") for i in range(20)]
    recorder = EventRecorder(http, options=EventOptions(hostname="itest", senders=4, protobuf=True))
    client = KubeClusterClient(http, recorder, protobuf=True)
    recorder.start()
    try:
        await asyncio.gather(*(client.bind(pod, f"node-{i % 3}") for i, pod in enumerate(pods)))
        for pod in pods:
            recorder.record(
                pod, event_type="Normal", reason="Scheduled", action="Binding", note="bound", controller="itest"
            )
        await recorder.flush()
    finally:
        await recorder.stop()
    assert (recorder.written, recorder.failed) == (20, 0)
    assert http._h2 is not None and http._h2.connections_opened == 1
    listed = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods").json()
    assert sorted(p["spec"].get("nodeName", "") for p in listed["items"]) == sorted(f"node-{i % 3}" for i in range(20))
    events = control_plane.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").json()
    assert sorted(e["regarding"]["name"] for e in events["items"]) == sorted(p.name for p in pods)


async def test_not_found_and_conflict_come_back_as_api_errors(
    control_plane: ControlPlane, namespace: str, http: ApiHttp
) -> None:
    with pytest.raises(ApiError) as missing:
        await http.request("GET", f"/api/v1/namespaces/{namespace}/pods/nope")
    assert missing.value.not_found and missing.value.reason == "NotFound"
    pod = _create_pod(control_plane, namespace, "twice")
    client = KubeClusterClient(http, EventRecorder(http, options=EventOptions(protobuf=True)), protobuf=True)
    await client.bind(pod, "node-a")
    with pytest.raises(ApiError) as again:
        await client.bind(pod, "node-b")
    assert again.value.conflict


async def test_a_restart_of_the_api_server_fails_requests_in_flight_and_the_next_one_reconnects(
    control_plane: ControlPlane, namespace: str, http: ApiHttp
) -> None:
    path = f"/api/v1/namespaces/{namespace}"
    await http.request("GET", path)
    outcomes: list[str] = []
    stop = asyncio.Event()

    async def keep_asking() -> None:
        while not stop.is_set():
            try:
                await http.request("GET", path)
                outcomes.append("ok")
            except ApiConnectionError:
                outcomes.append("lost")
                await asyncio.sleep(0.05)
            except ApiError as err:  # 503 / 500 while the server is still starting
                outcomes.append(f"status {err.status}")
                await asyncio.sleep(0.05)

    askers = [asyncio.create_task(keep_asking()) for _ in range(8)]
    try:
        await asyncio.sleep(0.3)
        await asyncio.to_thread(control_plane.restart_apiserver)
        await asyncio.sleep(0.3)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*askers), timeout=60)
    assert "lost" in outcomes  # the requests in flight when it stopped failed, as connection errors
    assert outcomes[-1] == "ok"
    assert http._h2 is not None and http._h2.connections_opened >= 2
    assert await http.request_status("GET", path) == 200
