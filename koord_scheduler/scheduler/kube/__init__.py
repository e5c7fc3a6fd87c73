"""koord-scheduler against a real API server: the cluster source, the cluster client and their plumbing.

- :class:`KubeClusterSource` lists and watches Pods, Nodes and registered kinds as raw JSON and writes
  conditions and Events; its ``client`` (:class:`KubeClusterClient`) binds, patches and deletes pods.
- :func:`load_connection` reads a kubeconfig or the in-cluster service account.
- :class:`ApiHttp` is the raw-JSON HTTP layer (aiohttp, keep-alive pool, token bucket).
"""

from koord_scheduler.scheduler.kube.client import KubeClusterClient
from koord_scheduler.scheduler.kube.connection import Connection, KubeConfigError, load_connection
from koord_scheduler.scheduler.kube.events import EventOptions, EventRecorder
from koord_scheduler.scheduler.kube.http import ApiConnectionError, ApiError, ApiHttp, HttpOptions
from koord_scheduler.scheduler.kube.ratelimit import TokenBucket
from koord_scheduler.scheduler.kube.reflector import Reflector, ReflectorOptions, ResourceKind
from koord_scheduler.scheduler.kube.source import KubeClusterSource, KubeSourceOptions

__all__ = [
    "ApiConnectionError",
    "ApiError",
    "ApiHttp",
    "Connection",
    "EventOptions",
    "EventRecorder",
    "HttpOptions",
    "KubeClusterClient",
    "KubeClusterSource",
    "KubeConfigError",
    "KubeSourceOptions",
    "Reflector",
    "ReflectorOptions",
    "ResourceKind",
    "TokenBucket",
    "load_connection",
]
