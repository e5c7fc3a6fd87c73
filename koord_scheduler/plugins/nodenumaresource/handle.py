"""The services NodeNUMAResource uses from the scheduler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from apis.core.types import Pod
from koord_scheduler.framework.handle import ClusterClient
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import EventType, ObjectKind

SimulationReporter = Callable[[], tuple[str, list[dict[str, Any]]]]


class NUMAHandle(Protocol):
    """The services this plugin uses."""

    @property
    def snapshot(self) -> ClusterSnapshot: ...

    @property
    def cluster(self) -> ClusterClient: ...

    def watch(self, kind: ObjectKind, handler: Callable[[EventType, Any, Any], None]) -> None: ...

    def watch_pods(self, handler: Callable[[EventType, Any, Any], None]) -> None: ...

    def register_forget_pod_handler(self, handler: Callable[[Pod], None]) -> None: ...

    def add_simulation_report(self, reporter: SimulationReporter) -> None: ...
