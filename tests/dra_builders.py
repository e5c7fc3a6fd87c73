"""Raw ``resource.k8s.io/v1`` objects for DRA tests: device classes, slices, claims and templates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Json = dict[str, Any]

DRIVER = "gpu.example.com"


def device_class(name: str = DRIVER, *selectors: str, config: Iterable[Json] = ()) -> Json:
    spec: Json = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if config:
        spec["config"] = list(config)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def device(name: str, *, capacity: Mapping[str, str] | None = None, **attributes: Any) -> Json:
    """A device; attribute values: int, bool, str, or ``("version", "1.2.3")``."""
    attrs: Json = {}
    for key, value in attributes.items():
        if isinstance(value, tuple):
            attrs[key] = {value[0]: value[1]}
        elif isinstance(value, bool):
            attrs[key] = {"bool": value}
        elif isinstance(value, int):
            attrs[key] = {"int": value}
        else:
            attrs[key] = {"string": value}
    out: Json = {"name": name}
    if attrs:
        out["attributes"] = attrs
    if capacity:
        out["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    return out


def resource_slice(
    name: str,
    node: str = "",
    devices: Iterable[Json] = (),
    *,
    driver: str = DRIVER,
    pool: str = "",
    generation: int = 1,
    count: int = 1,
    all_nodes: bool = False,
    node_selector: Json | None = None,
) -> Json:
    spec: Json = {
        "driver": driver,
        "pool": {"name": pool or node or name, "generation": generation, "resourceSliceCount": count},
        "devices": list(devices),
    }
    if node:
        spec["nodeName"] = node
    elif all_nodes:
        spec["allNodes"] = True
    elif node_selector is not None:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def gpus(node: str, n: int, *, driver: str = DRIVER, prefix: str = "gpu", **attributes: Any) -> Json:
    """A slice of ``n`` devices ``gpu-0``.. on ``node``."""
    return resource_slice(
        f"{node}-{driver}", node, [device(f"{prefix}-{i}", index=i, **attributes) for i in range(n)], driver=driver
    )


def request(
    name: str = "gpu",
    device_class_name: str = DRIVER,
    *selectors: str,
    count: int | None = None,
    all_devices: bool = False,
    admin: bool | None = None,
) -> Json:
    exactly: Json = {"deviceClassName": device_class_name}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if all_devices:
        exactly["allocationMode"] = "All"
    elif count is not None:
        exactly["count"] = count
    if admin is not None:
        exactly["adminAccess"] = admin
    return {"name": name, "exactly": exactly}


def first_available(name: str, *alternatives: Json) -> Json:
    """A prioritized-list request; each alternative is a :func:`request`'s ``exactly`` plus a name."""
    subs = [{"name": a["name"], **a["exactly"]} for a in alternatives]
    return {"name": name, "firstAvailable": subs}


def claim_spec(*requests: Json, constraints: Iterable[Json] = (), config: Iterable[Json] = ()) -> Json:
    devices: Json = {"requests": list(requests or (request(),))}
    if constraints:
        devices["constraints"] = list(constraints)
    if config:
        devices["config"] = list(config)
    return {"devices": devices}


def claim(name: str, *requests: Json, namespace: str = "default", uid: str = "", **spec_fields: Any) -> Json:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"claim-{namespace}-{name}",
            "resourceVersion": "1",
        },
        "spec": claim_spec(*requests, **spec_fields),
    }


def template(name: str, *requests: Json, namespace: str = "default", **spec_fields: Any) -> Json:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": claim_spec(*requests, **spec_fields)},
    }
