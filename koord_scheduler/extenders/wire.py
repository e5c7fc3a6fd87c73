"""The extender protocol's JSON (kube-scheduler ``k8s.io/kube-scheduler/extender/v1``).

The Go types carry no json tags, so kube-scheduler writes the field names as they are (``Pod``,
``NodeNames``, ``FailedNodes``...) and reads replies case-insensitively; both directions here do the
same. Encoding gives the lean Pod and Node that pykoord keeps (metadata, scheduling fields, the pod's
effective requests and limits as one container), which is what extenders read in practice. Decoding
checks every field it uses and raises :class:`ExtenderProtocolError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis.core.quantity import format_quantity
from apis.core.types import Node, Pod, Taint, Toleration

MAX_EXTENDER_PRIORITY = 10
"""``extenderv1.MaxExtenderPriority``: extender scores are 0..10."""


class ExtenderProtocolError(ValueError):
    """A reply that does not decode as the verb's result type."""


def _quantities(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in resources.items()}


def _meta(
    name: str, namespace: str, uid: str, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if uid:
        meta["uid"] = uid
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def _toleration(t: Toleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    if t.key:
        out["key"] = t.key
    if t.value:
        out["value"] = t.value
    if t.effect is not None:
        out["effect"] = str(t.effect.value)
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _taint(t: Taint) -> dict[str, Any]:
    out: dict[str, Any] = {"key": t.key, "effect": str(t.effect.value)}
    if t.value:
        out["value"] = t.value
    return out


def encode_pod(pod: Pod) -> dict[str, Any]:
    """A ``v1.Pod`` as an extender reads it."""
    resources: dict[str, Any] = {}
    if pod.requests:
        resources["requests"] = _quantities(pod.requests)
    if pod.limits:
        resources["limits"] = _quantities(pod.limits)
    spec: dict[str, Any] = {
        "schedulerName": pod.scheduler_name,
        "containers": [{"name": "pod", "resources": resources}],
        "priority": pod.priority,
        "preemptionPolicy": pod.preemption_policy,
    }
    if pod.node_name:
        spec["nodeName"] = pod.node_name
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = [_toleration(t) for t in pod.tolerations]
    status: dict[str, Any] = {"phase": pod.phase, "qosClass": pod.qos_class}
    if pod.nominated_node_name:
        status["nominatedNodeName"] = pod.nominated_node_name
    meta = pod.meta
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(meta.name, meta.namespace, meta.uid, meta.labels, meta.annotations),
        "spec": spec,
        "status": status,
    }


def encode_node(node: Node) -> dict[str, Any]:
    """A ``v1.Node`` as an extender reads it."""
    spec: dict[str, Any] = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [_taint(t) for t in node.taints]
    status: dict[str, Any] = {
        "allocatable": _quantities(node.allocatable),
        "capacity": _quantities(node.capacity),
        "conditions": [{"type": k, "status": v} for k, v in node.conditions.items()],
    }
    meta = node.meta
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(meta.name, "", meta.uid, meta.labels, meta.annotations),
        "spec": spec,
        "status": status,
    }


def extender_args(
    pod: Pod, nodes: Sequence[Node], *, node_cache_capable: bool, names: Sequence[str] | None = None
) -> dict[str, Any]:
    """``ExtenderArgs``: node names only when the extender keeps its own node cache."""
    if node_cache_capable:
        return {"Pod": encode_pod(pod), "Nodes": None, "NodeNames": list(names or [n.name for n in nodes])}
    return {"Pod": encode_pod(pod), "Nodes": {"items": [encode_node(n) for n in nodes]}, "NodeNames": None}


def binding_args(pod: Pod, node: str) -> dict[str, Any]:
    """``ExtenderBindingArgs``."""
    return {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node}


