"""Test helper: an object's JSON -> the generated protobuf message the API server would send for it.

The inverse of :func:`kubeapi.protodict.to_json` (field names are the JSON names; quantities, times,
int-or-strings and inline structs as protodict reads them), so unit tests can build protobuf objects
from the same JSON dicts the JSON path parses.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import orjson
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from kubeapi.protodict import ALWAYS_INLINE, INLINE

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."


def from_json(message: Message, doc: dict[str, Any]) -> Message:
    """Fill ``message`` from ``doc`` (its JSON); returns ``message``. Unknown keys raise ``KeyError``."""
    descriptor = message.DESCRIPTOR
    for key, value in doc.items():
        if value is None:
            continue
        field = descriptor.fields_by_name.get(key)
        if field is None:
            inline = _inline_owner(descriptor, key)
            from_json(getattr(message, inline), {key: value})
            continue
        _set(message, field, value)
    return message


def _inline_owner(descriptor: Any, key: str) -> str:
    names = set(INLINE.get(descriptor.full_name, frozenset())) | ALWAYS_INLINE
    for name in names:
        inner = descriptor.fields_by_name.get(name)
        if inner is not None and key in inner.message_type.fields_by_name:
            return name
    raise KeyError(f"{descriptor.full_name} has no field {key!r}")


def _set(message: Any, field: Any, value: Any) -> None:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        target = getattr(message, field.name)
        value_field = entry.fields_by_name["value"]
        for k, v in value.items():
            if value_field.message_type is None:
                target[k] = v
            else:
                _fill(target[k], v)
        return
    if field.is_repeated:
        target = getattr(message, field.name)
        for v in value:
            if entry is None:
                target.append(_scalar(field, v))
            else:
                _fill(target.add(), v)
        return
    if entry is None:
        setattr(message, field.name, _scalar(field, value))
    else:
        _fill(getattr(message, field.name), value)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64decode(value)
    return value


def _fill(message: Any, value: Any) -> None:
    name = message.DESCRIPTOR.full_name
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        message.string = str(value)
    elif name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        if isinstance(value, int):
            message.type, message.intVal = 0, value
        else:
            message.type, message.strVal = 1, value
    elif name in (_META + "Time", _META + "MicroTime"):
        at = datetime.fromisoformat(value)
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        message.seconds = int(at.timestamp())
        message.nanos = at.microsecond * 1000
    elif name == _META + "FieldsV1":
        message.Raw = orjson.dumps(value)
    elif name == "k8s.io.apimachinery.pkg.runtime.RawExtension":
        message.raw = orjson.dumps(value)
    else:
        from_json(message, value)
        message.SetInParent()
