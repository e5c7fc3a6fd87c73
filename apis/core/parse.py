"""Raw Kubernetes JSON (``kubectl get -o json``, watch events, users' YAML) -> the core types.

This is the hot path of every watch event, so it is plain dict access and integer arithmetic: no
pydantic, no kubernetes client models. Types are checked explicitly, and every failure is a
:class:`~apis.core.errors.ParseError` naming the object and the exact field path. Missing optional
fields take Kubernetes' defaults.

Objects from the API server are already defaulted; files users write may not be, so the defaulting the
scheduler depends on is applied here too (it is idempotent):

- a container limit without a request makes the request equal to the limit;
- pod-level limits without pod-level requests default the requests (``defaultPodRequests``);
- empty toleration operators are ``Equal``; empty host IPs ``0.0.0.0``; empty protocols ``TCP``;
- a pod without a namespace is in ``default``.

The fragment parsers (:func:`parse_label_selector`, :func:`parse_affinity`, ...) take the fragment
itself and raise ``ParseError`` with an empty kind and a field path relative to the fragment; place it
with ``err.under("spec.template.spec.affinity").for_object(kind, name)``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

from apis.core.claim_parse import check_container_claims, pod_resource_claims, resource_claim_statuses
from apis.core.errors import ParseError, QuantityError, join_path, quote
from apis.core.frozendict import EMPTY, FrozenDict
from apis.core.jsonfields import (
    Json,
    JsonList,
    as_list,
    as_map,
    check_item,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_optional_int,
    get_required_str,
    get_str,
    get_str_list,
    get_str_map,
    invalid,
    is_map,
    key_path,
    type_name,
)
from apis.core.podresources import aggregate_pod_resources, pod_qos_class
from apis.core.quantity import MAX_AMOUNT, nanos_to_amount, quantity_nanos
from apis.core.quantity import NANOS_PER_MILLI as _NANOS_PER_MILLI
from apis.core.quantity import NANOS_PER_UNIT as _NANOS_PER_UNIT
from apis.core.resize import apply_resize_status
from apis.core.selector_parse import (
    parse_affinity_fragment,
    parse_label_selector_fragment,
    parse_node_selector_term_fragment,
)
from apis.core.types import (
    CPU,
    MEMORY,
    Affinity,
    ContainerImage,
    HostPort,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    ObjectMeta,
    OwnerReference,
    Pod,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
)
from apis.core.volume_parse import claim_names, has_local_storage, parse_pod_volumes

T = TypeVar("T")
R = TypeVar("R")

_TAINT_EFFECTS = {e.value: e for e in TaintEffect}
_TOLERATION_OPERATORS = frozenset({"Equal", "Exists", "Lt", "Gt"})


# --- public entry points ---------------------------------------------------------------------------


def parse_pod(obj: Json, *, require_containers: bool = True) -> Pod:
    """A :class:`~apis.core.types.Pod` from its raw JSON. Raises ``ParseError`` for malformed input.

    What the API server's validation would refuse is refused here too, since files and CRD templates
    bypass it: a negative or beyond-int64 request, limit or overhead, and a pod without containers
    (``require_containers=False`` allows that for pods built from templates, such as reserve pods)."""
    try:
        return _pod(obj, require_containers)
    except ParseError as err:
        raise err.for_object("Pod", _display_name(obj, "default")) from None


def parse_node(obj: Json) -> Node:
    """A :class:`~apis.core.types.Node` from its raw JSON. Raises ``ParseError`` for malformed input.

    ``allocatable`` falls back to ``capacity`` when ``status.allocatable`` is absent.
    """
    try:
        return _node(obj)
    except ParseError as err:
        raise err.for_object("Node", _display_name(obj, "")) from None


def parse_object_meta(obj: Json, kind: str, *, default_namespace: str = "") -> ObjectMeta:
    """The ``metadata`` of a whole object of kind ``kind``; errors name the object and ``metadata.*``.

    ``default_namespace`` fills a missing namespace (``"default"`` for namespaced kinds read from files).
    """
    try:
        return _object_meta(obj, default_namespace)
    except ParseError as err:
        raise err.for_object(kind, _display_name(obj, default_namespace)) from None


def parse_label_selector(raw: Any) -> LabelSelector | None:
    """A ``metav1.LabelSelector``; ``None`` stays ``None`` (which selects nothing at use sites)."""
    if raw is None:
        return None
    return parse_label_selector_fragment(as_map(raw, ""))


def parse_node_selector_term(raw: Any) -> NodeSelectorTerm:
    """One ``NodeSelectorTerm`` (``matchExpressions`` / ``matchFields``)."""
    return parse_node_selector_term_fragment(as_map(raw, ""))


def parse_affinity(raw: Any) -> Affinity | None:
    """A pod's ``spec.affinity`` (``None`` -> ``None``)."""
    if raw is None:
        return None
    return parse_affinity_fragment(as_map(raw, ""))


