"""A watched Pod's raw JSON -> what the source keeps: the parsed Pod and its ``PodScheduled`` condition.

Every pod the scheduler binds comes back on the watch as a MODIFIED event: the echo of the bind, which
changes ``spec.nodeName``, ``metadata.resourceVersion`` and the ``PodScheduled`` condition and nothing
else the scheduler reads (``managedFields`` too, which it never reads). Parsing the whole pod again
for it costs as much as the first parse, so for pods without a node the entry keeps a *fingerprint*:
the compact JSON of everything :func:`~apis.core.parse.parse_pod` reads except those volatile fields.
A new version whose fingerprint is byte-for-byte the same differs from the previous one only in the
volatile fields, so the previous Pod is reused with just those replaced (:func:`update_pod_entry`).
Any other change (labels, annotations, spec, status other than conditions) gives a different
fingerprint and a full parse, so changes made by others are applied exactly as before. Equal bytes
imply equal content; the converse need not hold (key order), which only costs a full parse.

A pod read as protobuf (:func:`pod_entry_from_message`, :func:`update_pod_entry_from_message`) is
handled the same way, its fingerprint being the deterministic encoding of the message less the same
fields (never equal to a JSON fingerprint, which starts with ``[``).

Bound pods keep no fingerprint (their later updates come from the kubelet and change the status), so
the memory it takes is bounded by the pending pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apis.core.copying import replace_fields
from apis.core.frozendict import EMPTY, FrozenDict
from apis.core.parse import EMPTY_TIMES, parse_pod, parse_timestamp
from apis.core.types import Pod
from kubeapi import jsoncodec
from kubeapi.protoparse import pod_conditions, pod_from_message

Json = dict[str, Any]

VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})
"""Metadata fields left out of the fingerprint: set by the server on every write; never parsed
(``managedFields``) or taken from the new version as it is (``resourceVersion``)."""


@dataclass(frozen=True, slots=True)
class PodScheduledCondition:
    """The ``PodScheduled`` condition a pod carries on the server (as far as the watch has told us)."""

    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class PodEntry:
    """What the Pod reflector stores per pod. ``fingerprint`` is empty for bound pods (see the module
    docstring)."""

    pod: Pod
    condition: PodScheduledCondition | None
    fingerprint: bytes = b""


def parse_pod_entry(obj: Json) -> PodEntry:
    """Parse a pod in full. Raises ``ParseError`` (a ``ValueError``) naming the field at fault."""
    pod = parse_pod(obj)
    return PodEntry(pod, pod_scheduled_condition(obj), b"" if pod.node_name else fingerprint(obj))


def update_pod_entry(obj: Json, previous: PodEntry) -> PodEntry:
    """The entry for a new version of the pod ``previous`` describes: ``previous.pod`` with the
    volatile fields replaced when nothing else changed, else a full :func:`parse_pod_entry`."""
    if previous.fingerprint:
        new_fingerprint = fingerprint(obj)
        if new_fingerprint == previous.fingerprint:
            pod = _with_volatile_fields(obj, previous.pod)
            if pod is not None:
                return PodEntry(pod, pod_scheduled_condition(obj), b"" if pod.node_name else new_fingerprint)
    return parse_pod_entry(obj)


def fingerprint(obj: Json) -> bytes:
    """Compact JSON of the pod's ``metadata``, ``spec`` and ``status`` without ``spec.nodeName``,
    ``status.conditions`` and :data:`VOLATILE_METADATA`; empty (never equal to anything) when the
    object is not shaped like a pod.

    The top-level ``apiVersion`` and ``kind`` are left out: the parse never reads them, and the API
    server omits them from a list's items but sends them in watch events, so with them the echo of
    every bind of a listed pod (the whole backlog at start-up) would miss and parse the pod again."""
    meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
    if type(meta) is not dict or type(spec) is not dict or not (status is None or type(status) is dict):
        return b""
    stable = (
        {k: v for k, v in meta.items() if k not in VOLATILE_METADATA},
        {k: v for k, v in spec.items() if k != "nodeName"},
        None if status is None else {k: v for k, v in status.items() if k != "conditions"},
    )
    try:
        return jsoncodec.dumps(stable)
    except (TypeError, ValueError):
        return b""


def pod_scheduled_condition(obj: Json) -> PodScheduledCondition | None:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conditions, list):
        return None
    for c in conditions:
        if isinstance(c, dict) and c.get("type") == "PodScheduled":
            return PodScheduledCondition(
                str(c.get("status") or ""), str(c.get("reason") or ""), str(c.get("message") or "")
            )
    return None


def _with_volatile_fields(obj: Json, previous: Pod) -> Pod | None:
    """``previous`` with nodeName, resourceVersion and conditions from ``obj``; None when one of them is
    malformed (the full parse then reports it with its field path)."""
    node_name = obj["spec"].get("nodeName")
    resource_version = obj["metadata"].get("resourceVersion")
    if not (node_name is None or type(node_name) is str) or not (
        resource_version is None or type(resource_version) is str
    ):
        return None
    status = obj.get("status")
    parsed = _conditions(status.get("conditions") if status else None)
    if parsed is None:
        return None
    conditions, condition_times = parsed
    meta = previous.meta
    if meta.resource_version != (resource_version or ""):
        meta = replace_fields(meta, resource_version=resource_version or "")
    # (field copies: namespace and name are unchanged, so Pod.key is too; replace() costs ~5x more)
    return replace_fields(
        previous, meta=meta, node_name=node_name or "", conditions=conditions, condition_times=condition_times
    )


def _conditions(raw: Any) -> tuple[FrozenDict[str, str], FrozenDict[str, float]] | None:
    """Condition type -> status and type -> lastTransitionTime, as :func:`~apis.core.parse.parse_pod`
    reads them; None if malformed (the full parse then names the field)."""
    if not raw:
        return EMPTY, EMPTY_TIMES
    if type(raw) is not list:
        return None
    out: dict[str, str] = {}
    times: dict[str, float] = {}
    for c in raw:
        if type(c) is not dict:
            return None
        kind, status = c.get("type"), c.get("status")
        if type(kind) is not str or not kind or not (status is None or type(status) is str):
            return None
        out[kind] = status or ""
        changed = c.get("lastTransitionTime")
        if changed is not None:
            try:
                at = parse_timestamp(changed)
            except ValueError:
                return None
            if at is not None:
                times[kind] = at
    return FrozenDict(out), (FrozenDict(times) if times else EMPTY_TIMES)


# --- the same from protobuf messages (core_v1_pb2.Pod) ---------------------------------------------


def pod_entry_from_message(message: Any) -> PodEntry:
    """:func:`parse_pod_entry` of a pod decoded from protobuf."""
    pod = pod_from_message(message)
    return PodEntry(pod, message_scheduled_condition(message), b"" if pod.node_name else message_fingerprint(message))


def update_pod_entry_from_message(message: Any, previous: PodEntry) -> PodEntry:
    """:func:`update_pod_entry` of a pod decoded from protobuf."""
    if previous.fingerprint:
        new_fingerprint = message_fingerprint(message)
        if new_fingerprint == previous.fingerprint:
            pod = _message_volatile_fields(message, previous.pod)
            if pod is not None:
                condition = message_scheduled_condition(message)
                return PodEntry(pod, condition, b"" if pod.node_name else new_fingerprint)
    return pod_entry_from_message(message)


def message_fingerprint(message: Any) -> bytes:
    """The deterministic encoding of ``message`` without ``spec.nodeName``, ``status.conditions`` and
    :data:`VOLATILE_METADATA` (:func:`fingerprint` for a message; ``message`` is left as it is)."""
    stable = type(message)()
    stable.CopyFrom(message)
    for name in VOLATILE_METADATA:
        stable.metadata.ClearField(name)
    stable.spec.ClearField("nodeName")
    stable.status.ClearField("conditions")
    return bytes(stable.SerializeToString(deterministic=True))


def message_scheduled_condition(message: Any) -> PodScheduledCondition | None:
    """:func:`pod_scheduled_condition` of a message."""
    for c in message.status.conditions:
        if c.type == "PodScheduled":
            return PodScheduledCondition(c.status, c.reason, c.message)
    return None


def _message_volatile_fields(message: Any, previous: Pod) -> Pod | None:
    """:func:`_with_volatile_fields` from a message."""
    try:
        conditions, condition_times = pod_conditions(message.status.conditions)
    except Exception:  # a malformed condition: the full parse reports it
        return None
    resource_version = message.metadata.resourceVersion
    meta = previous.meta
    if meta.resource_version != resource_version:
        meta = replace_fields(meta, resource_version=resource_version)
    return replace_fields(
        previous, meta=meta, node_name=message.spec.nodeName, conditions=conditions, condition_times=condition_times
    )
