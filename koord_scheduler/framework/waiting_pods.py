"""Pods held at Permit: other plugins allow or reject them by key; a timeout rejects them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from apis.core.types import Pod
from koord_scheduler.framework.status import Code, Status


class WaitingPod:
    """One pod waiting on the Permit plugins that returned Wait.

    ``on_reject`` is called once, synchronously, when a plugin rejects the pod (not on a timeout, which the
    waiting binding cycle sees itself): the scheduler releases what the pod holds before its next cycle.
    """

    def __init__(
        self,
        pod: Pod,
        node_name: str,
        timeouts: Mapping[str, float],
        *,
        on_reject: Callable[[WaitingPod], None] | None = None,
    ) -> None:
        self.pod = pod
        self.node_name = node_name
        self.pending = dict(timeouts)
        self._on_reject = on_reject
        self._done: asyncio.Future[Status] = asyncio.get_running_loop().create_future()

    def allow(self, plugin: str) -> None:
        self.pending.pop(plugin, None)
        if not self.pending and not self._done.done():
            self._done.set_result(Status())

    def reject(self, plugin: str, message: str) -> None:
        if not self._done.done():
            self._done.set_result(Status(Code.UNSCHEDULABLE, (message,), plugin))
            if self._on_reject is not None:
                self._on_reject(self)

    @property
    def rejection(self) -> Status | None:
        """The rejection, once a plugin rejected the pod; None while it waits or once allowed."""
        if not self._done.done():
            return None
        status = self._done.result()
        return None if status.is_success else status

    def is_done(self) -> bool:
        """Whether the pod was allowed by every plugin or rejected."""
        return self._done.done()

    async def wait(self) -> Status:
        if not self.pending:
            return Status()
        plugin, timeout = min(self.pending.items(), key=lambda kv: kv[1])
        try:
            # asyncio.timeout, not wait_for, which on Python 3.11 loses a cancellation that arrives
            # as the pod is allowed or rejected.
            async with asyncio.timeout(timeout):
                return await asyncio.shield(self._done)
        except TimeoutError:
            return Status(
                Code.UNSCHEDULABLE, (f"rejected due to timeout after waiting {timeout:g}s at plugin {plugin}",), plugin
            )


class WaitingPods:
    """Pod key -> WaitingPod, for plugins (``handle.waiting_pods``)."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, waiting: WaitingPod) -> None:
        self._pods[waiting.pod.key] = waiting

    def remove(self, key: str) -> None:
        self._pods.pop(key, None)

    def get(self, key: str) -> WaitingPod | None:
        return self._pods.get(key)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self._pods.values()))

    def expire_first(self) -> bool:
        """Virtual time (the simulator): time out the Permit waits that end first (each pod's earliest
        plugin timeout, the smallest of those across pods). False if no pod is waiting."""
        waiting = [w for w in self._pods.values() if not w.is_done() and w.pending]
        if not waiting:
            return False
        first = min(min(w.pending.values()) for w in waiting)
        for w in waiting:
            plugin, timeout = min(w.pending.items(), key=lambda kv: kv[1])
            if timeout <= first:
                w.reject(plugin, f"rejected due to timeout after waiting {timeout:g}s at plugin {plugin}")
        return True
