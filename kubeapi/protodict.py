"""A Kubernetes protobuf message -> the JSON-shaped dict the parsers of :mod:`apis.core.parse` read.

The parsers take the object as ``kubectl get -o json`` shows it. :func:`to_json` builds that shape from
a decoded message (:mod:`kubeapi.protogen`, upb's C runtime), field by field, keeping only what
:data:`KEEP` lists for the messages the scheduler reads partially (a Node's status is mostly
``nodeInfo`` and ``addresses``, a container mostly ``env`` and probes, every object its
``managedFields``), so the cost is that of the fields used. Fields of messages not listed are all kept.

The JSON and protobuf encodings of the same object differ in ways the parsers must not see, and this
module evens them out:

- the protobuf field names are the JSON names (go-to-protobuf takes them from the ``json`` tags);
- ``resource.Quantity`` is its string, ``intstr.IntOrString`` its int or string;
- ``meta.v1.Time`` is RFC 3339 to the second (``2026-01-02T03:04:05Z``, as its JSON is), and the zero
  time (which protobuf always sends, JSON as ``null``) is None; ``MicroTime`` keeps microseconds;
- ``runtime.RawExtension`` is its JSON (the only encoding it holds in the kinds read here), ``bytes`` are
  base64 as in JSON;
- Go's non-pointer strings, integers and booleans are sent by protobuf even when empty or zero, where
  JSON omits them (``omitempty``): the parsers read a missing string as ``""``, a missing number as 0
  and a missing boolean as false, so the extra fields change nothing parsed.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import orjson
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

Json = dict[str, Any]

_CORE = "k8s.io.api.core.v1."
_META = "k8s.io.apimachinery.pkg.apis.meta.v1."

KEEP: dict[str, frozenset[str]] = {
    _META + "ObjectMeta": frozenset(
        {
            "name",
            "generateName",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "labels",
            "annotations",
            "ownerReferences",
            "finalizers",
        }
    ),
    _CORE + "NodeStatus": frozenset({"capacity", "allocatable", "phase", "conditions", "images"}),
    _CORE + "NodeCondition": frozenset({"type", "status"}),
    _CORE + "PodStatus": frozenset(
        {
            "phase",
            "conditions",
            "nominatedNodeName",
            "qosClass",
            "resourceClaimStatuses",
            "containerStatuses",
            "initContainerStatuses",
        }
    ),
    _CORE + "ContainerStatus": frozenset({"name", "resources", "allocatedResources", "restartCount"}),
    _CORE + "PodCondition": frozenset({"type", "status", "reason", "message", "lastTransitionTime"}),
    _CORE + "Container": frozenset({"name", "image", "resources", "restartPolicy", "ports"}),
    _CORE + "PodSpec": frozenset(
        {
            "schedulerName",
            "nodeName",
            "priority",
            "priorityClassName",
            "preemptionPolicy",
            "containers",
            "initContainers",
            "resources",
            "overhead",
            "nodeSelector",
            "affinity",
            "tolerations",
            "schedulingGates",
            "topologySpreadConstraints",
            "volumes",
            "resourceClaims",
        }
    ),
}
"""Message full name -> the fields kept (what the scheduler's parsers read, with the identity fields);
a message not named keeps every field (affinity, volumes, claims, spread constraints are read whole).
The integration test that decodes the same objects both ways catches a field read but not kept."""

INLINE: dict[str, frozenset[str]] = {
    _CORE + "Volume": frozenset({"volumeSource"}),
    _CORE + "PersistentVolumeSpec": frozenset({"persistentVolumeSource"}),
    _CORE + "Probe": frozenset({"handler"}),
    _CORE + "EphemeralContainer": frozenset({"ephemeralContainerCommon"}),
}
"""Go structs embedded with ``json:",inline"`` (k8s.io/api core/v1 ``types.go``): protobuf nests them
in a field, JSON puts their fields in the enclosing object. Every field named in :data:`ALWAYS_INLINE`
is inline too."""

ALWAYS_INLINE = frozenset({"localObjectReference", "deviceConfiguration"})
"""Fields inline wherever they occur: ``localObjectReference`` (the ``name`` of a ConfigMap or Secret
reference, core/v1) and ``deviceConfiguration`` (the ``opaque`` config of a DeviceClass's, a claim's or
an allocation's configuration, resource/v1)."""

_Convert = Callable[[Any], Any]

_SCALAR, _MESSAGE, _MESSAGES, _CALL, _INLINE = range(5)
"""How a field's value becomes JSON: as it is, :func:`to_json` of it, of each of it, a function of it, or
:func:`to_json` of it merged into the enclosing dict."""

_Step = tuple[str, int, Any]
_PLANS: dict[Any, dict[Any, _Step]] = {}
"""Message class -> field descriptor -> (JSON name, how, function): built once per class."""


def to_json(message: Message) -> Json:
    """``message`` as the dict its JSON would decode to, less the fields :data:`KEEP` leaves out."""
    plan = _PLANS.get(message.__class__)
    if plan is None:
        plan = _PLANS[message.__class__] = _plan(message.DESCRIPTOR)
    out: Json = {}
    for field, value in message.ListFields():
        step = plan.get(field)
        if step is None:
            continue
        name, how, call = step
        if how == _SCALAR:
            out[name] = value
        elif how == _MESSAGE:
            out[name] = to_json(value)
        elif how == _MESSAGES:
            out[name] = [to_json(v) for v in value]
        elif how == _CALL:
            out[name] = call(value)
        else:
            out.update(to_json(value))
    return out


def _plan(descriptor: Any) -> dict[Any, _Step]:
    keep = KEEP.get(descriptor.full_name)
    inline = INLINE.get(descriptor.full_name, frozenset())
    plan: dict[Any, _Step] = {}
    for f in descriptor.fields:
        if keep is not None and f.name not in keep:
            continue
        if f.name in inline or f.name in ALWAYS_INLINE:
            plan[f] = (f.name, _INLINE, None)
        else:
            plan[f] = (f.name, *_how(f))
    return plan


def _how(field: FieldDescriptor) -> tuple[int, Any]:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        value_field = entry.fields_by_name["value"]
        if value_field.message_type is None:
            return _CALL, dict
        one = _single(value_field)
        if one is _quantity:  # a ResourceList: the hottest map, without a call per entry
            return _CALL, _resource_list
        return _CALL, lambda m: {k: one(v) for k, v in m.items()}
    one = _single(field)
    if field.is_repeated:
        if one is _same:
            return _CALL, list
        if one is to_json:
            return _MESSAGES, None
        return _CALL, lambda values: [one(v) for v in values]
    if one is _same:
        return _SCALAR, None
    if one is to_json:
        return _MESSAGE, None
    return _CALL, one


def _same(value: Any) -> Any:
    return value


def _single(field: FieldDescriptor) -> _Convert:
    if field.type == FieldDescriptor.TYPE_BYTES:
        return lambda b: base64.b64encode(b).decode("ascii")
    if field.message_type is None:
        return _same
    special = _SPECIAL.get(field.message_type.full_name)
    return special if special is not None else to_json


def _quantity(message: Any) -> str:
    return str(message.string)


def _resource_list(entries: Any) -> dict[str, str]:
    return {name: quantity.string for name, quantity in entries.items()}


def _int_or_string(message: Any) -> int | str:
    return int(message.intVal) if message.type == 0 else str(message.strVal)


def _time(message: Any) -> str | None:
    if not message.seconds and not message.nanos:
        return None
    return rfc3339(int(message.seconds))


def _micro_time(message: Any) -> str | None:
    if not message.seconds and not message.nanos:
        return None
    return rfc3339(int(message.seconds))[:-1] + f".{int(message.nanos) // 1000:06d}Z"


@lru_cache(maxsize=4096)
def rfc3339(seconds: int) -> str:
    """``seconds`` since the epoch as ``metav1.Time`` writes it in JSON (UTC, no fraction)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _duration(message: Any) -> str:
    return go_duration(int(message.duration))


def go_duration(nanos: int) -> str:
    """Go's ``time.Duration.String`` for whole-second durations, as ``metav1.Duration`` writes JSON
    (``1h0m0s``, ``90s`` -> ``1m30s``); a fraction of a second is written in seconds (``1.5s``)."""
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = f"{rest // 10**9}" if rest % 10**9 == 0 else f"{rest / 10**9:.9f}".rstrip("0")
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _raw_extension(message: Any) -> Any:
    raw = bytes(message.raw)
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _fields_v1(message: Any) -> Any:
    raw = bytes(message.Raw)  # (FieldsV1's one field is named Raw, RawExtension's raw)
    try:
        return orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None


_SPECIAL: dict[str, _Convert] = {
    "k8s.io.apimachinery.pkg.api.resource.Quantity": _quantity,
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": _int_or_string,
    _META + "Time": _time,
    _META + "MicroTime": _micro_time,
    _META + "Duration": _duration,
    _META + "FieldsV1": _fields_v1,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": _raw_extension,
}
