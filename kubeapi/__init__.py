"""The API layer: every conversation with kube-apiserver (the client stack, reflectors, Events, leader election).

- :class:`Reflector` lists and watches one kind as raw JSON; :class:`KubeClusterClient` binds, patches
  and deletes pods and patches objects.
- :func:`load_connection` reads a kubeconfig or the in-cluster service account.
- :class:`ApiHttp` is the raw-JSON HTTP layer (aiohttp, keep-alive pool, token bucket).

The names are imported on first use (:pep:`562`): the errors and kinds modules load without the HTTP stack,
so ``koord-scheduler --help`` does not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubeapi.client import KubeClusterClient
    from kubeapi.connection import Connection, KubeConfigError, load_connection
    from kubeapi.events import EventOptions, EventRecorder
    from kubeapi.http import ApiConnectionError, ApiError, ApiHttp, HttpOptions
    from kubeapi.ratelimit import TokenBucket
    from kubeapi.reflector import Reflector, ReflectorOptions, ResourceKind

_HOMES: dict[str, str] = {
    "ApiConnectionError": "kubeapi.http",
    "ApiError": "kubeapi.http",
    "ApiHttp": "kubeapi.http",
    "Connection": "kubeapi.connection",
    "EventOptions": "kubeapi.events",
    "EventRecorder": "kubeapi.events",
    "HttpOptions": "kubeapi.http",
    "KubeClusterClient": "kubeapi.client",
    "KubeConfigError": "kubeapi.connection",
    "Reflector": "kubeapi.reflector",
    "ReflectorOptions": "kubeapi.reflector",
    "ResourceKind": "kubeapi.reflector",
    "TokenBucket": "kubeapi.ratelimit",
    "load_connection": "kubeapi.connection",
}
"""Each public name and the module it comes from."""

__all__ = [
    "ApiConnectionError",
    "ApiError",
    "ApiHttp",
    "Connection",
    "EventOptions",
    "EventRecorder",
    "HttpOptions",
    "KubeClusterClient",
    "KubeConfigError",
    "Reflector",
    "ReflectorOptions",
    "ResourceKind",
    "TokenBucket",
    "load_connection",
]


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
