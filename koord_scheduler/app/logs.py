"""One line per error at default verbosity, whoever logs it.

koord-scheduler's own code logs failures as one line (``framework.errors.log_failure``), but libraries it
runs (aiohttp, asyncio's loop) and the interpreter's last-resort hooks print tracebacks of their
own. :func:`install` makes every one of them a single line below ``-v 4``:

- a log record with a traceback is written as ``message: Type: text`` (the exception's last line);
  from ``-v 4`` on, the traceback is kept;
- an exception no task retrieved (asyncio's loop exception handler), one that ended a thread
  (``threading.excepthook``) or one raised where Python cannot raise it (``sys.unraisablehook``, e.g.
  in a finalizer) is logged through the same path instead of being printed raw.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Sequence
from typing import Any

from koord_scheduler.framework.errors import describe, log_failure

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


def install(verbosity: int, *, handlers: Sequence[logging.Handler] | None = None) -> None:
    """Below ``-v 4``, every handler of the root logger (or ``handlers``) gets :class:`OneLineErrors`; at
    any verbosity the thread and unraisable hooks log through ``logging`` (their tracebacks then follow
    the same rule)."""
    if verbosity < 4:
        for handler in logging.getLogger().handlers if handlers is None else handlers:
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
