"""Decoded protobuf Pods and Nodes (:mod:`kubeapi.protogen`) straight into the core types.

:func:`pod_from_message` and :func:`node_from_message` build the same :class:`~apis.core.types.Pod` and
:class:`~apis.core.types.Node` that :func:`~apis.core.parse.parse_pod` and
:func:`~apis.core.parse.parse_node` build from the object's JSON, reading the message's fields directly
instead of going through the JSON-shaped dict (:func:`kubeapi.protodict.to_json`, which costs several
times the decode). The hot fields (metadata, containers' resources, tolerations, conditions, a Node's
status) are read here; fragments that are rarer and have their own parsers (affinity, label selectors,
kept volumes, resource claims) are turned into their JSON (the fragment only) and given to those parsers,
so their meaning is defined once.

Errors: protobuf fixes every field's type, so what can still be wrong is a value (a negative or
unparsable quantity, an unknown taint effect, a missing required name, a negative restart count). The
direct path does not word those: on anything it does not accept it gives the whole object to the JSON
path (``parse_pod(to_json(message))``), which raises the :class:`~apis.core.errors.ParseError` naming the
object and field, exactly as for a JSON object. A pod that the JSON path accepts after all gets the JSON
path's result, so the two can never disagree on what is accepted.

Equal values are shared (interned) between objects: resource amounts, image lists, node and namespace
names, a Node's image entries, a pod's condition statuses. Most pods of a cluster repeat a handful of
each, so this saves a copy per pod (memory, and the hash each shared ``FrozenDict`` computes once);
the values are immutable (``FrozenDict``, tuples, frozen dataclasses, strings), so sharing them is
safe. Each table is bounded (:data:`INTERN_LIMIT` entries); past that, values are built as before.

Where the encodings differ the JSON path's reading is kept: a zero ``metav1.Time`` (always sent by
protobuf) is absent; an empty map (no presence in protobuf) is absent, as ``omitempty`` leaves it out of
JSON; a ``metav1.Time``'s nanoseconds, which JSON does not carry, are dropped.
"""

from __future__ import annotations

import sys
from typing import Any

from apis.core.claim_parse import check_container_claims, pod_resource_claims, resource_claim_statuses
from apis.core.frozendict import EMPTY, FrozenDict
from apis.core.parse import (
    DEPRECATED_DEVICE_RESOURCES,
    EMPTY_TIMES,
    parse_affinity,
    parse_label_selector,
    parse_node,
    parse_pod,
)
from apis.core.podresources import aggregate_pod_resources, pod_qos_class
from apis.core.quantity import MAX_AMOUNT, NANOS_PER_MILLI, NANOS_PER_UNIT, quantity_nanos
from apis.core.resize import REASON_INFEASIBLE, RESIZE_PENDING, apply_reported
from apis.core.types import (
    CPU,
    ContainerImage,
    HostPort,
    Node,
    ObjectMeta,
    OwnerReference,
    Pod,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
)
from apis.core.volume_parse import KEPT_SOURCES, LOCAL_STORAGE_SOURCES, claim_names, parse_pod_volumes
from kubeapi.protodict import to_json

_TAINT_EFFECTS = {e.value: e for e in TaintEffect}
_TOLERATION_OPERATORS = frozenset({"Equal", "Exists", "Lt", "Gt"})
_MAX_CPU_NANOS = MAX_AMOUNT * NANOS_PER_MILLI

INTERN_LIMIT = 4096
"""Entries per interning table (amounts, image lists, image entries, conditions)."""
_AMOUNTS: dict[tuple[tuple[str, int], ...], FrozenDict[str, int]] = {}
_IMAGE_LISTS: dict[tuple[str, ...], tuple[str, ...]] = {}
_NODE_IMAGES: dict[tuple[tuple[str, ...], int], ContainerImage] = {}
_CONDITIONS: dict[tuple[tuple[str, str], ...], FrozenDict[str, str]] = {}


class _ReferError(Exception):
    """A value the direct path does not accept: the JSON path decides, and words the error."""


def pod_from_message(message: Any) -> Pod:
    """``parse_pod(to_json(message))``, without the dict. ``message`` is a ``core_v1_pb2.Pod``.
    Raises ``ParseError`` (a ``ValueError``) naming the field, as :func:`~apis.core.parse.parse_pod`."""
    try:
        return _pod(message)
    except (_ReferError, ValueError):
        return parse_pod(to_json(message))


def node_from_message(message: Any) -> Node:
    """``parse_node(to_json(message))``, without the dict; raises as :func:`~apis.core.parse.parse_node`."""
    try:
        return _node(message)
    except (_ReferError, ValueError):
        return parse_node(to_json(message))


# --- metadata --------------------------------------------------------------------------------------


