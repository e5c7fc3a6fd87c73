"""One-line, rate-limited logging of repeated failures (an API outage, a collector that keeps failing).

During an outage every write fails the same way; logging a traceback per failure buries everything else.
:class:`FailureLog` logs the first failure of a kind as one warning line, then at most one line per
``interval`` seconds with the count of failures it held back, and one info line when the kind succeeds again.
The traceback is attached only when the logger is enabled for DEBUG (``-vv`` / ``--v=5``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_INTERVAL_SECONDS = 60.0


def describe(err: BaseException) -> str:
    """A one-line description: ``HTTP 503 Service Unavailable`` for API errors, the underlying error of a
    transport failure that was retried, else ``Type: first line``."""
    status = getattr(err, "status", None)
    if isinstance(status, int) and status > 0:
        reason = str(getattr(err, "reason", "") or "").strip()
        return f"HTTP {status} {reason}".strip()
    cause = getattr(err, "reason", None)
    if isinstance(cause, BaseException) and cause is not err:
        return describe(cause)  # urllib3's MaxRetryError wraps what actually went wrong
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text and text[0] else type(err).__name__


@dataclass(slots=True)
class _Kind:
    last_logged: float
    held_back: int = 0


class FailureLog:
    """Per-kind rate limit for failure lines; thread safe (the API thread and the event loop share one)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = DEFAULT_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._kinds: dict[str, _Kind] = {}
        self._lock = threading.Lock()
        self.lines = 0
        """Warning lines written (tests and metrics)."""

    def failed(self, kind: str, err: BaseException, *, level: int = logging.WARNING) -> bool:
        """Record one failure of ``kind`` (e.g. ``"NodeMetric status write"``); returns whether a line was
        logged for it."""
        now = self.clock()
        with self._lock:
            state = self._kinds.get(kind)
            if state is not None and now - state.last_logged < self.interval:
                state.held_back += 1
                return False
            held_back = state.held_back if state is not None else 0
            self._kinds[kind] = _Kind(now)
            self.lines += 1
        suffix = f" ({held_back} more since the last report)" if held_back else ""
        self.logger.log(
            level,
            "%s failed: %s%s",
            kind,
            describe(err),
            suffix,
            exc_info=(type(err), err, err.__traceback__) if self.logger.isEnabledFor(logging.DEBUG) else None,
        )
        return True

    def succeeded(self, kind: str) -> None:
        """``kind`` works again: one info line if it had failed, and the next failure is logged at once."""
        with self._lock:
            state = self._kinds.pop(kind, None)
        if state is not None:
            self.logger.info("%s works again", kind)
