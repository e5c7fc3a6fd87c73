"""The API layer: every conversation with kube-apiserver (the client stack, reflectors, Events, leader election).

- :class:`Reflector` lists and watches one kind as raw JSON; :class:`KubeClusterClient` binds, patches
  and deletes pods and patches objects.
- :func:`load_connection` reads a kubeconfig or the in-cluster service account.
- :class:`ApiHttp` is the raw-JSON HTTP layer (aiohttp, keep-alive pool, token bucket).
"""

from kubeapi.client import KubeClusterClient
from kubeapi.connection import Connection, KubeConfigError, load_connection
from kubeapi.events import EventOptions, EventRecorder
from kubeapi.http import ApiConnectionError, ApiError, ApiHttp, HttpOptions
from kubeapi.ratelimit import TokenBucket
from kubeapi.reflector import Reflector, ReflectorOptions, ResourceKind

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
