"""An embedded in-memory cluster: the cluster source and client behind ``koord-scheduler simulate``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_timestamp
from apis.core.types import Node, Pod
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.types import EventType, ObjectKind
from koord_scheduler.scheduler import memory_claims, memory_volumes
from koord_scheduler.scheduler.source import EventSink

_VOLUME_KINDS = frozenset({"PersistentVolume", "PersistentVolumeClaim"})
_UID_KINDS = _VOLUME_KINDS | {"ResourceClaim"}


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
    objects: dict[str, dict[str, Mapping[str, Any]]] = field(default_factory=dict)
    """kind -> name (``ns/name`` when namespaced) -> raw object, for kinds plugins watch."""
    events: list[RecordedEvent] = field(default_factory=list)
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)
    """pod key -> (PodScheduled reason, message) for pods left unschedulable."""
    _sink: EventSink | None = None
    _kinds: dict[str, ObjectKind[Any]] = field(default_factory=dict)
    _version: int = 0

    def load(
        self, nodes: Iterable[Node], pods: Iterable[Pod], objects: Mapping[str, Iterable[tuple[str, Any]]] = {}
    ) -> None:
        for node in nodes:
            self.nodes[node.name] = node
        for pod in pods:
            self.pods[pod.key] = pod
        for kind, items in objects.items():
            self.objects.setdefault(kind, {}).update(_with_uids(kind, items))

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
            cluster.objects[kind] = _with_uids(kind, items)
        return cluster

    # ----- ClusterSource -----

    @property
    def client(self) -> ClusterClient:
        return self

    async def start(self, sink: EventSink, kinds: Sequence[ObjectKind[Any]] = ()) -> None:
        self._kinds = {k.kind: k for k in kinds}
        if memory_claims.CLAIM_KIND in self._kinds:
            for key, pod in list(self.pods.items()):
                if pod.resource_claims and not pod.uid:
                    # ResourceClaims name their consumers by uid, as the API server's pods would have one.
                    self.pods[key] = replace(pod, meta=replace(pod.meta, uid=f"pod-{pod.namespace}-{pod.name}"))
            self._run_claim_controller()  # before anything is delivered: pods arrive with their claims
        self._sink = sink
        for node in self.nodes.values():
            sink.on_node(EventType.ADDED, None, node)
        for kind_name, items in self.objects.items():
            kind = self._kinds.get(kind_name)
            if kind is None:
                continue
            for raw in items.values():
                sink.on_object(kind_name, EventType.ADDED, None, kind.parse(raw))
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
        # The API server clears nominatedNodeName at binding (ClearingNominatedNodeNameAfterBinding, on in 1.35).
        bound = replace(
            current,
            node_name=node_name,
            nominated_node_name="",
            phase="Running" if current.phase == "Pending" else current.phase,
        )
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

    async def patch_object_status(
        self, kind: ObjectKind[Any], name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        if kind.kind == "Pod" and not kind.group:
            return self._patch_pod_conditions(name, namespace, patch.get("status", {}))
        body: dict[str, Any] = {"status": patch.get("status", {})}
        meta = patch.get("metadata")
        if isinstance(meta, Mapping) and meta.get("resourceVersion"):
            body["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        return self._patch(kind, name, namespace, body)

    def _patch_pod_conditions(self, name: str, namespace: str, status: Mapping[str, Any]) -> Pod:
        """pods/status as the API server applies a strategic merge patch of ``conditions`` (merged by
        type): the only pod status field a scheduler plugin writes. Other status fields are refused."""
        key = f"{namespace or 'default'}/{name}"
        current = self.pods.get(key)
        if current is None:
            raise ClusterError(f'pods "{name}" not found')
        unsupported = sorted(set(status) - {"conditions"})
        if unsupported:
            raise ClusterError(f"pods/status {key}: only conditions can be patched here, not {unsupported}")
        conditions, times = dict(current.conditions), dict(current.condition_times)
        for i, condition in enumerate(status.get("conditions") or ()):
            kind = condition.get("type") if isinstance(condition, Mapping) else None
            if not isinstance(kind, str) or not kind:
                raise ClusterError(f"pods/status {key}: status.conditions[{i}].type is required")
            conditions[kind] = str(condition.get("status") or "")
            try:
                at = parse_timestamp(condition.get("lastTransitionTime"))
            except ValueError as err:
                raise ClusterError(f"pods/status {key}: status.conditions[{i}].lastTransitionTime: {err}") from None
            if at is not None:
                times[kind] = at
            if kind == "PodScheduled" and conditions[kind] == "False":
                self.conditions[key] = (str(condition.get("reason") or ""), str(condition.get("message") or ""))
        updated = replace(current, conditions=FrozenDict(conditions), condition_times=FrozenDict(times))
        self.pods[key] = updated
        if self._sink is not None:
            self._sink.on_pod(EventType.MODIFIED, current, updated)
        return updated

    async def patch_object(
        self, kind: ObjectKind[Any], name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        body = {k: v for k, v in patch.items() if k != "status"}
        return self._patch(kind, name, namespace, body)

    def _patch(self, kind: ObjectKind[Any], name: str, namespace: str, body: Mapping[str, Any]) -> Any:
        key = f"{namespace}/{name}" if namespace else name
        items = self.objects.get(kind.kind, {})
        raw = items.get(key)
        if raw is None and namespace == "default" and name in items:
            key, raw = name, items[name]  # read from a file without metadata.namespace
        if raw is None:
            raise ClusterError(f'{kind.plural}.{kind.group} "{name}" not found')
        want_version = (body.get("metadata") or {}).get("resourceVersion")
        if want_version is not None:
            # A patch that names a resourceVersion is an optimistic update, as on the API server.
            have_version = (raw.get("metadata") or {}).get("resourceVersion", "")
            if want_version != have_version:
                raise ClusterError(
                    f'Operation cannot be fulfilled on {kind.plural} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again"
                )
        # Every write moves the resourceVersion, as on the API server.
        body = _deep_merge(body, {"metadata": {"resourceVersion": self._next_version()}})
        old = kind.parse(raw)
        updated = _deep_merge(raw, body)
        new = kind.parse(updated)
        items[key] = updated
        if self._sink is not None:
            self._sink.on_object(kind.kind, EventType.MODIFIED, old, new)
        if kind.kind in _VOLUME_KINDS:
            self._run_volume_controllers()
        return new

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _run_volume_controllers(self) -> None:
        """The PersistentVolume controller and a provisioner, at once (see :mod:`.memory_volumes`)."""
        for kind_name, key, old_raw, written in memory_volumes.reconcile(self.objects, set(self.nodes)):
            new_raw = _deep_merge(written, {"metadata": {"resourceVersion": self._next_version()}})
            self.objects.setdefault(kind_name, {})[key] = new_raw
            kind = self._kinds.get(kind_name)
            if kind is None or self._sink is None:
                continue
            event = EventType.ADDED if old_raw is None else EventType.MODIFIED
            old = None if old_raw is None else kind.parse(old_raw)
            self._sink.on_object(kind_name, event, old, kind.parse(new_raw))

    def _run_claim_controller(self) -> None:
        """kube-controller-manager's resourceclaim controller, at once (see :mod:`.memory_claims`)."""
        claim_kind = self._kinds.get(memory_claims.CLAIM_KIND)
        if claim_kind is None:
            return
        claims = self.objects.setdefault(memory_claims.CLAIM_KIND, {})
        templates = self.objects.get(memory_claims.TEMPLATE_KIND, {})
        for key, pod in list(self.pods.items()):
            if pod.node_name or pod.is_terminal or not pod.resource_claims:
                continue
            created, statuses = memory_claims.create_claims(templates, pod)
            for claim_key, raw in created:
                raw["metadata"]["resourceVersion"] = self._next_version()
                claims[claim_key] = raw
                if self._sink is not None:
                    self._sink.on_object(claim_kind.kind, EventType.ADDED, None, claim_kind.parse(raw))
            if statuses != dict(pod.resource_claim_statuses):
                updated = replace(pod, resource_claim_statuses=FrozenDict(statuses))
                self.pods[key] = updated
                if self._sink is not None:
                    self._sink.on_pod(EventType.MODIFIED, pod, updated)
        live = {p.uid for p in self.pods.values() if not p.is_terminal and p.uid}
        for claim_key, new_raw in memory_claims.release_claims(claims, live):
            old_raw = claims.get(claim_key)
            if old_raw is None:
                continue
            if new_raw is None:
                del claims[claim_key]
                if self._sink is not None:
                    self._sink.on_object(claim_kind.kind, EventType.DELETED, claim_kind.parse(old_raw), None)
                continue
            written = _deep_merge(new_raw, {"metadata": {"resourceVersion": self._next_version()}})
            claims[claim_key] = written
            if self._sink is not None:
                self._sink.on_object(
                    claim_kind.kind, EventType.MODIFIED, claim_kind.parse(old_raw), claim_kind.parse(written)
                )

    def delete_object(self, kind: ObjectKind[Any], name: str, *, namespace: str = "") -> None:
        key = f"{namespace}/{name}" if namespace else name
        raw = self.objects.get(kind.kind, {}).pop(key, None)
        if raw is not None and self._sink is not None:
            self._sink.on_object(kind.kind, EventType.DELETED, kind.parse(raw), None)

    async def record_event(
        self, kind: ObjectKind[Any] | None, name: str, *, namespace: str = "", type: str, reason: str, message: str
    ) -> None:
        key = f"{namespace}/{name}" if namespace else name
        label = f"{kind.kind} {key}" if kind is not None else key
        self.events.append(RecordedEvent(label, type, reason, message))

    async def set_nominated_node_name(self, pod: Pod, node_name: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or current.node_name or current.nominated_node_name == node_name:
            return
        updated = replace(current, nominated_node_name=node_name)
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
        if current.resource_claims:
            self._run_claim_controller()


def _with_uids(kind: str, items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Claims and volumes from a file get the uid the API server would give them (a volume's ``claimRef``
    carries its claim's uid once bound)."""
    out = dict(items)
    if kind in _UID_KINDS:
        for key, raw in out.items():
            meta = raw.get("metadata") if isinstance(raw, Mapping) else None
            if isinstance(meta, Mapping) and not meta.get("uid"):
                out[key] = {**raw, "metadata": {**meta, "uid": f"{kind.lower()}-{key.replace('/', '-')}"}}
    return out


def _deep_merge(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """JSON merge patch (RFC 7386): None deletes, mappings merge, anything else replaces."""
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


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
