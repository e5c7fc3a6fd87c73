"""Lean pod and node records parsed from raw API JSON (never the kubernetes client's model classes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.core.errors import ParseError
from apis.core.parse import parse_timestamp
from apis.extension import (
    LABEL_POD_QOS,
    KubeQOSClass,
    PriorityClass,
    QoSClass,
    kube_qos_class,
    priority_class_with_default,
    qos_class_with_default,
)
from apis.slo.quantity import int_value, milli_value
from koordlet.system.layout import CgroupLayout, ContainerID, parse_container_id, pod_uid_from_dir

_MILLI_RESOURCES = frozenset({"cpu"})


def parse_resource_list(raw: Mapping[str, Any] | None) -> dict[str, int]:
    """A ResourceList: cpu in millicores, everything else in base units. Malformed amounts are dropped."""
    out: dict[str, int] = {}
    for name, amount in (raw or {}).items():
        try:
            out[name] = milli_value(amount) if name in _MILLI_RESOURCES else int_value(amount)
        except ValueError:
            continue
    return out


@dataclass(frozen=True, slots=True)
class ContainerMeta:
    name: str
    container_id: ContainerID | None
    requests: Mapping[str, int]
    limits: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class PodMeta:
    """What the koordlet needs of a pod. ``cgroup_dir`` is relative to each controller's mount."""

    uid: str
    namespace: str
    name: str
    kube_qos: KubeQOSClass
    qos: QoSClass
    priority_class: PriorityClass
    priority: int | None
    cgroup_dir: str
    phase: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[ContainerMeta, ...] = ()
    created: float | None = None
    """``metadata.creationTimestamp`` in seconds since the epoch (None: unknown, as in standalone mode)."""
    deleting: bool = False
    """``metadata.deletionTimestamp`` is set."""

    def container_dir(self, layout: CgroupLayout, container: ContainerMeta) -> str | None:
        if container.container_id is None:
            return None
        return layout.container_dir(self.kube_qos, self.uid, container.container_id)

    @property
    def is_be(self) -> bool:
        """Koordinator's BE test: ``koordinator.sh/qosClass=BE`` or k8s BestEffort."""
        return self.qos is QoSClass.BE or self.kube_qos is KubeQOSClass.BEST_EFFORT

    @property
    def labelled_be(self) -> bool:
        """Koordinator's ``GetPodQoSClassRaw(pod) == BE``: the ``koordinator.sh/qosClass`` label itself says
        BE (no derivation from the Kubernetes QoS). BE evictions and the BatchResource values use this."""
        return self.labels.get(LABEL_POD_QOS) == QoSClass.BE.value

    def total_request(self, resource: str) -> int:
        return sum(c.requests.get(resource, 0) for c in self.containers)


def parse_pod(raw: Mapping[str, Any], layout: CgroupLayout) -> PodMeta:
    """A pod from its API JSON. The k8s QoS class is ``status.qosClass`` or computed from resources."""
    meta = raw.get("metadata", {})
    spec = raw.get("spec", {})
    status = raw.get("status", {})
    statuses = {s.get("name"): s.get("containerID", "") for s in status.get("containerStatuses") or []}
    containers = tuple(
        ContainerMeta(
            name=c.get("name", ""),
            container_id=parse_container_id(statuses.get(c.get("name"), "") or ""),
            requests=parse_resource_list((c.get("resources") or {}).get("requests")),
            limits=parse_resource_list((c.get("resources") or {}).get("limits")),
        )
        for c in spec.get("containers") or []
    )
    try:
        kube_qos = KubeQOSClass(status.get("qosClass", ""))
    except ValueError:
        kube_qos = kube_qos_class((c.requests, c.limits) for c in containers)
    labels = meta.get("labels") or {}
    qos = qos_class_with_default(labels, kube_qos.value)
    priority = spec.get("priority")
    uid = meta.get("uid", "")
    return PodMeta(
        uid=uid,
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        kube_qos=kube_qos,
        qos=qos,
        priority_class=priority_class_with_default(labels, priority, qos),
        priority=priority,
        cgroup_dir=layout.pod_dir(kube_qos, uid),
        phase=status.get("phase", ""),
        labels=labels,
        annotations=meta.get("annotations") or {},
        containers=containers,
        created=_timestamp(meta.get("creationTimestamp")),
        deleting=meta.get("deletionTimestamp") is not None,
    )


def _timestamp(raw: Any) -> float | None:
    """An RFC 3339 time, or None when absent or malformed (it only delays the peak prediction)."""
    try:
        return parse_timestamp(raw)
    except ParseError:
        return None


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    uid: str = ""


def parse_node(raw: Mapping[str, Any]) -> NodeInfo:
    meta = raw.get("metadata", {})
    status = raw.get("status", {})
    return NodeInfo(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        labels=meta.get("labels") or {},
        annotations=meta.get("annotations") or {},
        capacity=parse_resource_list(status.get("capacity")),
        allocatable=parse_resource_list(status.get("allocatable")),
    )


def discover_pods(layout: CgroupLayout, list_dir: Any) -> list[PodMeta]:
    """Pods found by their cgroup dirs alone (standalone mode): the name is the UID, no labels.

    ``list_dir(rel)`` returns the child directory names of a cgroup (``[]`` if missing).
    """
    found: list[PodMeta] = []
    for kube_qos in (KubeQOSClass.GUARANTEED, KubeQOSClass.BURSTABLE, KubeQOSClass.BEST_EFFORT):
        qos_dir = layout.qos_dir(kube_qos)
        for child in sorted(list_dir(qos_dir)):
            uid = pod_uid_from_dir(child)
            if uid is None or layout.pod_dir(kube_qos, uid) != f"{qos_dir}/{child}":
                continue
            qos = qos_class_with_default({}, kube_qos.value)
            found.append(
                PodMeta(
                    uid=uid,
                    namespace="",
                    name=uid,
                    kube_qos=kube_qos,
                    qos=qos,
                    priority_class=priority_class_with_default({}, None, qos),
                    priority=None,
                    cgroup_dir=f"{qos_dir}/{child}",
                )
            )
    return found
