"""kubeapi.protowire / kubeapi.protodict: Kubernetes protobuf bodies and watch frames -> the parsers' dicts.

The bytes are built with the generated messages exactly as k8s.io/apimachinery frames them (magic +
runtime.Unknown for bodies, 4-byte big-endian length + raw WatchEvent for watch frames); the real API
server's bytes are decoded in tests/integration/kubeapi/test_protobuf_wire_cluster.py.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apis.core.parse import parse_pod
from kubeapi import protodict, protowire
from kubeapi.errors import ClusterError
from kubeapi.http import api_error
from kubeapi.pod_watch import parse_pod_entry
from kubeapi.protogen import core_v1_pb2, meta_v1_pb2, runtime_pb2
from kubeapi.reflector import Reflector, ResourceKind, ResourceVersionGoneError


def body(kind: str, message: Any, *, encoding: str = "") -> bytes:
    unknown = runtime_pb2.Unknown(raw=message.SerializeToString(), contentEncoding=encoding)
    unknown.typeMeta.apiVersion = "v1"
    unknown.typeMeta.kind = kind
    return protowire.MAGIC + unknown.SerializeToString()


def frame(event_type: str, kind: str, message: Any) -> bytes:
    event = meta_v1_pb2.WatchEvent(type=event_type)
    event.object.raw = body(kind, message)
    raw = event.SerializeToString()
    return struct.pack(">I", len(raw)) + raw


def pod(name: str, *, node: str = "", cpu: str = "250m") -> Any:
    p = core_v1_pb2.Pod()
    p.metadata.name = name
    p.metadata.namespace = "ns"
    p.metadata.uid = f"uid-{name}"
    p.metadata.resourceVersion = "7"
    p.metadata.creationTimestamp.seconds = 1767323045  # 2026-01-02T03:04:05Z
    p.metadata.labels["app"] = "web"
    p.metadata.managedFields.add(manager="kubectl", operation="Update")
    p.spec.nodeName = node
    c = p.spec.containers.add(name="app", image="nginx")
    c.resources.requests["cpu"].string = cpu
    c.resources.limits["memory"].string = "1Gi"
    c.env.add(name="A", value="1")
    return p


class Chunks:
    """An ``aiohttp.StreamReader`` stand-in: ``iter_any`` yields the given chunks, each once."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    async def iter_any(self) -> AsyncIterator[bytes]:
        while self.chunks:
            yield self.chunks.pop(0)


async def frames_of(chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    async for batch in protowire.iter_frames(Chunks(chunks)):
        out += batch
    return out


# ----- bodies -----


def test_a_pod_list_decodes_to_objects_holding_their_identity_and_message() -> None:
    page = core_v1_pb2.PodList()
    page.metadata.resourceVersion = "42"
    setattr(page.metadata, "continue", "token")
    page.items.append(pod("a"))
    page.items.append(pod("b", node="n1"))

    doc = protowire.decode_list(body("PodList", page))

    assert doc["metadata"] == {"resourceVersion": "42", "continue": "token"}
    first, second = doc["items"]
    assert first == {
        "metadata": {"name": "a", "namespace": "ns", "uid": "uid-a", "resourceVersion": "7"},
        "spec": {"nodeName": ""},
    }
    assert second["spec"] == {"nodeName": "n1"} and second.message.metadata.name == "b"
    whole = first.as_json()
    assert whole["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
    assert "managedFields" not in whole["metadata"]  # never read: not converted
    assert whole["spec"]["containers"] == [
        {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}}
    ]
    assert parse_pod(second.as_json()).node_name == "n1"
    assert parse_pod(whole).requests == {"cpu": 250, "memory": 1 << 30}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"kind":"PodList"}', "not a Kubernetes protobuf body"),
        (protowire.MAGIC + b"\xff\xff", "undecodable runtime.Unknown"),
    ],
)
def test_a_body_that_is_not_kubernetes_protobuf_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(protowire.ProtoError, match=message):
        protowire.decode_list(data)


def test_a_compressed_or_unknown_kind_body_is_refused() -> None:
    with pytest.raises(protowire.ProtoError, match="content encoding 'gzip'"):
        protowire.decode_list(body("PodList", core_v1_pb2.PodList(), encoding="gzip"))
    with pytest.raises(protowire.ProtoError, match="unexpected kind 'SecretList'"):
        protowire.decode_list(body("SecretList", core_v1_pb2.SecretList()))


def test_an_error_answered_as_protobuf_keeps_its_reason_and_message() -> None:
    status = meta_v1_pb2.Status(status="Failure", reason="BadRequest", message="bad field selector", code=400)

    err = api_error(400, body("Status", status), method="GET", path="/api/v1/pods")

    assert (err.status, err.reason, err.message) == (400, "BadRequest", "bad field selector")
    assert protowire.error_status(b'{"kind":"Status"}') is None