def time_seconds(message: Any) -> float | None:
    """A ``metav1.Time`` as :func:`~apis.core.parse.parse_timestamp` reads its JSON: whole seconds
    (JSON has no fraction); the zero time (JSON ``null``) is None."""
    seconds = message.seconds
    if not seconds and not message.nanos:
        return None
    return float(seconds)


def object_meta(meta: Any, default_namespace: str) -> ObjectMeta:
    """``metadata`` as :func:`~apis.core.parse.parse_object_meta` reads it."""
    name = meta.name
    if not name:
        raise _ReferError
    labels = meta.labels
    annotations = meta.annotations
    refs = meta.ownerReferences
    return ObjectMeta(
        name=name,
        namespace=sys.intern(meta.namespace) if meta.namespace else default_namespace,
        uid=meta.uid,
        resource_version=meta.resourceVersion,
        generation=meta.generation,
        labels=FrozenDict(labels) if labels else EMPTY,
        annotations=FrozenDict(annotations) if annotations else EMPTY,
        owner_references=tuple(OwnerReference(r.apiVersion, r.kind, r.name, r.uid, r.controller) for r in refs)
        if refs
        else (),
        creation_timestamp=time_seconds(meta.creationTimestamp),
        deletion_timestamp=time_seconds(meta.deletionTimestamp) if meta.HasField("deletionTimestamp") else None,
    )


# --- resources -------------------------------------------------------------------------------------


def _nanos(resources: Any) -> dict[str, int]:
    """A ``ResourceList`` map in nano-units; what the JSON path refuses (out of range, unparsable)
    is referred to it."""
    out: dict[str, int] = {}
    if not resources:
        return out
    for name in resources:  # (keys then lookups: cheaper than upb's items view)
        nanos = quantity_nanos(resources[name].string)
        if nanos < 0 or (nanos > _MAX_CPU_NANOS and name == CPU):
            raise _ReferError
        out[name] = nanos
    return out


