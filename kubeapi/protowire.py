"""Lists and watches of built-in kinds as ``application/vnd.kubernetes.protobuf``.

The wire format, as k8s.io/apimachinery v0.35 writes it (``pkg/runtime/serializer/protobuf``):

- a response body (a list page, a ``Status``) is the 4-byte magic ``k8s\\x00`` followed by a
  ``runtime.Unknown`` whose ``typeMeta`` names the kind and whose ``raw`` holds the object's message;
- a watch (``Content-Type: application/vnd.kubernetes.protobuf;stream=watch``) is a sequence of frames,
  each a 4-byte big-endian length and that many bytes of a ``meta.v1.WatchEvent`` *without* the magic
  (the stream serializer is the raw one); the event's ``object.raw`` is the object encoded as a body is
  (magic + ``Unknown``), a ``Status`` for ERROR events.

Objects come out as :class:`ProtoObject`: dicts holding only what the reflector itself reads (name,
namespace, uid, resourceVersion; a Pod's ``spec.nodeName``), with the decoded message attached. A kind
with a message parser (:attr:`kubeapi.reflector.ResourceKind.from_message`, :mod:`kubeapi.protoparse`)
builds its values from the message directly; any other parser gets the JSON-shaped dict
(:meth:`ProtoObject.as_json`, :func:`kubeapi.protodict.to_json`), so it reads the same fields in both
encodings. Only the kinds in :data:`BUILTIN_KINDS` can be read this way; custom resources are served as
JSON only.

Every malformed input raises :class:`ProtoError` (a ``ValueError``) saying what was wrong.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.message import DecodeError, Message

from kubeapi.protodict import to_json
from kubeapi.protogen import core_v1_pb2, meta_v1_pb2, runtime_pb2

Json = dict[str, Any]

PROTOBUF = "application/vnd.kubernetes.protobuf"
PROTOBUF_OR_JSON = f"{PROTOBUF}, application/json"
"""What a list or watch of a built-in kind accepts (client-go's default for protobuf clients). The
response is decoded as what it is: a body that starts with :data:`MAGIC` is protobuf, anything else
JSON; a watch stream whose first byte is ``{`` is JSON lines (a frame's first byte is the top byte of
its length, never 0x7b below 2 GiB)."""
MAGIC = b"k8s\x00"
MAX_FRAME = 256 * 1024 * 1024
"""A frame longer than this is not a watch event of ours (the API server's request limit is 3 MiB)."""

BUILTIN_KINDS: dict[str, tuple[str, str, str, str]] = {
    "Pod": ("", "v1", "pods", "core_v1"),
    "Node": ("", "v1", "nodes", "core_v1"),
    "Namespace": ("", "v1", "namespaces", "core_v1"),
    "ConfigMap": ("", "v1", "configmaps", "core_v1"),
    "Service": ("", "v1", "services", "core_v1"),
    "ReplicationController": ("", "v1", "replicationcontrollers", "core_v1"),
    "PersistentVolumeClaim": ("", "v1", "persistentvolumeclaims", "core_v1"),
    "PersistentVolume": ("", "v1", "persistentvolumes", "core_v1"),
    "ReplicaSet": ("apps", "v1", "replicasets", "apps_v1"),
    "StatefulSet": ("apps", "v1", "statefulsets", "apps_v1"),
    "PodDisruptionBudget": ("policy", "v1", "poddisruptionbudgets", "policy_v1"),
    "PriorityClass": ("scheduling.k8s.io", "v1", "priorityclasses", "scheduling_v1"),
    "StorageClass": ("storage.k8s.io", "v1", "storageclasses", "storage_v1"),
    "CSINode": ("storage.k8s.io", "v1", "csinodes", "storage_v1"),
    "CSIDriver": ("storage.k8s.io", "v1", "csidrivers", "storage_v1"),
    "CSIStorageCapacity": ("storage.k8s.io", "v1", "csistoragecapacities", "storage_v1"),
    "DeviceClass": ("resource.k8s.io", "v1", "deviceclasses", "resource_v1"),
    "ResourceSlice": ("resource.k8s.io", "v1", "resourceslices", "resource_v1"),
    "ResourceClaim": ("resource.k8s.io", "v1", "resourceclaims", "resource_v1"),
}
"""Built-in kinds whose lists and watches may be requested as protobuf: kind -> (group, version, plural,
the :mod:`kubeapi.protogen` module of its message). Kind names are unique across these groups, so a
response's ``runtime.Unknown`` kind (``ReplicaSet``, ``ReplicaSetList``) names its message. The
generated modules are imported on first use (each costs start-up time to build its descriptors).

Not here: ResourceClaimTemplate, whose parser keeps the claim spec's JSON as it is (to create claims
from it), and protobuf sends Go's zero scalars that JSON omits (``count: 0``), so the kept JSON would
differ; the scheduler itself never reads templates (only ``simulate`` does)."""

_COLLECTIONS = frozenset(v[:3] for v in BUILTIN_KINDS.values())
_CLASSES: dict[str, type[Message]] = {}


def supports(group: str, version: str, plural: str) -> bool:
    """Whether the collection ``group/version/plural`` holds one of :data:`BUILTIN_KINDS` (whatever name
    the watcher gives the kind)."""
    return (group, version, plural) in _COLLECTIONS


def message_class(kind: str) -> type[Message] | None:
    """The generated message of ``kind`` (an object kind of :data:`BUILTIN_KINDS` or its ``...List``)."""
    cls = _CLASSES.get(kind)
    if cls is None:
        known = BUILTIN_KINDS.get(kind.removesuffix("List"))
        if known is None:
            return None
        cls = getattr(importlib.import_module(f"kubeapi.protogen.{known[3]}_pb2"), kind)
        _CLASSES[kind] = cls
    return cls


class ProtoError(ValueError):
    """A response or watch frame that is not the protobuf the API server sends."""


def unwrap(data: bytes) -> tuple[str, bytes]:
    """``(kind, raw message bytes)`` of a protobuf body (magic + ``runtime.Unknown``)."""
    if not data.startswith(MAGIC):
        raise ProtoError("not a Kubernetes protobuf body (no k8s\\x00 prefix)")
    unknown = runtime_pb2.Unknown()
    try:
        unknown.ParseFromString(data[len(MAGIC) :])
    except DecodeError as exc:
        raise ProtoError(f"undecodable runtime.Unknown: {exc}") from None
    if unknown.contentEncoding:
        raise ProtoError(f"unsupported content encoding {unknown.contentEncoding!r}")
    return unknown.typeMeta.kind, unknown.raw


def _message(kind: str, raw: bytes) -> Message:
    cls = message_class(kind)
    if cls is None:
        raise ProtoError(f"unexpected kind {kind!r}")
    message = cls()
    try:
        message.ParseFromString(raw)
    except DecodeError as exc:
        raise ProtoError(f"undecodable {kind}: {exc}") from None
    return message


class ProtoObject(dict[str, Any]):
    """One object decoded from protobuf. As a dict it holds ``metadata`` with ``name``, ``namespace``,
    ``uid`` and ``resourceVersion`` only (what the reflector keys, versions and reports it by) and, for a
    Pod, ``spec.nodeName`` (what the Pod kind's delivery order reads); :attr:`message` is the decoded
    message, :meth:`as_json` the whole object as its JSON would read."""

    __slots__ = ("message",)

    def __init__(self, message: Any) -> None:
        meta = message.metadata
        super().__init__(
            metadata={
                "name": meta.name,
                "namespace": meta.namespace,
                "uid": meta.uid,
                "resourceVersion": meta.resourceVersion,
            }
        )
        if type(message) is core_v1_pb2.Pod:
            self["spec"] = {"nodeName": message.spec.nodeName}
        self.message = message

    def as_json(self) -> Json:
        """The object as the dict its JSON decodes to (less what :data:`kubeapi.protodict.KEEP` leaves
        out). Raises whatever the conversion of an odd message raises."""
        return to_json(self.message)


def decode_list(data: bytes) -> Json:
    """A list page as ``{"metadata": {"resourceVersion", "continue"}, "items": [...]}``, the items
    :class:`ProtoObject`."""
    kind, raw = unwrap(data)
    if kind == "Status":
        raise ProtoError(f"a Status instead of a list: {status_json(raw).get('message', '')}")
    if not kind.endswith("List"):
        raise ProtoError(f"expected a list, got {kind!r}")
    message: Any = _message(kind, raw)
    meta = message.metadata
    items = [ProtoObject(item) for item in message.items]
    # ("continue" is a Python keyword: the generated field is reached with getattr)
    return {
        "metadata": {"resourceVersion": meta.resourceVersion, "continue": getattr(meta, "continue")},
        "items": items,
    }


def decode_event(frame: bytes) -> tuple[str, Json]:
    """One watch frame -> ``(type, object)``; an ERROR event's object is its ``Status`` as JSON."""
    event = meta_v1_pb2.WatchEvent()
    try:
        event.ParseFromString(frame)
    except DecodeError as exc:
        raise ProtoError(f"undecodable WatchEvent: {exc}") from None
    kind, raw = unwrap(event.object.raw)
    if kind == "Status":
        return event.type, status_json(raw)
    return event.type, ProtoObject(_message(kind, raw))


def status_json(raw: bytes) -> Json:
    """A ``meta.v1.Status`` message as its JSON fields (``code``, ``reason``, ``message``)."""
    status = meta_v1_pb2.Status()
    try:
        status.ParseFromString(raw)
    except DecodeError as exc:
        raise ProtoError(f"undecodable Status: {exc}") from None
    return {
        "kind": "Status",
        "code": status.code,
        "reason": status.reason,
        "message": status.message,
        "status": status.status,
    }


def error_status(payload: bytes) -> Json | None:
    """The ``Status`` of an error response sent as protobuf; None when ``payload`` is not one."""
    if not payload.startswith(MAGIC):
        return None
    try:
        kind, raw = unwrap(payload)
        return status_json(raw) if kind == "Status" else None
    except ProtoError:
        return None


class Peeked:
    """A watch body whose first chunk has been read (:func:`peek`); iterates like the body did."""

    def __init__(self, first: bytes, content: Any) -> None:
        self.first = first
        self.content = content
        self.protobuf = bool(first) and first[:1] != b"{"

    async def iter_any(self) -> AsyncIterator[bytes]:
        if self.first:
            yield self.first
        async for chunk in self.content.iter_any():
            yield chunk


async def peek(content: Any) -> Peeked:
    """Read the first chunk of a watch body (an ``aiohttp.StreamReader``) to tell its encoding."""
    first = b""
    async for chunk in content.iter_any():
        if chunk:
            first = bytes(chunk)
            break
    return Peeked(first, content)


async def iter_frames(content: Any) -> AsyncIterator[list[bytes]]:
    """The length-prefixed frames of a watch stream (an ``aiohttp.StreamReader``), in batches: every
    frame already buffered comes at once, as :func:`~kubeapi.http.iter_lines` does for JSON. Raises
    :class:`ProtoError` for a frame length beyond :data:`MAX_FRAME` or a stream that ends mid-frame."""
    buffer = bytearray()
    async for chunk in content.iter_any():
        buffer += chunk
        frames: list[bytes] = []
        at = 0
        while len(buffer) - at >= 4:
            (size,) = struct.unpack_from(">I", buffer, at)
            if size > MAX_FRAME:
                raise ProtoError(f"watch frame of {size} bytes")
            if len(buffer) - at - 4 < size:
                break
            frames.append(bytes(buffer[at + 4 : at + 4 + size]))
            at += 4 + size
        if at:
            del buffer[:at]
        if frames:
            yield frames
    if buffer:
        raise ProtoError(f"watch stream ended inside a frame ({len(buffer)} bytes left)")


def wants_protobuf(accept_content_types: str, content_type: str) -> bool:
    """Whether ``clientConnection`` asks for protobuf: the first media type of ``acceptContentTypes``,
    or of ``contentType`` when that is empty (client-go's rule for the Accept header), is
    :data:`PROTOBUF`. kube-scheduler's default ``contentType`` is protobuf; ``application/json`` turns
    it off."""
    accept = accept_content_types.strip() or content_type.strip()
    first = accept.split(",", 1)[0].split(";", 1)[0].strip().lower()
    return first == PROTOBUF
