"""DefaultBinder (kube-scheduler ``defaultbinder/default_binder.go``).

Binds with one call to the injected cluster client (the pods/binding subresource on a real cluster, the
simulator's bind in memory). A :class:`ClusterError` becomes an Error status, so the binding cycle
unreserves and requeues the pod; any other exception is a bug and the runtime reports it as one.
"""

from __future__ import annotations

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.handle import ClusterClient, Handle
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


def new(args: None, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle.cluster)


def declared_capabilities(plugin: DefaultBinder) -> tuple[BindPlugin]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return (plugin,)
