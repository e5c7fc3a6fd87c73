"""DefaultBinder (kube-scheduler ``defaultbinder/default_binder.go``).

Binds with one call to the injected cluster client (the pods/binding subresource on a real cluster, the
simulator's bind in memory). A :class:`ClusterError` becomes an Error status, so the binding cycle
unreserves and requeues the pod; any other exception is a bug and the runtime reports it as one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import ClusterClient, FrameworkHandle
from koord_scheduler.framework.interfaces import BindPlugin
from koord_scheduler.framework.status import Status, error, success
from koord_scheduler.plugins import names

NAME = names.DEFAULT_BINDER
ARGS = None


class DefaultBinder:
    name = NAME

    def __init__(self, cluster: ClusterClient) -> None:
        self._cluster = cluster

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        try:
            await self._cluster.bind(pod, node_name)
        except ClusterError as exc:
            return error(str(exc))
        return success()


def new(args: Any, handle: FrameworkHandle) -> DefaultBinder:
    return DefaultBinder(handle.cluster)


if TYPE_CHECKING:
    _bind: type[BindPlugin] = DefaultBinder