def _amounts(nanos: dict[str, int]) -> FrozenDict[str, int]:
    """Nano-units -> scheduler amounts (millicores for cpu), rounded up, as the JSON path does."""
    if not nanos:
        return EMPTY
    key = tuple(nanos.items())
    amounts = _AMOUNTS.get(key)
    if amounts is None:
        amounts = FrozenDict(
            {name: -(-n // (NANOS_PER_MILLI if name == CPU else NANOS_PER_UNIT)) for name, n in nanos.items()}
        )
        if len(_AMOUNTS) < INTERN_LIMIT:
            _AMOUNTS[key] = amounts
    return amounts


class _Container:
    """What the pod needs of one container (the JSON path's ``_Container``, from a message)."""

    __slots__ = ("has_claims", "host_ports", "image", "limits", "name", "requests", "restartable")

    def __init__(self, c: Any) -> None:
        requests: dict[str, int] = {}
        limits: dict[str, int] = {}
        self.has_claims = False
        if c.HasField("resources"):
            resources = c.resources
            self.has_claims = bool(resources.claims)
            requests = _nanos(resources.requests)
            limits = _nanos(resources.limits)
            if DEPRECATED_DEVICE_RESOURCES.keys() & (requests.keys() | limits.keys()):
                raise _ReferError  # renamed device resources: rare, left to the JSON path
            for name, n in limits.items():
                if name not in requests:  # API-server defaulting: request = limit
                    requests[name] = n
        self.requests = requests
        self.limits = limits
        self.name: str = c.name
        self.image: str = c.image
        self.restartable = c.restartPolicy == "Always"
        ports = c.ports
        self.host_ports = (
            tuple(HostPort(p.hostPort, p.protocol or "TCP", p.hostIP or "0.0.0.0") for p in ports if p.hostPort > 0)
            if ports
            else ()
        )


# --- pods ------------------------------------------------------------------------------------------


def _pod(message: Any) -> Pod:
    meta = object_meta(message.metadata, "default")
    spec = message.spec
    status = message.status
    conditions, condition_times = pod_conditions(status.conditions)
    container_statuses = status.containerStatuses
    init_statuses = status.initContainerStatuses
    restarts = _restart_count(container_statuses)
    init_restarts = _restart_count(init_statuses)
    claim_statuses = (
        resource_claim_statuses([to_json(s) for s in status.resourceClaimStatuses])
        if status.resourceClaimStatuses
        else EMPTY
    )
    containers = [_Container(c) for c in spec.containers]
    if not containers:
        raise _ReferError
    init_containers = [_Container(c) for c in spec.initContainers]
    if container_statuses or init_statuses:
        _apply_resize(status, [*containers, *(c for c in init_containers if c.restartable)])
    pod_requests: dict[str, int] = {}
    pod_limits: dict[str, int] = {}
    has_pod_resources = spec.HasField("resources")
    if has_pod_resources:
        pod_requests = _nanos(spec.resources.requests)
        pod_limits = _nanos(spec.resources.limits)
    totals = aggregate_pod_resources(
        containers, init_containers, pod_requests=pod_requests, pod_limits=pod_limits, overhead=_nanos(spec.overhead)
    )
    qos_class = status.qosClass or pod_qos_class(
        containers,
        init_containers,
        pod_level=(totals.pod_requests, totals.pod_limits) if has_pod_resources else None,
    )
    host_ports: tuple[HostPort, ...] = ()
    for c in containers:
        if c.host_ports:
            host_ports += c.host_ports
    for c in init_containers:
        if c.restartable and c.host_ports:
            host_ports += c.host_ports
    resource_claims = pod_resource_claims([to_json(c) for c in spec.resourceClaims]) if spec.resourceClaims else ()
    if resource_claims or any(c.has_claims for c in (*containers, *init_containers)):
        names = frozenset(c.name for c in resource_claims)
        for key, group in (("initContainers", spec.initContainers), ("containers", spec.containers)):
            for i, c in enumerate(group):
                check_container_claims(to_json(c), names, f"{key}[{i}]")
    volumes, local_storage = _volumes(spec.volumes, meta.name)
    selector = spec.nodeSelector
    return Pod(
        meta=meta,
        scheduler_name=spec.schedulerName or "default-scheduler",
        node_name=sys.intern(spec.nodeName) if spec.nodeName else "",
        priority=spec.priority,
        priority_class_name=spec.priorityClassName,
        preemption_policy=spec.preemptionPolicy or "PreemptLowerPriority",
        requests=_amounts(totals.requests),
        limits=_amounts(totals.limits),
        non_zero_cpu=-(-totals.non_zero_cpu // NANOS_PER_MILLI),
        non_zero_memory=-(-totals.non_zero_memory // NANOS_PER_UNIT),
        node_selector=FrozenDict(selector) if selector else None,
        affinity=parse_affinity(to_json(spec.affinity)) if spec.HasField("affinity") else None,
        tolerations=_tolerations(spec.tolerations) if spec.tolerations else (),
        host_ports=host_ports,
        scheduling_gates=_gates(spec.schedulingGates) if spec.schedulingGates else (),
        topology_spread_constraints=_spread_constraints(spec.topologySpreadConstraints)
        if spec.topologySpreadConstraints
        else (),
        pvc_names=claim_names(volumes),
        images=_image_list(init_containers, containers),
        volumes=volumes,
        local_storage=local_storage,
        phase=status.phase or "Pending",
        qos_class=qos_class,
        nominated_node_name=status.nominatedNodeName,
        conditions=conditions,
        condition_times=condition_times,
        resource_claims=resource_claims,
        resource_claim_statuses=claim_statuses,
        restart_count=restarts,
        init_restart_count=init_restarts,
    )


def _image_list(init_containers: list[_Container], containers: list[_Container]) -> tuple[str, ...]:
    """The containers' images, init containers first (interned)."""
    images = tuple(c.image for c in init_containers) + tuple(c.image for c in containers)
    shared = _IMAGE_LISTS.get(images)
    if shared is None:
        shared = images
        if len(_IMAGE_LISTS) < INTERN_LIMIT:
            _IMAGE_LISTS[images] = images
    return shared


def _restart_count(statuses: Any) -> int:
    total = 0
    for s in statuses:
        count = s.restartCount
        if count < 0:
            raise _ReferError
        total += count
    return total


def _apply_resize(status: Any, containers: list[_Container]) -> None:
    """:func:`~apis.core.resize.apply_resize_status` from the message."""
    reported: dict[str, tuple[dict[str, int], dict[str, int], dict[str, int]]] = {}
    for statuses in (status.containerStatuses, status.initContainerStatuses):
        for s in statuses:
            if s.HasField("resources"):  # upstream: only a status that reports resources counts
                resources = s.resources
                reported[s.name] = (_nanos(resources.requests), _nanos(s.allocatedResources), _nanos(resources.limits))
    if reported:
        infeasible = any(c.type == RESIZE_PENDING and c.reason == REASON_INFEASIBLE for c in status.conditions)
        apply_reported(containers, reported, infeasible=infeasible)


def pod_conditions(conditions: Any) -> tuple[FrozenDict[str, str], FrozenDict[str, float]]:
    """Condition type -> status, and type -> ``lastTransitionTime`` (seconds) where it is set; a
    condition without a type is referred to the JSON path (which refuses it)."""
    if not conditions:
        return EMPTY, EMPTY_TIMES
    out: dict[str, str] = {}
    times: dict[str, float] = {}
    for c in conditions:
        kind = c.type
        if not kind:
            raise _ReferError
        out[kind] = c.status
        at = time_seconds(c.lastTransitionTime)
        if at is not None:
            times[kind] = at
    key = tuple(out.items())
    statuses = _CONDITIONS.get(key)
    if statuses is None:
        statuses = FrozenDict(out)
        if len(_CONDITIONS) < INTERN_LIMIT:
            _CONDITIONS[key] = statuses
    return statuses, (FrozenDict(times) if times else EMPTY_TIMES)


_TOLERATIONS: dict[tuple[str, str, str, str, int | None], Toleration] = {}
"""Interned tolerations (nearly every pod carries the same not-ready/unreachable pair)."""


def _tolerations(raw: Any) -> tuple[Toleration, ...]:
    out = []
    for t in raw:
        seconds = t.tolerationSeconds if t.HasField("tolerationSeconds") else None
        ident = (t.key, t.operator, t.value, t.effect, seconds)
        toleration = _TOLERATIONS.get(ident)
        if toleration is None:
            operator = t.operator or "Equal"
            effect = _TAINT_EFFECTS.get(t.effect) if t.effect else None
            if operator not in _TOLERATION_OPERATORS or (t.effect and effect is None):
                raise _ReferError
            toleration = Toleration(t.key, operator, t.value, effect, seconds)
            if len(_TOLERATIONS) < 1024:
                _TOLERATIONS[ident] = toleration
        out.append(toleration)
    return tuple(out)


def _gates(gates: Any) -> tuple[str, ...]:
    names = tuple(g.name for g in gates)
    if not all(names):
        raise _ReferError
    return names


def _spread_constraints(raw: Any) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    for c in raw:
        if not c.topologyKey:
            raise _ReferError
        out.append(
            TopologySpreadConstraint(
                max_skew=c.maxSkew if c.HasField("maxSkew") else 1,
                topology_key=c.topologyKey,
                when_unsatisfiable=c.whenUnsatisfiable or "DoNotSchedule",
                label_selector=parse_label_selector(to_json(c.labelSelector)) if c.HasField("labelSelector") else None,
                min_domains=c.minDomains if c.HasField("minDomains") else None,
                node_affinity_policy=c.nodeAffinityPolicy or "Honor",
                node_taints_policy=c.nodeTaintsPolicy or "Ignore",
                match_label_keys=tuple(c.matchLabelKeys),
            )
        )
    return tuple(out)


def _volumes(volumes: Any, pod_name: str) -> tuple[tuple[Any, ...], bool]:
    """The volumes :func:`~apis.core.volume_parse.parse_pod_volumes` keeps, and whether one is local
    storage (:func:`~apis.core.volume_parse.has_local_storage`). Only the kept ones are turned into JSON
    (every pod has a projected service-account token volume, which is not kept)."""
    if not volumes:
        return (), False
    kept = []
    local_storage = False
    for v in volumes:
        sources = {f.name for f, _ in v.volumeSource.ListFields()}
        if sources & KEPT_SOURCES:
            kept.append(v)
        if sources & LOCAL_STORAGE_SOURCES:
            local_storage = True
    return (parse_pod_volumes([to_json(v) for v in kept], pod_name) if kept else ()), local_storage


# --- nodes -----------------------------------------------------------------------------------------


def _node(message: Any) -> Node:
    meta = object_meta(message.metadata, "")
    spec = message.spec
    status = message.status
    taints = tuple(_taint(t) for t in spec.taints) if spec.taints else ()
    capacity = _amounts(_nanos(status.capacity))
    allocatable = _amounts(_nanos(status.allocatable)) if status.allocatable else capacity
    images = _node_images(status.images) if status.images else ()
    conditions: FrozenDict[str, str] = EMPTY
    if status.conditions:
        pairs = {c.type: c.status for c in status.conditions}
        if "" in pairs:
            raise _ReferError
        conditions = FrozenDict(pairs)
    return Node(
        meta=meta,
        allocatable=allocatable,
        capacity=capacity,
        taints=taints,
        unschedulable=spec.unschedulable,
        images=images,
        conditions=conditions,
    )


def _node_images(raw: Any) -> tuple[ContainerImage, ...]:
    """``status.images``, each entry shared with other nodes that report the same (interned)."""
    out = []
    for i in raw:
        key = (tuple(i.names), i.sizeBytes)
        image = _NODE_IMAGES.get(key)
        if image is None:
            image = ContainerImage(names=key[0], size_bytes=key[1])
            if len(_NODE_IMAGES) < INTERN_LIMIT:
                _NODE_IMAGES[key] = image
        out.append(image)
    return tuple(out)


def _taint(t: Any) -> Taint:
    effect = _TAINT_EFFECTS.get(t.effect)
    if not t.key or effect is None:
        raise _ReferError
    return Taint(key=t.key, effect=effect, value=t.value)
