"""The scheduler services the Coscheduling plugin needs (``SchedulerHandle`` provides them)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from apis.feature_gates import SchedulerFeatureGates
from koord_scheduler.framework.handle import FrameworkHandle
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import EventType, ObjectKind, QueuedPodInfo
from koord_scheduler.framework.waiting_pods import WaitingPod


class CoschedulingHandle(FrameworkHandle, Protocol):
    """The scheduler services this plugin needs (``SchedulerHandle`` provides them)."""

    def watch(self, kind: ObjectKind, handler: Callable[[EventType, Any, Any], None]) -> None: ...

    def watch_pods(self, handler: Callable[[EventType, Any, Any], None]) -> None: ...

    def register_error_handler_filters(
        self, pre: Callable[[QueuedPodInfo, Status], bool] | None, post: Callable[[QueuedPodInfo, Status], bool] | None
    ) -> None: ...

    def add_simulation_report(self, reporter: Callable[[], tuple[str, list[dict[str, Any]]]]) -> None: ...

    def activate_pods(self, keys: Iterable[str]) -> None: ...

    def add_next_pod_hook(self, hook: Callable[[], str | None]) -> None: ...

    def is_assumed(self, key: str) -> bool: ...

    def waiting_pod(self, key: str) -> WaitingPod | None: ...

    @property
    def feature_gates(self) -> SchedulerFeatureGates:
        """``--feature-gates`` (``GangPendingPodsConditionPatch``)."""
        ...
