"""One line per error at default verbosity, whoever logs it.

koord-scheduler's own code logs failures as one line (``framework.errors.log_failure``), but libraries it
runs (kopf, aiohttp, asyncio's loop) and the interpreter's last-resort hooks print tracebacks of their
own. :func:`install` makes every one of them a single line below ``-v 4``:

- a log record with a traceback is written as ``message: Type: text`` (the exception's last line);
  from ``-v 4`` on, the traceback is kept;
- kopf's "Request attempt #N/9 failed; will retry" errors, one per watch and attempt during an API-server
  outage (dozens a restart), become one warning per outage (:class:`RetryFolding`);
- an exception no task retrieved (asyncio's loop exception handler), one that ended a thread
  (``threading.excepthook``) or one raised where Python cannot raise it (``sys.unraisablehook``, e.g.
  in a finalizer) is logged through the same path instead of being printed raw.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from koord_scheduler.framework.errors import describe, log_failure
from kubeapi.outage_log import OutageWindow

log = logging.getLogger("koord-scheduler")


class OneLineErrors(logging.Filter):
    """Folds a record's traceback into its message: ``message: Type: text``; the record is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            record.msg = f"{record.getMessage()}: {describe(exc)}"
            record.args = None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


class RetryFolding(logging.Filter):
    """kopf logs each failed attempt of a request it will retry at ERROR (``Request attempt #2/9 failed;
    will retry: GET ... -> ClientConnectorError(...)``), for every watch: an API-server restart gives
    dozens of them, for a condition it recovers from. The first of an outage passes as a WARNING; the
    rest are dropped until ``quiet_seconds`` pass with none, after which the next one starts a new
    outage. The last attempt (kopf's "escalating") and everything else pass unchanged."""

    RETRY = re.compile(r"^Request attempt #\d+(?:/\d+)? failed; will retry: (?P<what>.*)$", re.DOTALL)

    def __init__(self, quiet_seconds: float = 60.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window = OutageWindow(quiet_seconds, clock=clock)
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("kopf"):
            return True
        match = self.RETRY.match(record.getMessage())
        if match is None:
            return True
        if not self.window.starts_outage():
            self.dropped += 1
            return False
        record.msg = (f"API server requests are failing; kopf retries them (further failures are not logged "
                      f"until {self.window.quiet_seconds:.0f}s pass without one): {match.group('what')}")
        record.args = None
        record.levelno = logging.WARNING
        record.levelname = logging.getLevelName(logging.WARNING)
        return True


def install(verbosity: int, *, handlers: Sequence[logging.Handler] | None = None) -> None:
    """Below ``-v 4``, every handler of the root logger (or ``handlers``) gets :class:`RetryFolding` and
    :class:`OneLineErrors`; at
    any verbosity the thread and unraisable hooks log through ``logging`` (their tracebacks then follow
    the same rule)."""
    if verbosity < 4:
        retries = RetryFolding()  # shared by the handlers: one outage, one line
        for handler in logging.getLogger().handlers if handlers is None else handlers:
            if not any(isinstance(f, RetryFolding) for f in handler.filters):
                handler.addFilter(retries)
            if not any(isinstance(f, OneLineErrors) for f in handler.filters):
                handler.addFilter(OneLineErrors())
    threading.excepthook = _thread_failed
    sys.unraisablehook = _unraisable


def loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's exception handler: an error no one awaited (a task that failed unobserved, a callback
    that raised), logged as one line naming the task."""
    message = str(context.get("message") or "unhandled error in the event loop")
    task = context.get("task") or context.get("future")
    if isinstance(task, asyncio.Task):
        message = f"{message} (task {task.get_name()})"
    exc = context.get("exception")
    if isinstance(exc, BaseException):
        log_failure(log, message, exc)
    else:
        log.error("%s", message)


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit or args.exc_value is None:
        return
    name = args.thread.name if args.thread is not None else "unknown"
    log_failure(log, f"thread {name} failed", args.exc_value)


def _unraisable(unraisable: Any) -> None:
    exc = unraisable.exc_value
    what = unraisable.err_msg or "exception ignored in"
    if unraisable.object is not None:
        obj = unraisable.object
        what = f"{what} {getattr(obj, '__qualname__', None) or type(obj).__name__}"
    if exc is None:
        log.error("%s", what)
    else:
        log_failure(log, what, exc)
