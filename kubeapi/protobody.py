"""Request bodies as ``application/vnd.kubernetes.protobuf``: the scheduler's per-pod writes (a
``v1.Binding`` and an ``events.k8s.io/v1`` Event), as kube-scheduler sends them with its default
``clientConnection.contentType``.

The envelope is what k8s.io/apimachinery v0.35 writes (``pkg/runtime/serializer/protobuf``,
``Serializer.Encode``): the 4-byte magic ``k8s\\x00``, then a ``runtime.Unknown`` whose ``typeMeta``
holds the object's ``apiVersion`` and ``kind`` and whose ``raw`` is the object's message;
``contentType`` and ``contentEncoding`` stay empty (raw is protobuf, uncompressed).

Each builder sets exactly the fields the JSON body of the same request sets (a proto2 field that is
not set is not sent, as JSON's ``omitempty`` leaves it out), so the API server stores the same object
whichever encoding it was sent in; the unit tests decode these bytes and compare them with the JSON
bodies field by field. The caller answers for valid names (:mod:`.paths` checks them first).
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from datetime import UTC, datetime

from google.protobuf.message import Message

from kubeapi.protogen import core_v1_pb2, events_v1_pb2, meta_v1_pb2, runtime_pb2
from kubeapi.protowire import MAGIC


def envelope(api_version: str, kind: str, message: Message) -> bytes:
    """``message`` as a request body: :data:`~kubeapi.protowire.MAGIC` + ``runtime.Unknown``."""
    unknown = runtime_pb2.Unknown(
        typeMeta=runtime_pb2.TypeMeta(apiVersion=api_version, kind=kind), raw=message.SerializeToString()
    )
    return MAGIC + unknown.SerializeToString()


def binding(namespace: str, name: str, *, uid: str, node_name: str) -> bytes:
    """The ``v1.Binding`` of pod ``namespace/name`` onto ``node_name``; ``uid`` (when not empty) is
    the precondition the API server checks."""
    meta = meta_v1_pb2.ObjectMeta(name=name, namespace=namespace)
    if uid:
        meta.uid = uid
    target = core_v1_pb2.ObjectReference(apiVersion="v1", kind="Node", name=node_name)
    return envelope("v1", "Binding", core_v1_pb2.Binding(metadata=meta, target=target))


def micro_time(seconds: float) -> meta_v1_pb2.MicroTime:
    """``metav1.MicroTime`` of a Unix time, to the microsecond as its JSON form is (rounded the same way
    as :func:`kubeapi.events.micro_time`, from the same ``datetime``), so both encodings store the same
    instant."""
    at = datetime.fromtimestamp(seconds, UTC)
    return meta_v1_pb2.MicroTime(seconds=calendar.timegm(at.utctimetuple()), nanos=at.microsecond * 1000)


def event(
    namespace: str,
    name: str,
    *,
    event_time: float,
    reporting_controller: str,
    reporting_instance: str,
    action: str,
    reason: str,
    event_type: str,
    note: str,
    regarding: Mapping[str, str],
) -> bytes:
    """An ``events.k8s.io/v1`` Event. ``regarding``: the ``ObjectReference`` as its JSON (the keys it
    has are the fields set); ``note`` is sent as given (the caller truncates it)."""
    message = events_v1_pb2.Event(
        metadata=meta_v1_pb2.ObjectMeta(name=name, namespace=namespace),
        eventTime=micro_time(event_time),
        reportingController=reporting_controller,
        reportingInstance=reporting_instance,
        action=action,
        reason=reason,
        type=event_type,
        note=note,
        regarding=core_v1_pb2.ObjectReference(**regarding),
    )
    return envelope("events.k8s.io/v1", "Event", message)
