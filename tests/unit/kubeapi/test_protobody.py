"""Protobuf request bodies (kubeapi/protobody.py) say exactly what the JSON bodies of the same requests say.

Each body is decoded back with the generated messages (kubeapi/protogen) and turned into its JSON shape
(kubeapi/protodict.py), then compared with the JSON body, field by field; the envelope is checked
against what k8s.io/apimachinery's protobuf serializer writes (magic, ``runtime.Unknown`` with
``typeMeta`` and ``raw``, no content type or encoding).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.core.parse import parse_pod
from apis.core.types import Pod
from kubeapi import protobody
from kubeapi.client import binding_body
from kubeapi.events import Regarding, _event_body, _event_protobuf, _NewEvent, micro_time
from kubeapi.protodict import to_json
from kubeapi.protogen import core_v1_pb2, events_v1_pb2, runtime_pb2
from kubeapi.protowire import MAGIC

MESSAGES: dict[tuple[str, str], Any] = {
    ("v1", "Binding"): core_v1_pb2.Binding,
    ("events.k8s.io/v1", "Event"): events_v1_pb2.Event,
}


def _decoded(body: bytes) -> dict[str, Any]:
    """A protobuf body as the JSON document it stands for (``apiVersion`` and ``kind`` from the envelope)."""
    assert body[:4] == MAGIC
    unknown = runtime_pb2.Unknown()
    unknown.ParseFromString(body[4:])
    assert unknown.contentType == "" and unknown.contentEncoding == ""
    assert not unknown.HasField("contentType") and not unknown.HasField("contentEncoding")
    meta = unknown.typeMeta
    message = MESSAGES[(meta.apiVersion, meta.kind)]()
    message.ParseFromString(unknown.raw)
    return {"apiVersion": meta.apiVersion, "kind": meta.kind, **to_json(message)}


def _pod(uid: str) -> Pod:
    meta: dict[str, str] = {"name": "web-0", "namespace": "team-a"}
    if uid:
        meta["uid"] = uid
    return parse_pod(
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )


@pytest.mark.parametrize("uid", ["0b6f3c2e-1d4a-4e8b-9c1d-5f2a7b8c9d0e", ""], ids=["with-uid", "no-uid"])
def test_a_protobuf_binding_says_what_the_json_binding_says(uid: str) -> None:
    pod = _pod(uid)

    body = protobody.binding(pod.namespace, pod.name, uid=pod.uid, node_name="node-17")

    assert _decoded(body) == json.loads(binding_body(pod, "node-17"))


def test_the_envelope_names_the_kind_and_carries_the_message_unchanged() -> None:
    message = core_v1_pb2.Binding(target=core_v1_pb2.ObjectReference(name="n"))

    body = protobody.envelope("v1", "Binding", message)

    unknown = runtime_pb2.Unknown()
    unknown.ParseFromString(body[len(MAGIC) :])
    assert (unknown.typeMeta.apiVersion, unknown.typeMeta.kind) == ("v1", "Binding")
    assert unknown.raw == message.SerializeToString()


def _event(regarding: Regarding, *, at: float, note: str, action: str = "Binding") -> _NewEvent:
    name = f"{regarding.name}.{int(at * 1e9):x}"
    return _NewEvent(regarding, regarding.namespace or "default", name, at, "koord-scheduler", action, "Scheduled",
                     "Normal", note)  # fmt: skip


EVENTS = {
    "pod": _event(
        Regarding("Pod", "v1", "team-a", "web-0", "uid-1", "4711"),
        at=1_780_000_000.123456,
        note="Successfully assigned team-a/web-0 to node-17",
    ),
    "pod-without-uid": _event(Regarding("Pod", "v1", "team-a", "web-1"), at=1_780_000_001.5, note="x"),
    "cluster-scoped": _event(
        Regarding("Reservation", "scheduling.koordinator.sh/v1alpha1", "", "r-1"), at=1_780_000_002.0, note="y"
    ),
    "empty-action-and-note": _event(Regarding("Pod", "v1", "ns", "p"), at=1_780_000_003.25, note="", action=""),
    "long-unicode-note": _event(Regarding("Pod", "v1", "ns", "p"), at=1_780_000_004.000001, note="ü" * 900),
    "rounds-up-to-the-next-second": _event(Regarding("Pod", "v1", "ns", "p"), at=1_780_000_005.9999996, note="z"),
}


@pytest.mark.parametrize("event", EVENTS.values(), ids=EVENTS.keys())
def test_a_protobuf_event_says_what_the_json_event_says(event: _NewEvent) -> None:
    body = _event_protobuf(event, "host-1")

    expected = json.loads(json.dumps(_event_body(event, "host-1")))
    assert _decoded(body) == expected
    assert len(expected["note"].encode()) <= 1024  # the cut note is what both encodings send


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0.0, (0, 0)),
        (1_780_000_000.123456, (1_780_000_000, 123_456_000)),
        (1_780_000_000.5, (1_780_000_000, 500_000_000)),
        (1_780_000_000.9999996, (1_780_000_001, 0)),
        (1_780_000_000.0000004, (1_780_000_000, 0)),
    ],
)
def test_micro_time_is_the_json_instant_to_the_microsecond(seconds: float, expected: tuple[int, int]) -> None:
    value = protobody.micro_time(seconds)

    assert (value.seconds, value.nanos) == expected
    stamp = micro_time(seconds)
    assert stamp.endswith(f".{expected[1] // 1000:06d}Z")
