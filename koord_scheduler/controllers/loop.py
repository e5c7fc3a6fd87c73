"""The one loop every hosted controller runs on (Reservation, PodGroup, DeviceResource, the colocation
controllers, ElasticQuota status, quotaprofile, colocationprofile, the descheduler and migration).

A controller keeps its own indexes and dirty set, fed by the informers' events on the event-loop thread;
:class:`ReconcileLoop` decides *when* it reconciles:

1. not before ``ready()`` (every kind the controller reads has been listed: an empty index must never
   look like "nothing exists"), with a warning every 30 s of waiting;
2. then at once with ``full=True``, and again as soon as an event calls :meth:`ReconcileLoop.wake` or
   ``pending()`` is still true after a pass, and every ``resync_seconds`` with ``full=True`` (things that
   are functions of the clock, such as expiry), and when the controller's next timer is due (``due()``:
   per-object timers such as a NodeMetric turning stale or a retry);
3. until ``stop`` is set.

A pass that raises is logged in one line (:func:`~koord_scheduler.framework.errors.log_failure`) and
counted in :attr:`ReconcileLoop.failures`; the loop goes on (per-object failures are contained earlier, by
each controller's :class:`~.containment.Containment`). Writes within a pass go through
:func:`~.workers.run_with_workers` (``controllerWorkers``) and the controllers' shared token bucket.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from koord_scheduler.controllers.waits import wake_or_stop
from koord_scheduler.framework.errors import log_failure

log = logging.getLogger(__name__)

READY_WARNING_SECONDS = 30
"""While waiting for ``ready()``, the warning is repeated this often (one check a second)."""

CallLater = Callable[[float, Callable[[], None]], object]
"""``call_later(seconds, fn)``: run ``fn`` later (``loop.call_later``; tests pass a fake)."""

Pause = Callable[[asyncio.Event, asyncio.Event, float], Awaitable[None]]
"""``pause(wake, stop, seconds)``: return when ``wake`` or ``stop`` is set, or after ``seconds``
(:func:`~.waits.wake_or_stop`; tests pass one that does not sleep)."""


class ReconcileLoop:
    """See the module docstring. One per controller; :meth:`run` may be called again after it returned or
    raised (a supervised controller restarted, a new leader term)."""

    def __init__(
        self,
        name: str,
        *,
        waiting_for: str,
        resync_seconds: float | None = None,
        idle_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        pause: Pause = wake_or_stop,
    ) -> None:
        """``waiting_for``: what ``ready()`` waits for, in the warning. ``resync_seconds``: a full pass this
        often (None: never). ``idle_seconds``: the longest wait without an event. ``clock`` and ``pause``
        are the loop's time (monotonic seconds) and its only way to wait."""
        self.name = name
        self.waiting_for = waiting_for
        self.resync_seconds = resync_seconds
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.pause = pause
        self.passes = 0
        """Passes run (failed ones included)."""
        self.failures = 0
        """Passes that raised."""
        self._wake = asyncio.Event()
        self._never = asyncio.Event()
        """What the wait for ``ready()`` is woken by: nothing (it checks once a second)."""

    def wake(self) -> None:
        """Run a pass soon (an event marked something dirty)."""
        self._wake.set()

    async def wait_ready(self, stop: asyncio.Event, ready: Callable[[], bool]) -> bool:
        """Wait until ``ready()``; False when ``stop`` was set first."""
        waited = 0
        while not ready():
            if waited % READY_WARNING_SECONDS == 0:
                log.warning(
                    "%s controller waiting for %s to be listed (CRD installed? RBAC?)", self.name, self.waiting_for
                )
            await self.pause(self._never, stop, 1.0)
            if stop.is_set():
                return False
            waited += 1
        return True

    async def run(
        self,
        stop: asyncio.Event,
        *,
        ready: Callable[[], bool],
        reconcile: Callable[[bool], Awaitable[object]],
        pending: Callable[[], bool],
        due: Callable[[], float | None] = lambda: None,
    ) -> None:
        """Run ``reconcile(full)`` as the module docstring says until ``stop`` is set; call only while
        holding the leader Lease. ``pending()``: work is left that should not wait for an event.
        ``due()``: when (on the loop's ``clock``) the controller next has timed work, None for never; the
        wait after a pass ends then."""
        if not await self.wait_ready(stop, ready):
            return
        log.info("%s controller running", self.name)
        next_full = self.clock()
        first = True
        while not stop.is_set():
            full = first or (self.resync_seconds is not None and self.clock() >= next_full)
            first = False
            if full and self.resync_seconds is not None:
                next_full = self.clock() + self.resync_seconds
            self._wake.clear()
            self.passes += 1
            try:
                await reconcile(full)
            except Exception as exc:  # an API or decoding failure must not end the controller
                self.failures += 1
                log_failure(log, f"{self.name} controller pass failed", exc)
            if stop.is_set():
                return
            if pending():
                await asyncio.sleep(0)
                continue
            timeout = self.idle_seconds
            if self.resync_seconds is not None:
                timeout = min(timeout, max(0.0, next_full - self.clock()))
            at = due()
            if at is not None:
                timeout = min(timeout, max(0.0, at - self.clock()))
            await self.pause(self._wake, stop, timeout)
