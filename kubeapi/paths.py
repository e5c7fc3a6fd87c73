"""API paths for koord-scheduler: :func:`apis.core.paths.api_path` with the cluster layer's error type.

Every path koord-scheduler sends is built here (or by :func:`resource_path` directly), never by
formatting a name into a string: see :mod:`apis.core.paths` for the rules. A name that breaks them
raises :class:`InvalidRequestError`, a :class:`~koord_scheduler.framework.errors.ClusterError`, so callers
that already handle a failed API call (a bind, a status patch) handle this refusal the same way, and no
byte is sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apis.core.paths import UnsafeRequestError, api_path
from kubeapi.errors import ClusterError

if TYPE_CHECKING:
    from apis.core.types import Pod
    from kubeapi.kinds import ObjectKind


class InvalidRequestError(ClusterError):
    """A request refused before anything was sent: a name that is not a Kubernetes name, or a path or
    header value that would end the request line (see :mod:`apis.core.paths`)."""


def resource_path(
    group: str, version: str, resource: str, *, namespace: str = "", name: str = "", subresource: str = ""
) -> str:
    """:func:`apis.core.paths.api_path`; raises :class:`InvalidRequestError` instead of ``ValueError``."""
    try:
        return api_path(group, version, resource, namespace=namespace, name=name, subresource=subresource)
    except UnsafeRequestError as exc:
        raise InvalidRequestError(str(exc)) from None


def pod_path(pod: Pod, subresource: str = "") -> str:
    """``/api/v1/namespaces/{namespace}/pods/{name}[/{subresource}]``."""
    return resource_path("", "v1", "pods", namespace=pod.namespace, name=pod.name, subresource=subresource)


def object_path(kind: ObjectKind[Any], name: str, namespace: str = "", subresource: str = "") -> str:
    """The path of one object of ``kind``; a namespaced kind without ``namespace`` is in ``default``."""
    return resource_path(
        kind.group,
        kind.version,
        kind.plural,
        namespace=(namespace or "default") if kind.namespaced else "",
        name=name,
        subresource=subresource,
    )
