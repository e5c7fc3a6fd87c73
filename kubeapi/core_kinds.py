"""The Node and Pod kinds a binary lists and watches (raw JSON, or protobuf messages, into lean typed
records)."""

from __future__ import annotations

from typing import Any

from apis.core.parse import parse_node
from apis.core.types import Node
from kubeapi.pod_watch import (
    PodEntry,
    parse_pod_entry,
    pod_entry_from_message,
    update_pod_entry,
    update_pod_entry_from_message,
)
from kubeapi.protoparse import node_from_message
from kubeapi.reflector import ResourceKind

Json = dict[str, Any]

NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
"""Terminal pods hold no resources and are never scheduled: the Pod watch leaves them out."""


def pod_rank(obj: Json) -> int:
    """Bound pods first in a list's delivery, so the cache is whole before the queue fills."""
    spec = obj.get("spec")
    return 0 if isinstance(spec, dict) and spec.get("nodeName") else 1


NODE_KIND: ResourceKind[Node] = ResourceKind(
    "Node", "", "v1", "nodes", parse_node, protobuf=True, from_message=node_from_message
)
POD_KIND: ResourceKind[PodEntry] = ResourceKind(
    "Pod",
    "",
    "v1",
    "pods",
    parse_pod_entry,
    field_selector=NON_TERMINAL_PODS,
    rank=pod_rank,
    update=update_pod_entry,
    protobuf=True,
    from_message=pod_entry_from_message,
    update_message=update_pod_entry_from_message,
)