def parse_tolerations(raw: Any) -> tuple[Toleration, ...]:
    """A pod's ``spec.tolerations`` (``None`` -> empty)."""
    return _tolerations(as_list(raw, ""))


def parse_taints(raw: Any) -> tuple[Taint, ...]:
    """A node's ``spec.taints`` (``None`` -> empty)."""
    return _taints(as_list(raw, ""))


def parse_resource_list(raw: Any) -> FrozenDict[str, int]:
    """A ``ResourceList`` (``{"cpu": "500m"}``) as scheduler amounts: millicores for cpu, else units."""
    return _amounts(_resource_nanos(as_map(raw, ""), ""))


def parse_timestamp(raw: Any) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; ``None`` stays ``None``. No offset means UTC."""
    if raw is None:
        return None
    if type(raw) is not str:
        raise invalid("", f"expected an RFC 3339 timestamp string, got {type_name(raw)}")
    return _timestamp_seconds(raw)


@lru_cache(maxsize=1024)
def _timestamp_seconds(text: str) -> float:
    # Pods created together share timestamps, and parsing one costs about a microsecond.
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise invalid("", f"invalid RFC 3339 timestamp {quote(text)}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


# --- metadata --------------------------------------------------------------------------------------


def _display_name(obj: Any, default_namespace: str) -> str:
    """``namespace/name`` for messages, tolerant of whatever is malformed."""
    meta = obj.get("metadata") if is_map(obj) else None
    if not is_map(meta):
        return "<unnamed>"
    assert meta is not None
    name = meta.get("name")
    name = name if isinstance(name, str) and name else "<unnamed>"
    namespace = meta.get("namespace")
    namespace = namespace if isinstance(namespace, str) and namespace else default_namespace
    return f"{namespace}/{name}" if namespace else name


def _object_meta(obj: Json, default_namespace: str) -> ObjectMeta:
    if not is_map(obj):
        raise invalid("", f"expected an object, got {type_name(obj)}")
    meta = get_map(obj, "metadata")
    try:
        owner_refs = meta.get("ownerReferences")
        created = meta.get("creationTimestamp")
        deleted = meta.get("deletionTimestamp")
        return ObjectMeta(
            name=get_required_str(meta, "name"),
            namespace=get_str(meta, "namespace") or default_namespace,
            uid=get_str(meta, "uid"),
            resource_version=get_str(meta, "resourceVersion"),
            generation=get_int(meta, "generation"),
            labels=get_str_map(meta, "labels"),
            annotations=get_str_map(meta, "annotations"),
            owner_references=_owner_refs(get_list(meta, "ownerReferences")) if owner_refs else (),
            creation_timestamp=None if created is None else _under(parse_timestamp, created, "creationTimestamp"),
            deletion_timestamp=None if deleted is None else _under(parse_timestamp, deleted, "deletionTimestamp"),
        )
    except ParseError as err:
        raise err.under("metadata") from None


def _owner_refs(raw: JsonList) -> tuple[OwnerReference, ...]:
    out = []
    for i, item in enumerate(raw):
        ref = check_item(item, "ownerReferences", i)
        try:
            out.append(
                OwnerReference(
                    api_version=get_str(ref, "apiVersion"),
                    kind=get_str(ref, "kind"),
                    name=get_str(ref, "name"),
                    uid=get_str(ref, "uid"),
                    controller=get_bool(ref, "controller"),
                )
            )
        except ParseError as err:
            raise err.under(f"ownerReferences[{i}]") from None
    return tuple(out)


def _under(parse: Callable[[T], R], raw: T, path: str) -> R:
    """``parse(raw)``, with any error's field path placed under ``path``."""
    try:
        return parse(raw)
    except ParseError as err:
        raise err.under(path) from None


