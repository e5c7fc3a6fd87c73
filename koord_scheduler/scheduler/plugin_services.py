"""The ``/apis/v1`` services of a scheduler (Koordinator ``frameworkext/services/services.go``): the routes
every koord-scheduler has, and those of its plugins, in one table that answers a path without any HTTP.

- ``GET /apis/v1/__services__``: ``{"GET": [every path, sorted]}``;
- ``GET /apis/v1/nodes/:nodeName``: the scheduler cache's view of a node (``NodeInfo``: the Node, its pods,
  ``requested`` / ``nonZeroRequested`` / ``allocatable`` / ``remaining`` as Go's ``framework.Resource``, used
  host ports, generation), or 404 ``{"message": "cannot find node <name>"}``;
- ``GET /apis/v1/plugins/<Plugin>/...``: each plugin that implements
  :class:`~koord_scheduler.framework.services.APIServiceProvider`, taken from the first profile that
  enables it (Koordinator registers a provider once, by plugin name).

Path parameters are checked before any handler sees them: ``namespace`` must be a DNS-1123 label,
``nodeName`` a DNS-1123 subdomain (the API server's rules for those names), and every parameter at most
253 visible ASCII characters; a refused one is answered 400 with the rule, never looked up. Anything else
unknown is 404 ``{"message": "..."}``.

The Node and pods in ``nodes/:nodeName`` are summaries of what the cache keeps (name, labels, taints,
allocatable; pods by name, namespace, UID and node), not the full objects Koordinator's cache holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apis.core.paths import dns1123_label_problem, dns1123_subdomain_problem, shown
from apis.core.types import CPU, MEMORY, PODS
from koord_scheduler.framework.services import (
    ApiHandler,
    ApiReply,
    ApiRoute,
    APIServiceProvider,
    framework_resource,
    not_found,
    ok,
    resource_list,
)
from koord_scheduler.framework.snapshot import ClusterSnapshot

if TYPE_CHECKING:
    from koord_scheduler.scheduler.scheduler import Scheduler

BASE = "/apis/v1"
PLUGINS = BASE + "/plugins"
MAX_PARAM_CHARS = 253


@dataclass(frozen=True, slots=True)
class _Compiled:
    path: str
    segments: tuple[str, ...]
    handler: ApiHandler


def param_problem(name: str, value: str) -> str:
    """Why a path parameter is refused ("" when it is fine)."""
    if not value or len(value) > MAX_PARAM_CHARS or not value.isascii() or not value.isprintable() or "/" in value:
        return f"{name} {shown(value)} is invalid: at most {MAX_PARAM_CHARS} visible ASCII characters, no '/'"
    if name == "namespace":
        problem = dns1123_label_problem(value)
    elif name == "nodeName":
        problem = dns1123_subdomain_problem(value)
    else:
        problem = ""
    return f"{name} {shown(value)} is invalid: {problem}" if problem else ""


class ServiceTable:
    """Routes by path; :meth:`answer` runs the one a request path matches."""

    def __init__(self, routes: Sequence[tuple[str, ApiHandler]]) -> None:
        self._routes: list[_Compiled] = []
        seen: set[str] = set()
        for path, handler in routes:
            if path in seen:
                continue
            seen.add(path)
            self._routes.append(_Compiled(path, tuple(path.strip("/").split("/")), handler))
        self._routes.sort(key=lambda r: r.path)

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self._routes]

    def listing(self) -> dict[str, list[str]]:
        """``__services__``: Koordinator lists gin's routes by method."""
        return {"GET": self.paths}

    def answer(self, segments: Sequence[str], query: Mapping[str, str]) -> ApiReply:
        """The reply for the path ``/`` + ``"/".join(segments)`` (segments already percent-decoded)."""
        for route in self._routes:
            params = _match(route.segments, segments)
            if params is None:
                continue
            for name, value in params.items():
                problem = param_problem(name, value)
                if problem:
                    return 400, {"message": problem}
            return route.handler(params, query)
        return not_found(f"no service at {shown('/' + '/'.join(segments))}; GET {BASE}/__services__ lists them")


