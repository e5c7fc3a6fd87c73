"""The concrete handle plugins receive."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.scheduler.cache import ForgetPodHandler, SchedulerCache


@dataclass(slots=True)
class SchedulerHandle:
    """Implements :class:`~koord_scheduler.framework.handle.FrameworkHandle`."""

    cache: SchedulerCache
    cluster: ClusterClient
    clock: Callable[[], float]

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self.cache.snapshot

    def register_forget_pod_handler(self, handler: ForgetPodHandler) -> None:
        self.cache.register_forget_pod_handler(handler)
