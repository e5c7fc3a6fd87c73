"""Events the plugin records on gang pods: best effort, in the background, never the same message twice
in a row on one pod."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from apis.core.types import Pod
from koord_scheduler.framework.handle import Handle

log = logging.getLogger(__name__)


class PodEvents:
    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._last: dict[str, str] = {}
        """Pod key -> the message of the last Event recorded on it."""
        self._tasks: set[asyncio.Task[None]] = set()

    def record(self, pod: Pod, reason: str, message: str, *, warning: bool) -> bool:
        """An Event on ``pod`` unless the last one recorded on it had the same message; whether it is new."""
        if self._last.get(pod.key) == message:
            return False
        self._last[pod.key] = message
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return True
        coro = self._handle.cluster.record_event(
            None,
            pod.name,
            namespace=pod.namespace,
            type="Warning" if warning else "Normal",
            reason=reason,
            message=message,
        )
        task = loop.create_task(self._send(coro, pod.key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def forget(self, key: str) -> None:
        self._last.pop(key, None)

    @staticmethod
    async def _send(coro: Any, key: str) -> None:
        try:
            await coro
        except Exception as exc:  # an Event is best effort
            log.warning("recording a gang event on pod %s failed: %s", key, exc)
