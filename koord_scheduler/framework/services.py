"""Plugin services: read-only JSON views of a plugin's state, served under ``/apis/v1/plugins/<Name>/``
(Koordinator ``pkg/scheduler/frameworkext/services``: ``APIServiceProvider.RegisterEndpoints``).

A plugin offers them by implementing :class:`APIServiceProvider`: :meth:`~APIServiceProvider.api_routes`
returns :class:`ApiRoute` values whose paths are written as Koordinator's (gin's ``:param`` segments,
relative to the plugin's prefix) and whose handlers take the path parameters and the query and answer
``(HTTP status, JSON-able body)``. Handlers run on the scheduler's event loop between scheduling cycles, so
they see a consistent state and must not block; they never change anything.

The scheduler collects the routes once (:mod:`koord_scheduler.scheduler.plugin_services`), and the HTTP layer
serves them on the scheduler's metrics port. Nothing here knows about HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from apis.core.quantity import format_quantity
from apis.core.types import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

ApiReply = tuple[int, Any]
"""(HTTP status, a value ``json.dumps`` can encode)."""

ApiHandler = Callable[[Mapping[str, str], Mapping[str, str]], ApiReply]
"""``handler(path parameters, query parameters)``."""

GO_ZERO_TIME = "0001-01-01T00:00:00Z"
"""How Go encodes a ``time.Time`` that was never set."""


@dataclass(frozen=True, slots=True)
class ApiRoute:
    path: str
    """Relative to the plugin's prefix, gin style: ``/gang/:namespace/:name``."""
    handler: ApiHandler


@runtime_checkable
class APIServiceProvider(Protocol):
    """A plugin with debug endpoints (``GET /apis/v1/plugins/<name>/...``)."""

    name: str

    def api_routes(self) -> Sequence[ApiRoute]:
        """The plugin's routes; called once, when the scheduler is built."""
        ...


def ok(body: Any) -> ApiReply:
    return 200, body


def not_found(message: str) -> ApiReply:
    """Koordinator's ``ResponseErrorMessage(c, 404, ...)``: ``{"message": "..."}``."""
    return 404, {"message": message}


def resource_list(amounts: Mapping[str, int], *, keep_zero: bool = True) -> dict[str, str]:
    """A ``corev1.ResourceList`` as Go encodes it: quantity strings, keys sorted (``encoding/json`` sorts
    map keys). ``amounts`` are scheduler amounts (millicores for cpu, base units otherwise)."""
    return {k: format_quantity(k, int(v)) for k, v in sorted(amounts.items()) if keep_zero or v}


def string_set(keys: Sequence[str] | set[str] | frozenset[str]) -> dict[str, dict[str, Any]]:
    """A Go ``sets.Set[string]`` as ``encoding/json`` writes it: ``{"a": {}, "b": {}}``."""
    return {k: {} for k in sorted(keys)}


def go_time(seconds: float | None) -> str:
    """A ``metav1.Time`` / ``time.Time`` (RFC 3339, UTC, whole seconds); never set: Go's zero time."""
    if seconds is None:
        return GO_ZERO_TIME
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def query_flag(query: Mapping[str, str], name: str) -> bool:
    """gin's ``c.Query(name) == "true"``."""
    return query.get(name, "") == "true"


_GO_FIELDS = ((CPU, "MilliCPU"), (MEMORY, "Memory"), (EPHEMERAL_STORAGE, "EphemeralStorage"))


def framework_resource(amounts: Mapping[str, int]) -> dict[str, Any]:
    """kube-scheduler's ``framework.Resource`` as Go encodes it (no JSON tags: the field names);
    ``ScalarResources`` holds every other resource (null when none)."""
    named = {k for k, _ in _GO_FIELDS} | {PODS}
    scalars = {k: int(v) for k, v in sorted(amounts.items()) if k not in named}
    out: dict[str, Any] = {go: int(amounts.get(k, 0)) for k, go in _GO_FIELDS}
    out["AllowedPodNumber"] = int(amounts.get(PODS, 0))
    out["ScalarResources"] = scalars or None
    return out