# ----- watch frames -----


async def test_frames_split_anyhow_across_chunks_come_out_whole() -> None:
    stream = frame("ADDED", "Pod", pod("a")) + frame("MODIFIED", "Pod", pod("a", node="n1"))

    one_byte_chunks = await frames_of([stream[i : i + 1] for i in range(len(stream))])
    one_chunk = await frames_of([stream])

    assert one_byte_chunks == one_chunk and len(one_chunk) == 2
    assert [protowire.decode_event(f)[0] for f in one_chunk] == ["ADDED", "MODIFIED"]
    assert protowire.decode_event(one_chunk[1])[1]["spec"]["nodeName"] == "n1"


async def test_a_stream_cut_inside_a_frame_or_with_a_huge_length_is_an_error() -> None:
    whole = frame("ADDED", "Pod", pod("a"))
    with pytest.raises(protowire.ProtoError, match="ended inside a frame"):
        await frames_of([whole[:-3]])
    with pytest.raises(protowire.ProtoError, match="watch frame of"):
        await frames_of([struct.pack(">I", protowire.MAX_FRAME + 1)])


async def test_the_encoding_the_server_chose_is_told_by_the_first_byte() -> None:
    json_stream = await protowire.peek(Chunks([b"", b'{"type":"ADDED"}\n', b"more"]))
    proto_stream = await protowire.peek(Chunks([frame("ADDED", "Pod", pod("a"))]))

    assert not json_stream.protobuf and proto_stream.protobuf
    assert [c async for c in json_stream.iter_any()] == [b'{"type":"ADDED"}\n', b"more"]


def test_an_expired_version_in_a_protobuf_watch_means_list_again() -> None:
    gone = meta_v1_pb2.Status(status="Failure", reason="Expired", message="too old resource version", code=410)
    reflector = Reflector(None, ResourceKind("Pod", "", "v1", "pods", parse_pod_entry, protobuf=True), lambda *_: None)  # type: ignore[arg-type]

    with pytest.raises(ResourceVersionGoneError, match="too old resource version"):
        reflector._on_watch_frame(frame("ERROR", "Status", gone)[4:])
    with pytest.raises(ClusterError, match="undecodable event"):
        reflector._on_watch_frame(b"\xff\xff")


def test_bookmarks_and_events_from_frames_move_the_resource_version() -> None:
    seen: list[Any] = []
    kind = ResourceKind("Pod", "", "v1", "pods", parse_pod_entry, protobuf=True)
    no_http: Any = None  # frames are fed directly: nothing is requested
    reflector = Reflector(no_http, kind, lambda event, old, new: seen.append((event.value, new.pod.name)))
    mark = core_v1_pb2.Pod()
    mark.metadata.resourceVersion = "99"

    assert reflector._on_watch_frame(frame("ADDED", "Pod", pod("a"))[4:]) == 1
    assert reflector._on_watch_frame(frame("BOOKMARK", "Pod", mark)[4:]) == 0

    assert seen == [("ADDED", "a")] and reflector.resource_version == "99"


# ----- the JSON shape -----


def test_special_types_read_as_their_json() -> None:
    p = core_v1_pb2.Pod()
    p.metadata.deletionTimestamp.seconds = 0  # the zero time: JSON null
    cond = p.status.conditions.add(type="Ready", status="True")
    cond.lastTransitionTime.seconds = 1767323045
    cond.lastTransitionTime.nanos = 5  # metav1.Time's JSON has no fraction
    p.spec.topologySpreadConstraints.add(maxSkew=1, topologyKey="zone")
    port = p.spec.containers.add(name="c").livenessProbe.handler.httpGet
    port.port.type = 1
    port.port.strVal = "http"
    p.spec.overhead["cpu"].string = "10m"

    doc = protodict.to_json(p)

    assert doc["metadata"] == {"deletionTimestamp": None}
    assert doc["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}
    ]
    assert doc["spec"]["overhead"] == {"cpu": "10m"}
    assert "livenessProbe" not in doc["spec"]["containers"][0]  # containers keep only what is parsed


def test_embedded_structs_are_inline_as_in_json() -> None:
    p = core_v1_pb2.Pod()
    v = p.spec.volumes.add(name="data")
    v.volumeSource.persistentVolumeClaim.claimName = "pvc"
    cm = p.spec.volumes.add(name="cfg")
    cm.volumeSource.configMap.localObjectReference.name = "settings"
    probe = core_v1_pb2.Probe(periodSeconds=5)
    probe.handler.httpGet.port.intVal = 80

    doc = protodict.to_json(p)

    assert doc["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}},
        {"name": "cfg", "configMap": {"name": "settings"}},
    ]
    assert protodict.to_json(probe) == {"periodSeconds": 5, "httpGet": {"port": 80}}


