"""Raw ``resource.k8s.io/v1`` JSON -> :mod:`apis.resource.types`, with the API server's validation
(``pkg/apis/resource/validation/validation.go``) for what the scheduler relies on.

Every failure is a :class:`~apis.core.errors.ParseError` naming the object and the exact field path
(``ResourceClaim default/gpu: spec.devices.requests[0].exactly.count: must be greater than zero``), so a
malformed object is reported and skipped. CEL expressions are kept as text here: whether they compile is
the DynamicResources plugin's question, asked with the claim's name and field in the answer.

Duplicate device names are *not* refused here: across the slices of a pool only the allocator sees them,
and it reports the pool as invalid to the pods that would use it (as upstream does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from apis.core.claim_parse import is_dns_label, is_dns_subdomain
from apis.core.errors import ParseError, QuantityError
from apis.core.frozendict import EMPTY, FrozenDict
from apis.core.jsonfields import (
    Json,
    JsonList,
    check_item,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_optional_int,
    get_str,
    get_str_list,
    get_str_map,
    invalid,
    is_map,
    key_path,
    type_name,
)
from apis.core.parse import parse_node_selector_term, parse_object_meta, parse_timestamp
from apis.core.quantity import quantity_nanos
from apis.core.types import NodeSelectorTerm
from apis.resource.semver import parse_version
from apis.resource.types import (
    CEL_SELECTOR_MAX_LENGTH,
    FIRST_AVAILABLE_MAX_SIZE,
    AllocationMode,
    AllocationResult,
    AttributeKind,
    ClaimSpec,
    ConsumerReference,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceClass,
    DeviceConfig,
    DeviceConstraint,
    DeviceRequest,
    DeviceResult,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    Quantity,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

T = TypeVar("T")

_ATTRIBUTE_FIELDS = (
    ("int", AttributeKind.INT),
    ("bool", AttributeKind.BOOL),
    ("string", AttributeKind.STRING),
    ("version", AttributeKind.VERSION),
)
_TOLERATION_OPERATORS = frozenset({"Equal", "Exists"})


def parse_device_class(obj: Json) -> DeviceClass:
    meta = parse_object_meta(obj, "DeviceClass")
    try:
        spec = get_map(obj, "spec")
        try:
            return DeviceClass(
                meta=meta,
                selectors=_selectors(get_list(spec, "selectors")),
                config=_configs(get_list(spec, "config")),
                extended_resource_name=get_str(spec, "extendedResourceName"),
            )
        except ParseError as err:
            raise err.under("spec") from None
    except ParseError as err:
        raise err.for_object("DeviceClass", meta.name) from None


def parse_resource_slice(obj: Json) -> ResourceSlice:
    meta = parse_object_meta(obj, "ResourceSlice")
    try:
        try:
            return _slice(meta, get_map(obj, "spec"))
        except ParseError as err:
            raise err.under("spec") from None
    except ParseError as err:
        raise err.for_object("ResourceSlice", meta.name) from None


def parse_resource_claim(obj: Json) -> ResourceClaim:
    meta = parse_object_meta(obj, "ResourceClaim", default_namespace="default")
    try:
        raw_meta = get_map(obj, "metadata")
        finalizers = get_str_list(raw_meta, "finalizers") if raw_meta.get("finalizers") else ()
        spec = _under(_claim_spec, get_map(obj, "spec"), "spec")
        status = get_map(obj, "status")
        try:
            allocation = status.get("allocation")
            return ResourceClaim(
                meta=meta,
                spec=spec,
                allocation=None if allocation is None else _under(_allocation, allocation, "allocation"),
                reserved_for=_reserved_for(get_list(status, "reservedFor")) if status.get("reservedFor") else (),
                finalizers=finalizers,
            )
        except ParseError as err:
            raise err.under("status") from None
    except ParseError as err:
        raise err.for_object("ResourceClaim", f"{meta.namespace}/{meta.name}") from None


def parse_resource_claim_template(obj: Json) -> ResourceClaimTemplate:
    meta = parse_object_meta(obj, "ResourceClaimTemplate", default_namespace="default")
    try:
        outer = get_map(obj, "spec")
        try:
            claim_meta = get_map(outer, "metadata")
            raw_spec = get_map(outer, "spec")
            return ResourceClaimTemplate(
                meta=meta,
                spec=_under(_claim_spec, raw_spec, "spec"),
                claim_labels=_under(lambda m: get_str_map(m, "labels"), claim_meta, "metadata"),
                claim_annotations=_under(lambda m: get_str_map(m, "annotations"), claim_meta, "metadata"),
                spec_json=json.dumps(raw_spec, sort_keys=True, separators=(",", ":")),
            )
        except ParseError as err:
            raise err.under("spec") from None
    except ParseError as err:
        raise err.for_object("ResourceClaimTemplate", f"{meta.namespace}/{meta.name}") from None


# --- shared fragments ----------------------------------------------------------------------------


def _under(parse: Callable[[Any], T], raw: Any, path: str) -> T:
    try:
        return parse(raw)
    except ParseError as err:
        raise err.under(path) from None


def _items(raw: JsonList, field: str) -> list[tuple[str, Json]]:
    return [(f"{field}[{i}]", check_item(item, field, i)) for i, item in enumerate(raw)]


def _selectors(raw: JsonList, field: str = "selectors") -> tuple[str, ...]:
    out = []
    for where, selector in _items(raw, field):
        cel = selector.get("cel")
        if not is_map(cel):
            raise invalid(f"{where}.cel", "required (the only selector type)")
        expression = get_str(cel, "expression") if cel is not None else ""
        if not expression:
            raise invalid(f"{where}.cel.expression", "required")
        if len(expression) > CEL_SELECTOR_MAX_LENGTH:
            raise invalid(f"{where}.cel.expression", f"must have at most {CEL_SELECTOR_MAX_LENGTH} bytes")
        out.append(expression)
    return tuple(out)


def _configs(raw: JsonList, field: str = "config", *, with_source: bool = False) -> tuple[DeviceConfig, ...]:
    out = []
    for where, config in _items(raw, field):
        opaque = config.get("opaque")
        if not is_map(opaque):
            raise invalid(f"{where}.opaque", "required (the only configuration type)")
        assert opaque is not None
        if not get_str(opaque, "driver"):
            raise invalid(f"{where}.opaque.driver", "required")
        try:
            requests = get_str_list(config, "requests")
        except ParseError as err:
            raise err.under(where) from None
        out.append(
            DeviceConfig(
                requests=requests,
                opaque_json=json.dumps(opaque, sort_keys=True, separators=(",", ":")),
                source=get_str(config, "source") if with_source else "",
            )
        )
    return tuple(out)


def _quantity(raw: Any, field: str) -> Quantity:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise invalid(field, f"expected a quantity, got {type_name(raw)}")
    try:
        return Quantity(quantity_nanos(raw), str(raw))
    except QuantityError as err:
        raise invalid(field, str(err)) from None


def _node_selector(raw: Any, field: str) -> tuple[NodeSelectorTerm, ...] | None:
    if raw is None:
        return None
    if not is_map(raw):
        raise invalid(field, f"expected an object, got {type_name(raw)}")
    terms = []
    for where, term in _items(get_list(raw, "nodeSelectorTerms"), f"{field}.nodeSelectorTerms"):
        terms.append(_under(parse_node_selector_term, term, where))
    return tuple(terms)


def _tolerations(raw: JsonList, field: str) -> tuple[DeviceToleration, ...]:
    out = []
    for where, t in _items(raw, field):
        operator = get_str(t, "operator") or "Equal"
        if operator not in _TOLERATION_OPERATORS:
            raise invalid(f"{where}.operator", f"unknown toleration operator {operator!r}")
        out.append(
            DeviceToleration(
                key=get_str(t, "key"),
                operator=operator,
                value=get_str(t, "value"),
                effect=get_str(t, "effect"),
                toleration_seconds=get_optional_int(t, "tolerationSeconds"),
            )
        )
    return tuple(out)


# --- ResourceSlice -------------------------------------------------------------------------------


def _slice(meta: Any, spec: Json) -> ResourceSlice:
    driver = get_str(spec, "driver")
    if not driver:
        raise invalid("driver", "required")
    if not is_dns_subdomain(driver):
        raise invalid("driver", f"{driver!r} is not a DNS subdomain")
    pool = get_map(spec, "pool")
    pool_name = get_str(pool, "name")
    if not pool_name:
        raise invalid("pool.name", "required")
    count = get_int(pool, "resourceSliceCount")
    if count <= 0:
        raise invalid("pool.resourceSliceCount", "must be greater than zero")
    generation = get_int(pool, "generation")
    node_name = get_str(spec, "nodeName")
    node_selector = _node_selector(spec.get("nodeSelector"), "nodeSelector")
    all_nodes = get_bool(spec, "allNodes")
    per_device = get_bool(spec, "perDeviceNodeSelection")
    shared = _counter_sets(get_list(spec, "sharedCounters"))
    chosen = sum((bool(node_name), node_selector is not None, all_nodes, per_device))
    if chosen > 1 or (chosen == 0 and not shared):
        raise invalid("", "exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection must be set")
    if node_selector is not None and len(node_selector) != 1:
        raise invalid("nodeSelector.nodeSelectorTerms", "must have exactly one term")
    devices = tuple(_device(d, where, per_device) for where, d in _items(get_list(spec, "devices"), "devices"))
    return ResourceSlice(
        meta=meta,
        driver=driver,
        pool=pool_name,
        pool_generation=generation,
        resource_slice_count=count,
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        per_device_node_selection=per_device,
        devices=devices,
        shared_counters=shared,
    )


def _counters(raw: Json, field: str) -> FrozenDict[str, Quantity]:
    out = {}
    for name, counter in raw.items():
        where = f"{field}.{key_path(name)}"
        if not is_map(counter):
            raise invalid(where, f"expected an object, got {type_name(counter)}")
        out[name] = _quantity(counter.get("value"), f"{where}.value")
    return FrozenDict(out)


def _counter_sets(raw: JsonList) -> tuple[CounterSet, ...]:
    out = []
    for where, counter_set in _items(raw, "sharedCounters"):
        name = get_str(counter_set, "name")
        if not name:
            raise invalid(f"{where}.name", "required")
        out.append(CounterSet(name, _counters(get_map(counter_set, "counters"), f"{where}.counters")))
    return tuple(out)


def _device(raw: Json, where: str, per_device: bool) -> Device:
    name = get_str(raw, "name")
    if not name:
        raise invalid(f"{where}.name", "required")
    if not is_dns_label(name):
        raise invalid(f"{where}.name", f"{name!r} is not a DNS label")
    try:
        attributes = _attributes(get_map(raw, "attributes"))
        capacity = {cap_name: _capacity(cap, key_path(cap_name)) for cap_name, cap in get_map(raw, "capacity").items()}
        consumes = []
        for c_where, consumption in _items(get_list(raw, "consumesCounters"), "consumesCounters"):
            counter_set = get_str(consumption, "counterSet")
            if not counter_set:
                raise invalid(f"{c_where}.counterSet", "required")
            counters = _counters(get_map(consumption, "counters"), f"{c_where}.counters")
            consumes.append(CounterConsumption(counter_set, counters))
        node_name = get_str(raw, "nodeName")
        node_selector = _node_selector(raw.get("nodeSelector"), "nodeSelector")
        all_nodes = get_bool(raw, "allNodes")
        if per_device and sum((bool(node_name), node_selector is not None, all_nodes)) != 1:
            raise invalid(
                "", "with perDeviceNodeSelection exactly one of nodeName, nodeSelector or allNodes is required"
            )
        taints = []
        for t_where, taint in _items(get_list(raw, "taints"), "taints"):
            key = get_str(taint, "key")
            if not key:
                raise invalid(f"{t_where}.key", "required")
            taints.append(DeviceTaint(key=key, effect=get_str(taint, "effect"), value=get_str(taint, "value")))
        return Device(
            name=name,
            attributes=attributes,
            capacity=FrozenDict(capacity) if capacity else EMPTY,
            consumes_counters=tuple(consumes),
            node_name=node_name,
            node_selector=node_selector,
            all_nodes=all_nodes,
            taints=tuple(taints),
            binding_conditions=get_str_list(raw, "bindingConditions"),
            binding_failure_conditions=get_str_list(raw, "bindingFailureConditions"),
            allow_multiple_allocations=get_bool(raw, "allowMultipleAllocations"),
        )
    except ParseError as err:
        raise err.under(where) from None


def _attributes(raw: Json) -> FrozenDict[str, DeviceAttribute]:
    if not raw:
        return EMPTY
    out = {}
    for name, attr in raw.items():
        where = f"attributes.{key_path(name)}"
        if not is_map(attr):
            raise invalid(where, f"expected an object, got {type_name(attr)}")
        present = [(key, kind) for key, kind in _ATTRIBUTE_FIELDS if attr.get(key) is not None]
        if len(present) != 1:
            raise invalid(where, "exactly one of int, bool, string or version must be set")
        key, kind = present[0]
        value = attr[key]
        if kind is AttributeKind.INT:
            value = get_int(attr, key)
        elif kind is AttributeKind.BOOL:
            value = get_bool(attr, key)
        else:
            value = get_str(attr, key)
            if kind is AttributeKind.VERSION:
                try:
                    parse_version(value)
                except ValueError as err:
                    raise invalid(f"{where}.version", str(err)) from None
        out[name] = DeviceAttribute(kind, value)
    return FrozenDict(out)


def _capacity(raw: Any, where: str) -> Quantity:
    path = f"capacity.{where}"
    if not is_map(raw):
        raise invalid(path, f"expected an object, got {type_name(raw)}")
    return _quantity(raw.get("value"), f"{path}.value")


# --- ResourceClaim -------------------------------------------------------------------------------


def _claim_spec(spec: Json) -> ClaimSpec:
    devices = get_map(spec, "devices")
    try:
        requests = tuple(_request(r, where) for where, r in _items(get_list(devices, "requests"), "requests"))
        names = [r.name for r in requests]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise invalid(f"requests[{i}].name", f"duplicate value {name!r}")
        known = set(names) | {f"{r.name}/{s.name}" for r in requests for s in r.first_available}
        constraints = []
        for where, c in _items(get_list(devices, "constraints"), "constraints"):
            refs = get_str_list(c, "requests")
            for j, ref in enumerate(refs):
                if ref not in known:
                    raise invalid(f"{where}.requests[{j}]", f"must be the name of a request in the claim, not {ref!r}")
            attribute = get_str(c, "matchAttribute")
            if not attribute:
                raise invalid(f"{where}.matchAttribute", "required (the only constraint type)")
            if "/" not in attribute:
                raise invalid(f"{where}.matchAttribute", f"{attribute!r} must be a fully qualified name (domain/name)")
            constraints.append(DeviceConstraint(requests=refs, match_attribute=attribute))
        config = _configs(get_list(devices, "config"))
    except ParseError as err:
        raise err.under("devices") from None
    return ClaimSpec(requests=requests, constraints=tuple(constraints), config=config)


def _request(raw: Json, where: str) -> DeviceRequest:
    name = get_str(raw, "name")
    if not name:
        raise invalid(f"{where}.name", "required")
    if not is_dns_label(name):
        raise invalid(f"{where}.name", f"{name!r} is not a DNS label")
    exactly = raw.get("exactly")
    first = get_list(raw, "firstAvailable") if raw.get("firstAvailable") is not None else None
    if (exactly is None) == (first is None):
        raise invalid(where, "exactly one of exactly or firstAvailable must be set")
    if exactly is not None:
        if not is_map(exactly):
            raise invalid(f"{where}.exactly", f"expected an object, got {type_name(exactly)}")
        return DeviceRequest(name=name, exactly=_sub_request(exactly, f"{where}.exactly", name, admin=True))
    assert first is not None
    if not first:
        raise invalid(f"{where}.firstAvailable", "must have at least one entry")
    if len(first) > FIRST_AVAILABLE_MAX_SIZE:
        raise invalid(f"{where}.firstAvailable", f"must have at most {FIRST_AVAILABLE_MAX_SIZE} entries")
    subs: list[DeviceSubRequest] = []
    for sub_where, sub in _items(first, f"{where}.firstAvailable"):
        sub_name = get_str(sub, "name")
        if not sub_name:
            raise invalid(f"{sub_where}.name", "required")
        if not is_dns_label(sub_name):
            raise invalid(f"{sub_where}.name", f"{sub_name!r} is not a DNS label")
        if any(s.name == sub_name for s in subs):
            raise invalid(f"{sub_where}.name", f"duplicate value {sub_name!r}")
        subs.append(_sub_request(sub, sub_where, sub_name, admin=False))
    return DeviceRequest(name=name, first_available=tuple(subs))


def _sub_request(raw: Json, where: str, name: str, *, admin: bool) -> DeviceSubRequest:
    try:
        class_name = get_str(raw, "deviceClassName")
        if not class_name:
            raise invalid("deviceClassName", "required")
        if not is_dns_subdomain(class_name):
            raise invalid("deviceClassName", f"{class_name!r} is not a DNS subdomain")
        mode_text = get_str(raw, "allocationMode") or AllocationMode.EXACT_COUNT.value
        try:
            mode = AllocationMode(mode_text)
        except ValueError:
            raise invalid("allocationMode", f"must be ExactCount or All, not {mode_text!r}") from None
        count_raw = raw.get("count")
        if mode is AllocationMode.EXACT_COUNT:
            count = 1 if count_raw is None else get_int(raw, "count")
            if count <= 0:
                raise invalid("count", "must be greater than zero")
        else:
            if count_raw is not None and count_raw != 0:
                raise invalid("count", "must not be set when allocationMode is All")
            count = 0
        admin_raw = raw.get("adminAccess")
        if admin_raw is not None and not admin:
            raise invalid("adminAccess", "not supported in a subrequest")
        return DeviceSubRequest(
            name=name,
            device_class_name=class_name,
            selectors=_selectors(get_list(raw, "selectors")),
            allocation_mode=mode,
            count=count,
            tolerations=_tolerations(get_list(raw, "tolerations"), "tolerations"),
            admin_access=None if admin_raw is None else get_bool(raw, "adminAccess"),
        )
    except ParseError as err:
        raise err.under(where) from None


def _allocation(raw: Json) -> AllocationResult:
    devices = get_map(raw, "devices")
    results = []
    for where, r in _items(get_list(devices, "results"), "devices.results"):
        fields = {key: get_str(r, key) for key in ("request", "driver", "pool", "device")}
        for key, value in fields.items():
            if not value:
                raise invalid(f"{where}.{key}", "required")
        admin = r.get("adminAccess")
        results.append(
            DeviceResult(
                **fields,
                admin_access=None if admin is None else get_bool(r, "adminAccess"),
                tolerations=_tolerations(get_list(r, "tolerations"), f"{where}.tolerations"),
                binding_conditions=get_str_list(r, "bindingConditions"),
                binding_failure_conditions=get_str_list(r, "bindingFailureConditions"),
            )
        )
    timestamp = raw.get("allocationTimestamp")
    return AllocationResult(
        results=tuple(results),
        config=_configs(get_list(devices, "config"), "devices.config", with_source=True),
        node_selector=_node_selector(raw.get("nodeSelector"), "nodeSelector"),
        allocation_timestamp=None if timestamp is None else _under(parse_timestamp, timestamp, "allocationTimestamp"),
    )


def _reserved_for(raw: JsonList) -> tuple[ConsumerReference, ...]:
    out = []
    for where, ref in _items(raw, "reservedFor"):
        resource, name, uid = get_str(ref, "resource"), get_str(ref, "name"), get_str(ref, "uid")
        if not resource or not name or not uid:
            raise invalid(where, "resource, name and uid are required")
        out.append(ConsumerReference(resource=resource, name=name, uid=uid, api_group=get_str(ref, "apiGroup")))
    return tuple(out)