# --- resources -------------------------------------------------------------------------------------


def _resource_nanos(obj: Json, key: str) -> dict[str, int]:
    """``obj[key]`` (or ``obj`` itself when ``key`` is empty) as ``{resource: nano-units}``, a fresh dict."""
    raw = obj.get(key) if key else obj
    if raw is None:
        return {}
    if not is_map(raw):
        raise invalid(key, f"expected an object, got {type_name(raw)}")
    out = {}
    for name, quantity in raw.items():
        if type(name) is not str:
            raise invalid(key, f"expected resource names, got {type_name(name)} {quote(name)}")
        try:
            nanos = quantity_nanos(quantity)
        except QuantityError as err:
            raise invalid(join_path(key, key_path(name)), str(err)) from None
        if nanos < 0 or (nanos > _MAX_CPU_NANOS and name == CPU):
            raise invalid(join_path(key, key_path(name)), _out_of_range(name, quantity, nanos))
        out[name] = nanos
    return out


_MAX_CPU_NANOS = MAX_AMOUNT * _NANOS_PER_MILLI


def _out_of_range(name: str, quantity: object, nanos: int) -> str:
    shown = quote(quantity if isinstance(quantity, str) else repr(quantity))
    if nanos < 0:
        return f"{shown} must be greater than or equal to 0"
    return f"{shown} is too large: {name} must fit an int64 in millicores"