def _match(pattern: Sequence[str], segments: Sequence[str]) -> dict[str, str] | None:
    if len(pattern) != len(segments):
        return None
    params: dict[str, str] = {}
    for want, got in zip(pattern, segments, strict=True):
        if want.startswith(":"):
            params[want[1:]] = got
        elif want != got:
            return None
    return params


def node_info(snapshot: ClusterSnapshot, name: str) -> dict[str, Any] | None:
    """Koordinator's ``NodeInfo`` view of node ``name`` (None when the cache has no such node)."""
    info = snapshot.node_info(name)
    if info is None or info.node is None:
        return None
    node, pos = info.node, info.position
    requested = {n: int(snapshot.requested[pos, i]) for i, n in enumerate(snapshot.resource_names)}
    allocatable = {n: int(snapshot.allocatable[pos, i]) for i, n in enumerate(snapshot.resource_names)}
    requested = {k: v for k, v in requested.items() if v or k in (CPU, MEMORY)}
    allocatable = {k: v for k, v in allocatable.items() if v or k in (CPU, MEMORY)}
    allocatable[PODS] = int(snapshot.allowed_pods[pos])
    remaining = {k: allocatable.get(k, 0) - requested.get(k, 0) for k in allocatable.keys() | requested.keys()}
    remaining[PODS] = int(snapshot.allowed_pods[pos]) - int(snapshot.pod_count[pos])
    non_zero = {CPU: int(snapshot.non_zero_requested[pos, 0]), MEMORY: int(snapshot.non_zero_requested[pos, 1])}
    ports: dict[str, list[dict[str, Any]]] = {}
    for (ip, protocol, port), count in sorted(info.used_ports.items()):
        if count > 0:
            ports.setdefault(ip, []).append({"Protocol": protocol, "Port": port})
    out: dict[str, Any] = {
        "node": {
            "metadata": {"name": node.name, **({"labels": dict(sorted(node.labels.items()))} if node.labels else {})},
            "spec": {
                **({"unschedulable": True} if node.unschedulable else {}),
                **(
                    {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]}
                    if node.taints
                    else {}
                ),
            },
            "status": {"allocatable": resource_list(node.allocatable), "capacity": resource_list(node.capacity)},
        },
        "pods": [
            {
                "Pod": {
                    "metadata": {"name": p.name, "namespace": p.namespace, **({"uid": p.uid} if p.uid else {})},
                    "spec": {"nodeName": name},
                }
            }
            for _, p in sorted(info.pods.items())
        ],
    }
    if ports:
        out["usedPorts"] = ports
    out["requested"] = framework_resource({k: v for k, v in requested.items() if k != PODS})
    out["nonZeroRequested"] = framework_resource(non_zero)
    out["remaining"] = framework_resource(remaining)
    out["allocatable"] = framework_resource(allocatable)
    out["generation"] = info.generation
    return out


def scheduler_services(scheduler: Scheduler) -> ServiceTable:
    """The table for ``scheduler``: the built-in routes and every provider's, once per plugin name."""
    routes: list[tuple[str, ApiHandler]] = []
    table_ref: list[ServiceTable] = []

    def services(_: Mapping[str, str], __: Mapping[str, str]) -> ApiReply:
        return ok(table_ref[0].listing())

    def node(params: Mapping[str, str], _: Mapping[str, str]) -> ApiReply:
        found = node_info(scheduler.cache.snapshot, params["nodeName"])
        return ok(found) if found is not None else not_found(f"cannot find node {params['nodeName']}")

    routes.append((f"{BASE}/__services__", services))
    routes.append((f"{BASE}/nodes/:nodeName", node))
    providers: dict[str, APIServiceProvider] = {}
    for fwk in scheduler.profiles.values():
        for plugin in fwk.plugins.values():
            if isinstance(plugin, APIServiceProvider) and plugin.name not in providers:
                providers[plugin.name] = plugin
    for name, provider in sorted(providers.items()):
        for route in provider.api_routes():
            routes.append((f"{PLUGINS}/{name}{_relative(route)}", route.handler))
    table = ServiceTable(routes)
    table_ref.append(table)
    return table


def _relative(route: ApiRoute) -> str:
    return route.path if route.path.startswith("/") else "/" + route.path
