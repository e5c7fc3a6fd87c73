"""An embedded in-memory cluster: the cluster source and client behind ``koord-scheduler simulate``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from apis.core.types import Node, Pod
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.scheduler.source import EventSink, EventType


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """A Kubernetes Event the simulator would have emitted."""

    object_key: str
    type: str
    reason: str
    message: str


@dataclass(slots=True)
class MemoryCluster:
    """Nodes, pods and other objects held in memory. Binding updates the pod and tells the sink at once."""

    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    """kind -> name -> object, for kinds plugins subscribe to (Reservation, NodeMetric...)."""
    events: list[RecordedEvent] = field(default_factory=list)
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)
    """pod key -> (PodScheduled reason, message) for pods left unschedulable."""
    _sink: EventSink | None = None

    @classmethod
    def from_objects(
        cls, nodes: Iterable[Node], pods: Iterable[Pod], objects: Mapping[str, Iterable[tuple[str, Any]]] = {}
    ) -> MemoryCluster:
        cluster = cls()
        for node in nodes:
            cluster.nodes[node.name] = node
        for pod in pods:
            cluster.pods[pod.key] = pod
        for kind, items in objects.items():
            cluster.objects[kind] = dict(items)
        return cluster

    # ----- ClusterSource -----

    @property
    def client(self) -> ClusterClient:
        return self

    async def start(self, sink: EventSink) -> None:
        self._sink = sink
        for node in self.nodes.values():
            sink.on_node(EventType.ADDED, None, node)
        for kind, items in self.objects.items():
            for obj in items.values():
                sink.on_object(kind, EventType.ADDED, None, obj)
        for pod in self.pods.values():
            if pod.node_name:
                sink.on_pod(EventType.ADDED, None, pod)
        for pod in self.pods.values():
            if not pod.node_name:
                sink.on_pod(EventType.ADDED, None, pod)

    async def stop(self) -> None:
        self._sink = None

    async def report_unschedulable(self, pod: Pod, *, reason: str, message: str) -> None:
        self.conditions[pod.key] = (reason, message)
        self.events.append(RecordedEvent(pod.key, "Warning", "FailedScheduling", message))

    async def report_scheduled(self, pod: Pod, node_name: str) -> None:
        self.conditions.pop(pod.key, None)
        self.events.append(
            RecordedEvent(pod.key, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node_name}")
        )

    # ----- ClusterClient -----

    async def bind(self, pod: Pod, node_name: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or (pod.uid and current.uid != pod.uid):
            raise ClusterError(f'pods "{pod.name}" not found')
        if current.node_name:
            raise ClusterError(f"pod {pod.key} is already assigned to node {current.node_name!r}")
        if node_name not in self.nodes:
            raise ClusterError(f'nodes "{node_name}" not found')
        bound = replace(current, node_name=node_name, phase="Running" if current.phase == "Pending" else current.phase)
        self.pods[pod.key] = bound
        if self._sink is not None:
            self._sink.on_pod(EventType.MODIFIED, current, bound)

    async def patch_pod_metadata(
        self,
        pod: Pod,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        current = self.pods.get(pod.key)
        if current is None:
            raise ClusterError(f'pods "{pod.name}" not found')
        meta = current.meta
        new_meta = replace(
            meta,
            annotations=_merge(meta.annotations, annotations),
            labels=_merge(meta.labels, labels),
        )
        updated = replace(current, meta=new_meta)
        self.pods[pod.key] = updated
        if self._sink is not None:
            self._sink.on_pod(EventType.MODIFIED, current, updated)

    async def delete_pod(self, pod: Pod, *, reason: str) -> None:
        current = self.pods.pop(pod.key, None)
        if current is None:
            raise ClusterError(f'pods "{pod.name}" not found')
        self.events.append(RecordedEvent(pod.key, "Normal", "Preempted", reason))
        if self._sink is not None:
            self._sink.on_pod(EventType.DELETED, current, None)


def _merge(base: Mapping[str, str], patch: Mapping[str, str | None] | None) -> Mapping[str, str]:
    if not patch:
        return base
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return type(base)(out) if type(base) is not dict else out  # type: ignore[call-arg]
