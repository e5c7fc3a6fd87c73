"""One log line per API-server outage for the reflectors' retries, not one per watch and attempt.

Every reflector (a dozen kinds) retries on its own when kube-apiserver goes away, so a restart used to
log some twenty warnings that all say the same thing. :class:`OutageLog` passes the first failure of an
outage as a WARNING (naming the request and the error) and logs the rest at DEBUG, until
``quiet_seconds`` pass without a failure; the next failure then starts a new outage. Failures that are
not about reaching the server (a 4xx other than 429, a bad response) are not folded: each of those
says something different.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

QUIET_SECONDS = 60.0


class OutageWindow:
    """Which failures start an outage: the first one, and the first after ``quiet_seconds`` without any
    (:class:`OutageLog` logs by it)."""

    def __init__(self, quiet_seconds: float = QUIET_SECONDS, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet_seconds = quiet_seconds
        self.clock = clock
        self._last: float | None = None
        self._lock = threading.Lock()

    def starts_outage(self) -> bool:
        """Record a failure now; True when it starts a new outage."""
        now = self.clock()
        with self._lock:
            new_outage = self._last is None or now - self._last > self.quiet_seconds
            self._last = now
        return new_outage


class OutageLog:
    def __init__(self, quiet_seconds: float = QUIET_SECONDS, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = OutageWindow(quiet_seconds, clock=clock)
        self.folded = 0
        """Failures logged at DEBUG because an outage was already reported."""

    def failure(self, log: logging.Logger, message: str, *, transient: bool) -> None:
        """Log one failed request that will be retried; ``transient``: the server could not be reached or
        answered 5xx/429 (an outage), so it may be folded into the outage's first line."""
        if not transient:
            log.warning("%s", message)
        elif self.window.starts_outage():
            log.warning(
                "%s (the API server seems unreachable; further failures of this kind are logged at "
                "debug level until %.0fs pass without one)",
                message,
                self.window.quiet_seconds,
            )
        else:
            self.folded += 1
            log.debug("%s", message)


SHARED = OutageLog()
"""The process's: every reflector talks to the same API server."""
