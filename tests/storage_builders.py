"""Raw storage objects (as the API server serves them) for volume plugin tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.fwtest import FakeHandle

Json = dict[str, Any]


def claim(
    name: str,
    *,
    namespace: str = "default",
    class_name: str | None = "standard",
    size: str = "1Gi",
    volume: str = "",
    bound: bool = False,
    access_modes: Iterable[str] = ("ReadWriteOnce",),
    annotations: Mapping[str, str] | None = None,
    uid: str = "",
    resource_version: str = "1",
    phase: str = "",
) -> Json:
    meta: Json = {"name": name, "namespace": namespace, "resourceVersion": resource_version}
    meta["uid"] = uid or f"uid-{name}"
    notes = dict(annotations or {})
    if bound:
        notes["pv.kubernetes.io/bind-completed"] = "yes"
    if notes:
        meta["annotations"] = notes
    spec: Json = {"accessModes": list(access_modes), "resources": {"requests": {"storage": size}}}
    if class_name is not None:
        spec["storageClassName"] = class_name
    if volume:
        spec["volumeName"] = volume
    return {"metadata": meta, "spec": spec, "status": {"phase": phase or ("Bound" if bound else "Pending")}}


def volume(
    name: str,
    *,
    class_name: str = "standard",
    size: str = "1Gi",
    access_modes: Iterable[str] = ("ReadWriteOnce",),
    node_values: Iterable[str] | None = None,
    node_key: str = "kubernetes.io/hostname",
    claim_ref: tuple[str, str] | None = None,
    phase: str = "Available",
    labels: Mapping[str, str] | None = None,
    csi: tuple[str, str] | None = None,
    resource_version: str = "1",
) -> Json:
    spec: Json = {"capacity": {"storage": size}, "accessModes": list(access_modes), "storageClassName": class_name}
    if node_values is not None:
        term = {"matchExpressions": [{"key": node_key, "operator": "In", "values": list(node_values)}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    if claim_ref is not None:
        spec["claimRef"] = {"namespace": claim_ref[0], "name": claim_ref[1]}
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    meta: Json = {"name": name, "resourceVersion": resource_version}
    if labels:
        meta["labels"] = dict(labels)
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def storage_class(
    name: str = "standard",
    *,
    provisioner: str = "csi.example.com",
    mode: str | None = "WaitForFirstConsumer",
    topologies: Iterable[Mapping[str, Iterable[str]]] = (),
) -> Json:
    out: Json = {"metadata": {"name": name}, "provisioner": provisioner}
    if mode is not None:
        out["volumeBindingMode"] = mode
    terms = [{"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in term.items()]} for term in topologies]
    if terms:
        out["allowedTopologies"] = terms
    return out


def csi_node(name: str, limits: Mapping[str, int | None], *, migrated: str = "") -> Json:
    drivers = []
    for driver, count in limits.items():
        entry: Json = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        drivers.append(entry)
    meta: Json = {"name": name}
    if migrated:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
    return {"metadata": meta, "spec": {"drivers": drivers}}


def csi_driver(name: str, *, storage_capacity: bool) -> Json:
    return {"metadata": {"name": name}, "spec": {"storageCapacity": storage_capacity}}


def capacity(
    name: str,
    *,
    class_name: str = "standard",
    capacity: str | None = "10Gi",
    maximum: str | None = None,
    node_labels: Mapping[str, str] | None = None,
) -> Json:
    out: Json = {"metadata": {"name": name, "namespace": "kube-system"}, "storageClassName": class_name}
    if capacity is not None:
        out["capacity"] = capacity
    if maximum is not None:
        out["maximumVolumeSize"] = maximum
    if node_labels is not None:
        out["nodeTopology"] = {"matchLabels": dict(node_labels)}
    return out


def objects(**by_kind: Iterable[Json]) -> dict[str, list[tuple[str, Json]]]:
    """``MemoryCluster`` objects: kind -> [(key, raw)], keys ``ns/name`` for namespaced kinds."""
    out: dict[str, list[tuple[str, Json]]] = {}
    for kind, items in by_kind.items():
        rows = []
        for raw in items:
            meta = raw["metadata"]
            key = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
            rows.append((key, raw))
        out[kind] = rows
    return out


@dataclass
class StorageHandle(FakeHandle):
    """A plugin handle for volume plugin tests: a snapshot and the watches, fed by :meth:`add`."""

    handlers: dict[str, list[Any]] = field(default_factory=dict)
    kinds: dict[str, Any] = field(default_factory=dict)
    reporters: list[Any] = field(default_factory=list)

    def watch(self, kind: Any, handler: Any) -> None:
        self.kinds[kind.kind] = kind
        self.handlers.setdefault(kind.kind, []).append(handler)

    def watch_pods(self, handler: Any) -> None:
        self.handlers.setdefault("Pod", []).append(handler)

    def add_simulation_report(self, reporter: Any) -> None:
        self.reporters.append(reporter)

    def add(self, kind_name: str, *raws: Json) -> StorageHandle:
        from koord_scheduler.framework.types import EventType

        for raw in raws:
            for handler in self.handlers.get(kind_name, ()):
                handler(EventType.ADDED, None, self.kinds[kind_name].parse(raw))
        return self
