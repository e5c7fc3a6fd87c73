"""The informers' sink when controllers run in the scheduler's process: the scheduler first, then each
controller (:class:`FanoutSink`).

Controllers can be held back for the first lists (``hold_controllers=True``): their events are kept in
order and replayed by :meth:`FanoutSink.release`, so that the first lists, which the scheduler must see
before its first bind (the bound pods are charged to their nodes before anything binds), do not also
wait for every controller's bookkeeping (the ElasticQuota status controller charges each pod to its
quota tree, the colocation controllers index each pod by node). kube-scheduler's rule is the same:
informers synced, then schedule. Controllers do not reconcile before they are released (serve_run
starts their loops after the replay), so none acts on a partial view.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any, Protocol

from apis.core.types import Node, Pod
from koord_scheduler.framework.errors import log_failure
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.object_errors import ObjectErrors
from koord_scheduler.scheduler.source import EventSink

log = logging.getLogger(__name__)

REPLAY_BATCH = 1000
"""Held events replayed per turn of the event loop (:meth:`FanoutSink.release`): about 15 ms of the
quota and colocation controllers' bookkeeping, so scheduling cycles and watches keep running meanwhile."""


class ControllerSink(Protocol):
    """What a controller receives from the informers (the scheduler's sink minus invalid-object reports,
    which the scheduler or :class:`FanoutSink` keeps)."""

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None: ...

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None: ...

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None: ...


_NODE, _POD, _OBJECT = 0, 1, 2


class FanoutSink:
    """The informers' sink: the scheduler (when scheduling is on) first, then each controller in turn.

    With ``hold_controllers`` the controllers' events are kept (in arrival order) until :meth:`release`;
    the scheduler gets every event at once either way."""

    def __init__(
        self,
        primary: EventSink | None,
        *controllers: ControllerSink,
        object_errors: ObjectErrors,
        hold_controllers: bool = False,
    ) -> None:
        self.primary = primary
        self.controllers = controllers
        self.object_errors = object_errors
        """Reports bad objects when scheduling is off (the scheduler reports them otherwise)."""
        self._held: collections.deque[tuple[int, tuple[Any, ...]]] | None = (
            collections.deque() if hold_controllers and controllers else None
        )

    @property
    def holding(self) -> int:
        """Events kept for the controllers and not replayed yet (0 once released)."""
        return len(self._held) if self._held is not None else 0

    def on_invalid_object(
        self, kind: str, key: str, reason: str, message: str, exc: BaseException | None = None
    ) -> bool:
        if self.primary is not None:
            return self.primary.on_invalid_object(kind, key, reason, message, exc)
        return self.object_errors.report(kind, key, reason, message, exc=exc)

    def on_node(self, event: EventType, old: Node | None, new: Node | None) -> None:
        if self.primary is not None:
            self.primary.on_node(event, old, new)
        if self._held is not None:
            self._held.append((_NODE, (event, old, new)))
            return
        for controller in self.controllers:
            controller.on_node(event, old, new)

    def on_pod(self, event: EventType, old: Pod | None, new: Pod | None) -> None:
        if self.primary is not None:
            self.primary.on_pod(event, old, new)
        if self._held is not None:
            self._held.append((_POD, (event, old, new)))
            return
        for controller in self.controllers:
            controller.on_pod(event, old, new)

    def on_object(self, kind: str, event: EventType, old: Any, new: Any) -> None:
        if self.primary is not None:
            self.primary.on_object(kind, event, old, new)
        if self._held is not None:
            self._held.append((_OBJECT, (kind, event, old, new)))
            return
        for controller in self.controllers:
            controller.on_object(kind, event, old, new)

    async def release(self, *, batch: int = REPLAY_BATCH) -> None:
        """Replay the held events to the controllers in the order they came, ``batch`` per turn of the
        event loop; events that come meanwhile queue behind them. When this returns, the controllers have
        seen every event and get the next ones directly. A controller that raises on an event is logged
        and the replay goes on (as a watch goes on after a handler failure). A no-op when not holding."""
        held = self._held
        if held is None:
            return
        while True:
            for _ in range(min(batch, len(held))):
                which, args = held.popleft()
                for controller in self.controllers:
                    try:
                        if which == _POD:
                            controller.on_pod(*args)
                        elif which == _NODE:
                            controller.on_node(*args)
                        else:
                            controller.on_object(*args)
                    except Exception as exc:
                        log_failure(log, f"{type(controller).__name__} failed on a held event", exc)
            if not held:
                self._held = None  # (no await since the check: nothing can have been added)
                return
            await asyncio.sleep(0)