def test_a_micro_time_keeps_microseconds() -> None:
    event = meta_v1_pb2.ManagedFieldsEntry()  # any message with a Time; MicroTime directly:
    micro = meta_v1_pb2.MicroTime(seconds=1767323045, nanos=123456789)
    assert protodict._micro_time(micro) == "2026-01-02T03:04:05.123456Z"
    assert protodict._micro_time(meta_v1_pb2.MicroTime()) is None
    assert protodict.to_json(event) == {}


@pytest.mark.parametrize(
    ("nanos", "text"),
    [(0, "0s"), (90 * 10**9, "1m30s"), (3600 * 10**9, "1h0m0s"), (1_500_000_000, "1.5s"), (-5 * 10**9, "-5s")],
)
def test_go_duration(nanos: int, text: str) -> None:
    assert protodict.go_duration(nanos) == text


@pytest.mark.parametrize(
    ("accept", "content_type", "want"),
    [
        ("", "application/vnd.kubernetes.protobuf", True),
        ("", "application/json", False),
        ("application/json", "application/vnd.kubernetes.protobuf", False),
        ("application/vnd.kubernetes.protobuf,application/json", "application/json", True),
        ("", "", False),
    ],
)
def test_wants_protobuf(accept: str, content_type: str, want: bool) -> None:
    assert protowire.wants_protobuf(accept, content_type) is want


def test_an_object_that_cannot_be_converted_costs_that_object_only(monkeypatch: pytest.MonkeyPatch) -> None:
    page = core_v1_pb2.PodList()
    page.items.append(pod("a"))
    page.items.append(pod("b"))
    rejected: list[Any] = []
    kind = ResourceKind("Pod", "", "v1", "pods", parse_pod_entry, protobuf=True)  # the dict path
    no_http: Any = None
    reflector = Reflector(no_http, kind, lambda *_: None, on_invalid=rejected.append)

    def broken(message: Any) -> Any:
        if message.metadata.name == "a":
            raise OverflowError("odd")
        return protodict.to_json(message)

    monkeypatch.setattr(protowire, "to_json", broken)
    reflector.replace(protowire.decode_list(body("PodList", page))["items"], "1")

    assert [(r.key, r.message) for r in rejected] == [("ns/a", "OverflowError: odd")]
    assert rejected[0].obj["metadata"]["uid"] == "uid-a"
    assert list(reflector.store) == ["ns/b"]


def test_a_kind_with_a_message_parser_reads_the_message_and_one_without_reads_its_json() -> None:
    from kubeapi.core_kinds import POD_KIND

    page = core_v1_pb2.PodList()
    page.items.append(pod("a"))
    items = protowire.decode_list(body("PodList", page))["items"]
    no_http: Any = None
    direct = Reflector(no_http, POD_KIND, lambda *_: None)
    by_dict = Reflector(no_http, dataclasses.replace(POD_KIND, from_message=None, update_message=None), lambda *_: None)
    direct.replace(items, "1")
    by_dict.replace(items, "1")

    assert direct.get("ns/a").pod == by_dict.get("ns/a").pod
    assert direct.get("ns/a").fingerprint[:1] != b"[" and by_dict.get("ns/a").fingerprint[:1] == b"["


def test_only_kinds_whose_parsers_read_the_kept_fields_go_as_protobuf() -> None:
    from kubeapi.core_kinds import NODE_KIND, POD_KIND
    from kubeapi.reflector import ReflectorOptions

    def uses_protobuf(kind: ResourceKind[Any], *, protobuf: bool = True) -> bool:
        return Reflector(None, kind, lambda *_: None, options=ReflectorOptions(protobuf=protobuf)).protobuf  # type: ignore[arg-type]

    whole_pods = ResourceKind("Pod", "", "v1", "pods", dict)  # the koordlet's: it reads every field
    crd = ResourceKind("Reservation", "scheduling.koordinator.sh", "v1alpha1", "reservations", dict, protobuf=True)

    assert uses_protobuf(NODE_KIND) and uses_protobuf(POD_KIND)
    assert uses_protobuf(ResourceKind("ReplicaSet", "apps", "v1", "replicasets", dict, protobuf=True))
    assert uses_protobuf(ResourceKind("TemplatesConfigMap", "", "v1", "configmaps", dict, protobuf=True))
    assert not uses_protobuf(ResourceKind("ReplicaSet", "extensions", "v1beta1", "replicasets", dict, protobuf=True))
    # its parser keeps the spec's JSON, which protobuf's always-sent zero scalars would change
    assert not protowire.supports("resource.k8s.io", "v1", "resourceclaimtemplates")
    assert not uses_protobuf(POD_KIND, protobuf=False)
    assert not uses_protobuf(whole_pods) and not uses_protobuf(crd)
