"""A Binding and a ``Scheduled`` Event sent as protobuf are stored by a real kube-apiserver as their JSON is.

The scheduler's write path (kubeapi/client.py, kubeapi/events.py) binds one pod with a protobuf Binding and
records its Event with a protobuf body, and binds another pod the JSON way with the same clock; both are
read back as JSON. The protobuf pod is bound, its Event has every field the JSON path sets, and the two
stored Events differ only in what names the pod. A second bind of the same pod, and a bind with a stale
UID, are refused with a 409 the client reads from the server's protobuf Status.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from controlplane import ControlPlane

from apis.core.parse import parse_pod
from apis.core.types import Pod
from kubeapi import ApiHttp, TokenBucket, load_connection
from kubeapi.client import KubeClusterClient
from kubeapi.events import EventOptions, EventRecorder, micro_time
from kubeapi.http import ApiError

pytestmark = pytest.mark.integration

AT = 1_780_000_000.654321
"""The recorders' clock: both Events get this eventTime and the same name suffix."""
CONTROLLER = "koord-scheduler"
HOST = "itest-host"


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"protowrite-{uuid.uuid4().hex[:8]}"
    result = control_plane.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert result.status == 201, result.body[:300]
    yield name
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
async def http(control_plane: ControlPlane) -> AsyncIterator[ApiHttp]:
    client = ApiHttp(load_connection(str(control_plane.kubeconfig)), TokenBucket(0, 0))
    yield client
    await client.close()


def _create_pod(plane: ControlPlane, namespace: str, name: str) -> Pod:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        # A scheduler name nobody serves: only this test binds these pods.
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    result = plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    assert result.status == 201, result.body[:300]
    return parse_pod(result.json())


async def _bind_and_record(http: ApiHttp, pod: Pod, node: str, *, protobuf: bool) -> None:
    recorder = EventRecorder(http, options=EventOptions(hostname=HOST, senders=1, protobuf=protobuf), clock=lambda: AT)
    client = KubeClusterClient(http, recorder, controller=CONTROLLER, protobuf=protobuf)
    recorder.start()
    try:
        await client.bind(pod, node)
        recorder.record(
            pod,
            event_type="Normal",
            reason="Scheduled",
            action="Binding",
            note=f"Successfully assigned {pod.namespace}/{pod.name} to {node}",
            controller=CONTROLLER,
        )
        await recorder.flush()
    finally:
        await recorder.stop()
    assert (recorder.written, recorder.failed, recorder.dropped) == (1, 0, 0)


def _stored_event(plane: ControlPlane, namespace: str, pod: Pod) -> dict[str, Any]:
    name = f"{pod.name}.{int(AT * 1e9):x}"
    result = plane.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}")
    assert result.status == 200, result.body[:300]
    event: dict[str, Any] = result.json()
    return event


def _without_identity(event: dict[str, Any], pod: Pod) -> dict[str, Any]:
    """The Event less what names its pod or is the server's own bookkeeping."""
    out = {k: v for k, v in event.items() if k not in ("metadata", "regarding")}
    out["regarding"] = {k: v for k, v in event["regarding"].items() if k not in ("name", "uid", "resourceVersion")}
    assert event["metadata"]["name"].startswith(pod.name + ".")
    return out


async def test_a_protobuf_binding_and_event_are_stored_as_their_json_is(
    control_plane: ControlPlane, namespace: str, http: ApiHttp
) -> None:
    proto_pod = _create_pod(control_plane, namespace, "by-protobuf")
    json_pod = _create_pod(control_plane, namespace, "by-json")

    await _bind_and_record(http, proto_pod, "node-a", protobuf=True)
    await _bind_and_record(http, json_pod, "node-b", protobuf=False)

    bound = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/by-protobuf").json()
    assert bound["spec"]["nodeName"] == "node-a"
    event = _stored_event(control_plane, namespace, proto_pod)
    assert event["metadata"]["namespace"] == namespace
    assert event["eventTime"] == micro_time(AT) == "2026-05-28T20:26:40.654321Z"
    assert event["reportingController"] == CONTROLLER
    assert event["reportingInstance"] == f"{CONTROLLER}-{HOST}"
    assert (event["type"], event["reason"], event["action"]) == ("Normal", "Scheduled", "Binding")
    assert event["note"] == f"Successfully assigned {namespace}/by-protobuf to node-a"
    assert event["regarding"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": namespace,
        "name": "by-protobuf",
        "uid": proto_pod.uid,
        "resourceVersion": proto_pod.meta.resource_version,
    }
    json_event = _stored_event(control_plane, namespace, json_pod)
    json_view = _without_identity(json_event, json_pod)
    json_view["note"] = json_view["note"].replace("by-json to node-b", "by-protobuf to node-a")
    assert _without_identity(event, proto_pod) == json_view


async def test_a_refused_protobuf_binding_is_a_conflict(
    control_plane: ControlPlane, namespace: str, http: ApiHttp
) -> None:
    pod = _create_pod(control_plane, namespace, "twice")
    stale = _create_pod(control_plane, namespace, "stale")
    recorder = EventRecorder(http, options=EventOptions(protobuf=True))
    client = KubeClusterClient(http, recorder, protobuf=True)
    await client.bind(pod, "node-a")

    with pytest.raises(ApiError) as again:
        await client.bind(pod, "node-b")
    control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/stale?gracePeriodSeconds=0")
    _create_pod(control_plane, namespace, "stale")  # same name, new UID
    with pytest.raises(ApiError) as outdated:
        await client.bind(stale, "node-a")

    assert again.value.conflict, again.value
    assert "node-a" in str(again.value)
    assert outdated.value.conflict, outdated.value
    assert "UID" in str(outdated.value) or "uid" in str(outdated.value)
    assert control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/twice").json()["spec"]["nodeName"] == (
        "node-a"
    )
    assert "nodeName" not in control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/stale").json()["spec"]