def _amounts(nanos: dict[str, int]) -> FrozenDict[str, int]:
    if not nanos:
        return EMPTY
    # Inlined nanos_to_amount (ceiling division; negative amounts round away from zero by flooring).
    return FrozenDict(
        {
            name: (-(-n // _NANOS_PER_MILLI) if n >= 0 else n // _NANOS_PER_MILLI)
            if name == CPU
            else (-(-n // _NANOS_PER_UNIT) if n >= 0 else n // _NANOS_PER_UNIT)
            for name, n in nanos.items()
        }
    )


DEPRECATED_DEVICE_RESOURCES = {
    "kubernetes.io/gpu": "koordinator.sh/gpu",
    "kubernetes.io/gpu-core": "koordinator.sh/gpu-core",
    "kubernetes.io/gpu-memory": "koordinator.sh/gpu-memory",
    "kubernetes.io/gpu-memory-ratio": "koordinator.sh/gpu-memory-ratio",
}
"""Deprecated device resource names, read as their current names (Koordinator's pod transformer,
``apis/extension/deprecated.go``)."""


def _renamed(amounts: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, n in amounts.items():
        new = DEPRECATED_DEVICE_RESOURCES.get(name, name)
        out[new] = out.get(new, 0) + n
    return out


class _Container:
    """What the pod needs of one container; requests are defaulted from limits, in nano-units."""

    __slots__ = ("has_claims", "host_ports", "image", "limits", "name", "requests", "restartable")

    def __init__(self, c: Json) -> None:
        resources = c.get("resources")
        requests: dict[str, int] = {}
        limits: dict[str, int] = {}
        self.has_claims = is_map(resources) and bool(resources.get("claims"))  # type: ignore[union-attr]
        if resources:
            resources = as_map(resources, "resources")
            try:
                requests = _resource_nanos(resources, "requests")
                limits = _resource_nanos(resources, "limits")
            except ParseError as err:
                raise err.under("resources") from None
            if DEPRECATED_DEVICE_RESOURCES.keys() & (requests.keys() | limits.keys()):
                requests, limits = _renamed(requests), _renamed(limits)
            for name, n in limits.items():
                if name not in requests:  # API-server defaulting: request = limit
                    requests[name] = n
        self.requests = requests
        self.limits = limits
        self.name = get_str(c, "name")
        self.image = get_str(c, "image")
        self.restartable = c.get("restartPolicy") == "Always"
        ports = c.get("ports")
        self.host_ports = _host_ports(get_list(c, "ports")) if ports else ()


def _host_ports(ports: JsonList) -> tuple[HostPort, ...]:
    out = []
    for i, item in enumerate(ports):
        port = check_item(item, "ports", i)
        try:
            host_port = get_int(port, "hostPort")
            if host_port > 0:
                protocol = get_str(port, "protocol") or "TCP"
                out.append(HostPort(port=host_port, protocol=protocol, host_ip=get_str(port, "hostIP") or "0.0.0.0"))
        except ParseError as err:
            raise err.under(f"ports[{i}]") from None
    return tuple(out)


def _containers(spec: Json, key: str) -> list[_Container]:
    out = []
    for i, item in enumerate(get_list(spec, key)):
        c = check_item(item, key, i)
        try:
            out.append(_Container(c))
        except ParseError as err:
            raise err.under(f"{key}[{i}]") from None
    return out


# --- pods ------------------------------------------------------------------------------------------


def _pod(obj: Json, require_containers: bool = True) -> Pod:
    meta = _object_meta(obj, "default")
    spec = get_map(obj, "spec")
    status = get_map(obj, "status")
    try:
        phase = get_str(status, "phase") or "Pending"
        nominated = get_str(status, "nominatedNodeName")
        conditions, condition_times = (
            _pod_conditions(get_list(status, "conditions")) if status.get("conditions") else (EMPTY, EMPTY_TIMES)
        )
        qos_class = get_str(status, "qosClass")
        restarts = _restart_count(status, "containerStatuses") if status.get("containerStatuses") else 0
        init_restarts = _restart_count(status, "initContainerStatuses") if status.get("initContainerStatuses") else 0
        claim_statuses = (
            resource_claim_statuses(get_list(status, "resourceClaimStatuses"))
            if status.get("resourceClaimStatuses")
            else EMPTY
        )
    except ParseError as err:
        raise err.under("status") from None
    try:
        containers = _containers(spec, "containers")
        init_containers = _containers(spec, "initContainers") if spec.get("initContainers") else []
        if status.get("containerStatuses") or status.get("initContainerStatuses"):
            sidecars = [c for c in init_containers if c.restartable]
            apply_resize_status(status, [*containers, *sidecars], _resource_nanos)
        pod_requests: dict[str, int] = {}
        pod_limits: dict[str, int] = {}
        pod_resources = spec.get("resources")
        if pod_resources is not None:
            pod_resources = as_map(pod_resources, "resources")
            try:
                pod_requests = _resource_nanos(pod_resources, "requests")
                pod_limits = _resource_nanos(pod_resources, "limits")
            except ParseError as err:
                raise err.under("resources") from None
        totals = aggregate_pod_resources(
            containers,
            init_containers,
            pod_requests=pod_requests,
            pod_limits=pod_limits,
            overhead=_resource_nanos(spec, "overhead"),
        )
        if not qos_class:
            qos_class = pod_qos_class(
                containers,
                init_containers,
                pod_level=None if pod_resources is None else (totals.pod_requests, totals.pod_limits),
            )
        host_ports: tuple[HostPort, ...] = ()
        for c in containers:
            if c.host_ports:
                host_ports += c.host_ports
        for c in init_containers:
            if c.restartable and c.host_ports:
                host_ports += c.host_ports
        images = tuple(c.image for c in init_containers) + tuple(c.image for c in containers)
        resource_claims = pod_resource_claims(get_list(spec, "resourceClaims")) if spec.get("resourceClaims") else ()
        if resource_claims or any(c.has_claims for c in (*containers, *init_containers)):
            _check_container_claims(spec, frozenset(c.name for c in resource_claims))
        volumes = parse_pod_volumes(get_list(spec, "volumes"), meta.name) if spec.get("volumes") else ()
        selector = spec.get("nodeSelector")
        affinity = spec.get("affinity")
        pod = Pod(
            meta=meta,
            scheduler_name=get_str(spec, "schedulerName") or "default-scheduler",
            node_name=get_str(spec, "nodeName"),
            priority=get_int(spec, "priority"),
            priority_class_name=get_str(spec, "priorityClassName"),
            preemption_policy=get_str(spec, "preemptionPolicy") or "PreemptLowerPriority",
            requests=_amounts(totals.requests),
            limits=_amounts(totals.limits),
            non_zero_cpu=nanos_to_amount(CPU, totals.non_zero_cpu),
            non_zero_memory=nanos_to_amount(MEMORY, totals.non_zero_memory),
            node_selector=None if selector is None else get_str_map(spec, "nodeSelector"),
            affinity=None if affinity is None else _under(parse_affinity, affinity, "affinity"),
            tolerations=_under(_tolerations, get_list(spec, "tolerations"), "tolerations")
            if spec.get("tolerations")
            else (),
            host_ports=host_ports,
            scheduling_gates=_scheduling_gates(get_list(spec, "schedulingGates"))
            if spec.get("schedulingGates")
            else (),
            topology_spread_constraints=_spread_constraints(get_list(spec, "topologySpreadConstraints"))
            if spec.get("topologySpreadConstraints")
            else (),
            pvc_names=claim_names(volumes),
            images=images,
            volumes=volumes,
            local_storage=has_local_storage(get_list(spec, "volumes")) if spec.get("volumes") else False,
            phase=phase,
            qos_class=qos_class,
            nominated_node_name=nominated,
            conditions=conditions,
            condition_times=condition_times,
            resource_claims=resource_claims,
            resource_claim_statuses=claim_statuses,
            restart_count=restarts,
            init_restart_count=init_restarts,
        )
        if not containers and require_containers:
            raise invalid("containers", "required: a pod needs at least one container")
        return pod
    except ParseError as err:
        raise err.under("spec") from None


def _restart_count(status: Json, key: str) -> int:
    """The sum of ``status.<key>[].restartCount``."""
    total = 0
    for i, item in enumerate(get_list(status, key)):
        entry = check_item(item, key, i)
        count = entry.get("restartCount", 0)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise invalid(f"{key}[{i}].restartCount", f"must be a non-negative integer, got {count!r}")
        total += count
    return total


def _check_container_claims(spec: Json, claim_names: frozenset[str]) -> None:
    for key in ("initContainers", "containers"):
        for i, item in enumerate(get_list(spec, key)):
            check_container_claims(check_item(item, key, i), claim_names, f"{key}[{i}]")


def _scheduling_gates(gates: JsonList) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(gates):
        gate = check_item(item, "schedulingGates", i)
        out.append(_gate_name(gate, i))
    return tuple(out)


def _gate_name(gate: Json, index: int) -> str:
    try:
        return get_required_str(gate, "name")
    except ParseError as err:
        raise err.under(f"schedulingGates[{index}]") from None


def _conditions(conditions: JsonList) -> FrozenDict[str, str]:
    out = {}
    for i, item in enumerate(conditions):
        condition = check_item(item, "conditions", i)
        try:
            out[get_required_str(condition, "type")] = get_str(condition, "status")
        except ParseError as err:
            raise err.under(f"conditions[{i}]") from None
    return FrozenDict(out)


EMPTY_TIMES: FrozenDict[str, float] = FrozenDict()


def _pod_conditions(conditions: JsonList) -> tuple[FrozenDict[str, str], FrozenDict[str, float]]:
    """Condition type -> status, and type -> ``lastTransitionTime`` (seconds) where it is set."""
    out: dict[str, str] = {}
    times: dict[str, float] = {}
    for i, item in enumerate(conditions):
        condition = check_item(item, "conditions", i)
        try:
            kind = get_required_str(condition, "type")
            out[kind] = get_str(condition, "status")
            changed = condition.get("lastTransitionTime")
            if changed is not None:
                at = _under(parse_timestamp, changed, "lastTransitionTime")
                if at is not None:
                    times[kind] = at
        except ParseError as err:
            raise err.under(f"conditions[{i}]") from None
    return FrozenDict(out), (FrozenDict(times) if times else EMPTY_TIMES)


def _spread_constraints(raw: JsonList) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    for i, item in enumerate(raw):
        c = check_item(item, "topologySpreadConstraints", i)
        try:
            selector = c.get("labelSelector")
            out.append(
                TopologySpreadConstraint(
                    max_skew=get_int(c, "maxSkew", 1),
                    topology_key=get_required_str(c, "topologyKey"),
                    when_unsatisfiable=get_str(c, "whenUnsatisfiable") or "DoNotSchedule",
                    label_selector=None
                    if selector is None
                    else _under(parse_label_selector, selector, "labelSelector"),
                    min_domains=get_optional_int(c, "minDomains"),
                    node_affinity_policy=get_str(c, "nodeAffinityPolicy") or "Honor",
                    node_taints_policy=get_str(c, "nodeTaintsPolicy") or "Ignore",
                    match_label_keys=get_str_list(c, "matchLabelKeys"),
                )
            )
        except ParseError as err:
            raise err.under(f"topologySpreadConstraints[{i}]") from None
    return tuple(out)


# --- tolerations and taints ------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _toleration(key: str, operator: str, value: str, effect: TaintEffect | None, seconds: int | None) -> Toleration:
    # Interned: nearly every pod carries the same two not-ready/unreachable tolerations.
    return Toleration(key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds)


def _effect(obj: Json, *, required: bool) -> TaintEffect | None:
    name = get_str(obj, "effect")
    if not name:
        if required:
            raise invalid("effect", "required")
        return None
    effect = _TAINT_EFFECTS.get(name)
    if effect is None:
        raise invalid("effect", f"unknown taint effect {quote(name)}")
    return effect


def _tolerations(raw: JsonList) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(raw):
        t = check_item(item, "", i)
        try:
            operator = get_str(t, "operator") or "Equal"
            if operator not in _TOLERATION_OPERATORS:
                raise invalid("operator", f"unknown toleration operator {quote(operator)}")
            out.append(
                _toleration(
                    get_str(t, "key"),
                    operator,
                    get_str(t, "value"),
                    _effect(t, required=False),
                    get_optional_int(t, "tolerationSeconds"),
                )
            )
        except ParseError as err:
            raise err.under(f"[{i}]") from None
    return tuple(out)


def _taints(raw: JsonList) -> tuple[Taint, ...]:
    out = []
    for i, item in enumerate(raw):
        t = check_item(item, "", i)
        try:
            key = get_required_str(t, "key")
            effect = _effect(t, required=True)
            assert effect is not None
            out.append(Taint(key=key, effect=effect, value=get_str(t, "value")))
        except ParseError as err:
            raise err.under(f"[{i}]") from None
    return tuple(out)


# --- nodes -----------------------------------------------------------------------------------------


def _node(obj: Json) -> Node:
    meta = _object_meta(obj, "")
    spec = get_map(obj, "spec")
    status = get_map(obj, "status")
    try:
        taints = _under(_taints, get_list(spec, "taints"), "taints") if spec.get("taints") else ()
        unschedulable = get_bool(spec, "unschedulable")
    except ParseError as err:
        raise err.under("spec") from None
    try:
        capacity = _amounts(_resource_nanos(status, "capacity"))
        allocatable = capacity
        if status.get("allocatable") is not None:
            allocatable = _amounts(_resource_nanos(status, "allocatable"))
        images = _node_images(get_list(status, "images")) if status.get("images") else ()
        conditions = _conditions(get_list(status, "conditions")) if status.get("conditions") else EMPTY
    except ParseError as err:
        raise err.under("status") from None
    return Node(
        meta=meta,
        allocatable=allocatable,
        capacity=capacity,
        taints=taints,
        unschedulable=unschedulable,
        images=images,
        conditions=conditions,
    )


def _node_images(raw: JsonList) -> tuple[ContainerImage, ...]:
    out = []
    for i, item in enumerate(raw):
        image = check_item(item, "images", i)
        try:
            out.append(ContainerImage(names=get_str_list(image, "names"), size_bytes=get_int(image, "sizeBytes")))
        except ParseError as err:
            raise err.under(f"images[{i}]") from None
    return tuple(out)