def preemption_args(
    pod: Pod, victims: Mapping[str, Sequence[Pod]], pdb_violations: Mapping[str, int], *, node_cache_capable: bool
) -> dict[str, Any]:
    """``ExtenderPreemptionArgs``: victims by UID (``NodeNameToMetaVictims``) for a node-cache-capable
    extender, whole pods (``NodeNameToVictims``) otherwise."""
    if node_cache_capable:
        meta = {
            node: {"Pods": [{"UID": p.uid} for p in pods], "NumPDBViolations": pdb_violations.get(node, 0)}
            for node, pods in victims.items()
        }
        return {"Pod": encode_pod(pod), "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
    full = {
        node: {"Pods": [encode_pod(p) for p in pods], "NumPDBViolations": pdb_violations.get(node, 0)}
        for node, pods in victims.items()
    }
    return {"Pod": encode_pod(pod), "NodeNameToVictims": full, "NodeNameToMetaVictims": None}


# ----- replies -----


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json matches keys case-insensitively (an exact match first)."""
    if name in obj:
        return obj[name]
    lowered = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def _object(raw: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ExtenderProtocolError(f"{what}: expected a JSON object, got {type(raw).__name__}")
    return raw


def _string_map(raw: Any, what: str) -> dict[str, str]:
    if raw is None:
        return {}
    obj = _object(raw, what)
    out: dict[str, str] = {}
    for key, value in obj.items():
        if not isinstance(value, str):
            raise ExtenderProtocolError(f"{what}[{key!r}]: expected a string, got {type(value).__name__}")
        out[str(key)] = value
    return out


@dataclass(frozen=True, slots=True)
class FilterReply:
    """``ExtenderFilterResult``; ``node_names`` is None when the extender sent neither list."""

    node_names: tuple[str, ...] | None
    failed: dict[str, str]
    failed_and_unresolvable: dict[str, str]
    error: str


def decode_filter_result(raw: Any, *, node_cache_capable: bool) -> FilterReply:
    obj = _object(raw, "ExtenderFilterResult")
    error = _field(obj, "Error") or ""
    if not isinstance(error, str):
        raise ExtenderProtocolError(f"ExtenderFilterResult.Error: expected a string, got {type(error).__name__}")
    names: tuple[str, ...] | None = None
    node_names = _field(obj, "NodeNames")
    nodes = _field(obj, "Nodes")
    if node_cache_capable and node_names is not None:
        if not isinstance(node_names, list) or not all(isinstance(n, str) for n in node_names):
            raise ExtenderProtocolError("ExtenderFilterResult.NodeNames: expected a list of strings")
        names = tuple(node_names)
    elif nodes is not None:
        items = _field(_object(nodes, "ExtenderFilterResult.Nodes"), "items") or []
        if not isinstance(items, list):
            raise ExtenderProtocolError("ExtenderFilterResult.Nodes.items: expected a list")
        collected = []
        for i, item in enumerate(items):
            meta = _field(_object(item, f"ExtenderFilterResult.Nodes.items[{i}]"), "metadata")
            name = _field(_object(meta, f"ExtenderFilterResult.Nodes.items[{i}].metadata"), "name")
            if not isinstance(name, str):
                raise ExtenderProtocolError(f"ExtenderFilterResult.Nodes.items[{i}].metadata.name: expected a string")
            collected.append(name)
        names = tuple(collected)
    return FilterReply(
        node_names=names,
        failed=_string_map(_field(obj, "FailedNodes"), "ExtenderFilterResult.FailedNodes"),
        failed_and_unresolvable=_string_map(
            _field(obj, "FailedAndUnresolvableNodes"), "ExtenderFilterResult.FailedAndUnresolvableNodes"
        ),
        error=error,
    )


def decode_host_priorities(raw: Any) -> list[tuple[str, int]]:
    """``HostPriorityList``: ``[{"Host": name, "Score": int}]``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ExtenderProtocolError(f"HostPriorityList: expected a JSON list, got {type(raw).__name__}")
    out = []
    for i, item in enumerate(raw):
        if type(item) is dict and len(item) == 2:  # the usual exact keys, checked without the general path
            host, score = item.get("Host"), item.get("Score")
            if type(host) is str and type(score) is int:
                out.append((host, score))
                continue
        entry = _object(item, f"HostPriorityList[{i}]")
        host, score = _field(entry, "Host"), _field(entry, "Score")
        if not isinstance(host, str):
            raise ExtenderProtocolError(f"HostPriorityList[{i}].Host: expected a string")
        if score is None:
            score = 0
        if isinstance(score, bool) or not isinstance(score, int):
            raise ExtenderProtocolError(f"HostPriorityList[{i}].Score: expected an integer, got {score!r}")
        out.append((host, score))
    return out


def decode_binding_result(raw: Any) -> str:
    """``ExtenderBindingResult``: the error text, "" when bound."""
    error = _field(_object(raw, "ExtenderBindingResult"), "Error") or ""
    if not isinstance(error, str):
        raise ExtenderProtocolError("ExtenderBindingResult.Error: expected a string")
    return error


def decode_preemption_result(raw: Any) -> dict[str, tuple[tuple[str, ...], int]]:
    """``ExtenderPreemptionResult.NodeNameToMetaVictims``: node -> (victim UIDs, PDB violations)."""
    obj = _object(raw, "ExtenderPreemptionResult")
    victims = _field(obj, "NodeNameToMetaVictims")
    if victims is None:
        return {}
    out: dict[str, tuple[tuple[str, ...], int]] = {}
    for node, meta_raw in _object(victims, "ExtenderPreemptionResult.NodeNameToMetaVictims").items():
        what = f"ExtenderPreemptionResult.NodeNameToMetaVictims[{node!r}]"
        meta = _object(meta_raw, what)
        pods = _field(meta, "Pods") or []
        if not isinstance(pods, list):
            raise ExtenderProtocolError(f"{what}.Pods: expected a list")
        uids = []
        for j, pod in enumerate(pods):
            uid = _field(_object(pod, f"{what}.Pods[{j}]"), "UID")
            if not isinstance(uid, str):
                raise ExtenderProtocolError(f"{what}.Pods[{j}].UID: expected a string")
            uids.append(uid)
        violations = _field(meta, "NumPDBViolations") or 0
        if isinstance(violations, bool) or not isinstance(violations, int):
            raise ExtenderProtocolError(f"{what}.NumPDBViolations: expected an integer")
        out[str(node)] = (tuple(uids), violations)
    return out
