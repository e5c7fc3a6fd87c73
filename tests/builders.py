"""Fluent builders for Pods and Nodes in tests.

Each builder produces the raw JSON a watch event would carry (``.obj()``) and the parsed core type
(``.build()``, through the real parser, so tests exercise the same defaulting production does)::

    pod = make_pod("web-1").req(cpu="500m", memory="1Gi").label("app", "web").priority(10).build()
    node = make_node("n1").capacity(cpu="4", memory="32Gi", pods=110).taint("gpu", "true").build()
    raw = make_pod("p").host_port(8080).node("n1").obj()   # a dict, e.g. for a fake API server

Conventions:

- Resource keyword arguments use ``_`` for ``-``: ``req(ephemeral_storage="1Gi")`` is
  ``ephemeral-storage``. Names that are not identifiers go in a positional mapping:
  ``req({"nvidia.com/gpu": 1}, cpu="1")``. Amounts are quantity strings or numbers.
- A pod starts with one container, ``main`` (image ``registry.k8s.io/pause:3.9``); ``req``, ``limit``
  and ``host_port`` apply to it. ``container(...)`` / ``init_container(...)`` add more.
- Methods mutate and return the builder; ``obj()`` returns a fresh deep copy, so a builder can be
  reused as a template: ``base = make_pod("p").req(cpu="1")``, then ``base.copy().label(...)``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Self

from apis.core.parse import parse_node, parse_pod
from apis.core.types import Node, Pod

Quantity = str | int | float
Json = dict[str, Any]

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"


def _resources(positional: Mapping[str, Quantity] | None, keywords: Mapping[str, Quantity]) -> dict[str, str]:
    """Merge a mapping and keyword resources into a JSON ResourceList (quantities as strings)."""
    merged: dict[str, Quantity] = dict(positional or {})
    merged.update({name.replace("_", "-"): amount for name, amount in keywords.items()})
    return {name: amount if isinstance(amount, str) else repr(amount) for name, amount in merged.items()}


def _container(name: str, image: str) -> Json:
    return {"name": name, "image": image, "resources": {}}


class PodBuilder:
    """Builds a Pod; see the module docstring. Create with :func:`make_pod`."""

    def __init__(self, name: str, namespace: str = "default") -> None:
        self._obj: Json = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
            "spec": {"containers": [_container("main", PAUSE_IMAGE)]},
            "status": {"phase": "Pending"},
        }

    # --- output -------------------------------------------------------------------------------------

    def obj(self) -> Json:
        """The raw JSON object (a deep copy)."""
        return copy.deepcopy(self._obj)

    def build(self) -> Pod:
        """The parsed :class:`~apis.core.types.Pod`."""
        return parse_pod(self._obj)

    def copy(self) -> PodBuilder:
        """An independent builder with the same contents."""
        clone = PodBuilder.__new__(PodBuilder)
        clone._obj = self.obj()
        return clone

    # --- metadata -----------------------------------------------------------------------------------

    @property
    def _meta(self) -> Json:
        meta: Json = self._obj["metadata"]
        return meta

    @property
    def _spec(self) -> Json:
        spec: Json = self._obj["spec"]
        return spec

    @property
    def _status(self) -> Json:
        status: Json = self._obj["status"]
        return status

    def label(self, key: str, value: str) -> Self:
        self._meta.setdefault("labels", {})[key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        self._meta.setdefault("labels", {}).update(labels)
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._meta.setdefault("annotations", {})[key] = value
        return self

    def uid(self, uid: str) -> Self:
        self._meta["uid"] = uid
        return self

    def created(self, timestamp: str) -> Self:
        """``metadata.creationTimestamp`` as RFC 3339, e.g. ``"2024-05-01T10:00:00Z"``."""
        self._meta["creationTimestamp"] = timestamp
        return self

    def owner(self, kind: str, name: str, *, controller: bool = True, api_version: str = "apps/v1") -> Self:
        ref = {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "uid": f"uid-{name}",
            "controller": controller,
        }
        self._meta.setdefault("ownerReferences", []).append(ref)
        return self

    # --- resources ----------------------------------------------------------------------------------

    def req(self, resources: Mapping[str, Quantity] | None = None, /, **amounts: Quantity) -> Self:
        """Requests of the main container (merged with earlier ones)."""
        main = self._spec["containers"][0]["resources"]
        main.setdefault("requests", {}).update(_resources(resources, amounts))
        return self

    def limit(self, resources: Mapping[str, Quantity] | None = None, /, **amounts: Quantity) -> Self:
        """Limits of the main container (merged with earlier ones)."""
        main = self._spec["containers"][0]["resources"]
        main.setdefault("limits", {}).update(_resources(resources, amounts))
        return self

    def container(
        self,
        name: str | None = None,
        *,
        requests: Mapping[str, Quantity] | None = None,
        limits: Mapping[str, Quantity] | None = None,
        image: str = PAUSE_IMAGE,
    ) -> Self:
        """Add a regular container (named ``c<index>`` unless ``name`` is given)."""
        containers = self._spec["containers"]
        containers.append(self._new_container(name or f"c{len(containers)}", requests, limits, image))
        return self

    def init_container(
        self,
        name: str | None = None,
        *,
        requests: Mapping[str, Quantity] | None = None,
        limits: Mapping[str, Quantity] | None = None,
        sidecar: bool = False,
        image: str = PAUSE_IMAGE,
    ) -> Self:
        """Add an init container; ``sidecar=True`` makes it restartable (``restartPolicy: Always``)."""
        inits = self._spec.setdefault("initContainers", [])
        c = self._new_container(name or f"init{len(inits)}", requests, limits, image)
        if sidecar:
            c["restartPolicy"] = "Always"
        inits.append(c)
        return self

    @staticmethod
    def _new_container(
        name: str, requests: Mapping[str, Quantity] | None, limits: Mapping[str, Quantity] | None, image: str
    ) -> Json:
        c = _container(name, image)
        if requests:
            c["resources"]["requests"] = _resources(requests, {})
        if limits:
            c["resources"]["limits"] = _resources(limits, {})
        return c

    def overhead(self, resources: Mapping[str, Quantity] | None = None, /, **amounts: Quantity) -> Self:
        """``spec.overhead`` (RuntimeClass overhead)."""
        self._spec["overhead"] = _resources(resources, amounts)
        return self

    def pod_resources(
        self, *, requests: Mapping[str, Quantity] | None = None, limits: Mapping[str, Quantity] | None = None
    ) -> Self:
        """Pod-level ``spec.resources`` (PodLevelResources)."""
        resources: Json = {}
        if requests is not None:
            resources["requests"] = _resources(requests, {})
        if limits is not None:
            resources["limits"] = _resources(limits, {})
        self._spec["resources"] = resources
        return self

    def host_port(
        self, port: int, protocol: str = "TCP", host_ip: str = "", *, container_port: int | None = None
    ) -> Self:
        """A port of the main container with ``hostPort``; empty ``host_ip`` means 0.0.0.0."""
        entry: Json = {"containerPort": container_port or port, "hostPort": port, "protocol": protocol}
        if host_ip:
            entry["hostIP"] = host_ip
        self._spec["containers"][0].setdefault("ports", []).append(entry)
        return self

    def image(self, image: str) -> Self:
        """The main container's image."""
        self._spec["containers"][0]["image"] = image
        return self

    # --- scheduling ---------------------------------------------------------------------------------

    def priority(self, priority: int, class_name: str | None = None) -> Self:
        self._spec["priority"] = priority
        if class_name is not None:
            self._spec["priorityClassName"] = class_name
        return self

    def preemption_policy(self, policy: str) -> Self:
        """``PreemptLowerPriority`` or ``Never``."""
        self._spec["preemptionPolicy"] = policy
        return self

    def scheduler(self, name: str) -> Self:
        self._spec["schedulerName"] = name
        return self

    def node(self, name: str) -> Self:
        """``spec.nodeName``: the pod is bound (or asks for) this node."""
        self._spec["nodeName"] = name
        return self

    def node_selector(self, selector: Mapping[str, str] | None = None, /, **labels: str) -> Self:
        self._spec.setdefault("nodeSelector", {}).update({**(selector or {}), **labels})
        return self

    def node_affinity(self, key: str, operator: str, values: Iterable[str] = (), *, term: int = 0) -> Self:
        """Add a requirement to required node-affinity term ``term`` (terms are ORed, requirements ANDed)."""
        required = self._node_affinity().setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []}
        )
        terms = required["nodeSelectorTerms"]
        while len(terms) <= term:
            terms.append({"matchExpressions": []})
        terms[term].setdefault("matchExpressions", []).append(
            {"key": key, "operator": operator, "values": list(values)}
        )
        return self

    def node_name_affinity(self, *names: str, term: int = 0) -> Self:
        """Required node affinity ``matchFields: metadata.name In [names]`` on term ``term``."""
        required = self._node_affinity().setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []}
        )
        terms = required["nodeSelectorTerms"]
        while len(terms) <= term:
            terms.append({})
        terms[term].setdefault("matchFields", []).append(
            {"key": "metadata.name", "operator": "In", "values": list(names)}
        )
        return self

    def preferred_node_affinity(self, weight: int, key: str, operator: str, values: Iterable[str] = ()) -> Self:
        """Add a preferred node-affinity term with one requirement."""
        preferred = self._node_affinity().setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        requirement = {"key": key, "operator": operator, "values": list(values)}
        preferred.append({"weight": weight, "preference": {"matchExpressions": [requirement]}})
        return self

    def _node_affinity(self) -> Json:
        node_affinity: Json = self._spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        return node_affinity

    def pod_affinity(
        self,
        topology_key: str,
        match_labels: Mapping[str, str],
        *,
        anti: bool = False,
        weight: int | None = None,
        namespaces: Iterable[str] = (),
    ) -> Self:
        """Add a pod (anti-)affinity term; required unless ``weight`` is given (then preferred)."""
        term: Json = {"topologyKey": topology_key, "labelSelector": {"matchLabels": dict(match_labels)}}
        if namespaces:
            term["namespaces"] = list(namespaces)
        kind = "podAntiAffinity" if anti else "podAffinity"
        section = self._spec.setdefault("affinity", {}).setdefault(kind, {})
        if weight is None:
            section.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
        else:
            preferred = section.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
            preferred.append({"weight": weight, "podAffinityTerm": term})
        return self

    def spread(
        self,
        max_skew: int,
        topology_key: str,
        match_labels: Mapping[str, str],
        *,
        when_unsatisfiable: str = "DoNotSchedule",
        min_domains: int | None = None,
    ) -> Self:
        """Add a topology spread constraint selecting ``match_labels``."""
        constraint: Json = {
            "maxSkew": max_skew,
            "topologyKey": topology_key,
            "whenUnsatisfiable": when_unsatisfiable,
            "labelSelector": {"matchLabels": dict(match_labels)},
        }
        if min_domains is not None:
            constraint["minDomains"] = min_domains
        self._spec.setdefault("topologySpreadConstraints", []).append(constraint)
        return self

    def toleration(
        self,
        key: str = "",
        value: str = "",
        effect: str = "",
        *,
        operator: str | None = None,
        seconds: int | None = None,
    ) -> Self:
        """Add a toleration. The operator defaults to ``Exists`` without a value, else ``Equal``;
        an empty ``effect`` tolerates every effect, an empty ``key`` with ``Exists`` every taint."""
        toleration: Json = {"operator": operator or ("Equal" if value else "Exists")}
        if key:
            toleration["key"] = key
        if value:
            toleration["value"] = value
        if effect:
            toleration["effect"] = effect
        if seconds is not None:
            toleration["tolerationSeconds"] = seconds
        self._spec.setdefault("tolerations", []).append(toleration)
        return self

    def gate(self, name: str) -> Self:
        """Add a scheduling gate."""
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def pvc(self, claim_name: str, volume_name: str | None = None) -> Self:
        """Mount the PersistentVolumeClaim ``claim_name``."""
        volume = {"name": volume_name or claim_name, "persistentVolumeClaim": {"claimName": claim_name}}
        self._spec.setdefault("volumes", []).append(volume)
        return self

    def inline_volume(self, volume_name: str, source: str, **fields: Any) -> Self:
        """An inline volume of type ``source`` (``gcePersistentDisk``, ``rbd``...) with ``fields``."""
        self._spec.setdefault("volumes", []).append({"name": volume_name, source: dict(fields)})
        return self

    def ephemeral_volume(self, volume_name: str) -> Self:
        """A generic ephemeral volume (its claim is ``<pod>-<volume>``)."""
        volume = {"name": volume_name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
        self._spec.setdefault("volumes", []).append(volume)
        return self

    def resource_claim(self, name: str, *, claim: str = "", template: str = "") -> Self:
        """A ``spec.resourceClaims`` entry (DRA) naming a ResourceClaim or a ResourceClaimTemplate, used by the
        first container."""
        entry = {"name": name}
        entry["resourceClaimName" if claim else "resourceClaimTemplateName"] = claim or template
        self._spec.setdefault("resourceClaims", []).append(entry)
        self._spec["containers"][0].setdefault("resources", {}).setdefault("claims", []).append({"name": name})
        return self

    # --- status -------------------------------------------------------------------------------------

    def claim_status(self, name: str, claim_name: str) -> Self:
        """``status.resourceClaimStatuses``: the claim kube-controller-manager generated for ``name``."""
        self._status.setdefault("resourceClaimStatuses", []).append({"name": name, "resourceClaimName": claim_name})
        return self

    def phase(self, phase: str) -> Self:
        self._status["phase"] = phase
        return self

    def nominated(self, node_name: str) -> Self:
        """``status.nominatedNodeName``."""
        self._status["nominatedNodeName"] = node_name
        return self

    def qos(self, qos_class: str) -> Self:
        """``status.qosClass`` as the API server reports it (otherwise it is computed)."""
        self._status["qosClass"] = qos_class
        return self

    def condition(self, condition_type: str, status: str = "True") -> Self:
        self._status.setdefault("conditions", []).append({"type": condition_type, "status": status})
        return self


class NodeBuilder:
    """Builds a Node; see the module docstring. Create with :func:`make_node`."""

    def __init__(self, name: str) -> None:
        self._obj: Json = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"capacity": {}, "allocatable": {}},
        }
        self._allocatable_set = False

    def obj(self) -> Json:
        """The raw JSON object (a deep copy)."""
        return copy.deepcopy(self._obj)

    def build(self) -> Node:
        """The parsed :class:`~apis.core.types.Node`."""
        return parse_node(self._obj)

    def copy(self) -> NodeBuilder:
        clone = NodeBuilder.__new__(NodeBuilder)
        clone._obj = self.obj()
        clone._allocatable_set = self._allocatable_set
        return clone

    def capacity(self, resources: Mapping[str, Quantity] | None = None, /, **amounts: Quantity) -> Self:
        """``status.capacity``; also ``status.allocatable`` unless :meth:`allocatable` was called."""
        parsed = _resources(resources, amounts)
        self._obj["status"]["capacity"].update(parsed)
        if not self._allocatable_set:
            self._obj["status"]["allocatable"].update(parsed)
        return self

    def allocatable(self, resources: Mapping[str, Quantity] | None = None, /, **amounts: Quantity) -> Self:
        """Override ``status.allocatable`` for the given resources (system reservations); the others keep
        their capacity, and later :meth:`capacity` calls no longer change allocatable."""
        self._allocatable_set = True
        self._obj["status"]["allocatable"].update(_resources(resources, amounts))
        return self

    def label(self, key: str, value: str) -> Self:
        self._obj["metadata"]["labels"][key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        self._obj["metadata"]["labels"].update(labels)
        return self

    def zone(self, zone: str) -> Self:
        """``topology.kubernetes.io/zone``."""
        return self.label("topology.kubernetes.io/zone", zone)

    def annotation(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        self._obj["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def unschedulable(self, unschedulable: bool = True) -> Self:
        """Cordon the node (``spec.unschedulable``)."""
        self._obj["spec"]["unschedulable"] = unschedulable
        return self

    def image(self, *names: str, size_bytes: int) -> Self:
        """An image present on the node (``status.images``)."""
        self._obj["status"].setdefault("images", []).append({"names": list(names), "sizeBytes": size_bytes})
        return self

    def condition(self, condition_type: str, status: str = "True") -> Self:
        self._obj["status"].setdefault("conditions", []).append({"type": condition_type, "status": status})
        return self


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    """A Pending pod in ``namespace`` with one resource-less container; refine with the builder methods."""
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    """A node labelled ``kubernetes.io/hostname=<name>`` with no resources; add ``.capacity(...)``."""
    return NodeBuilder(name)
