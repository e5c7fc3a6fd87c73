"""The Reservation controller's own event loop reports errors in one line; kopf's watch generators that
fail to close while the controller stops (seen after a lost lease) are an info line, not an error with
a traceback."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from koord_scheduler.scheduler.reservation_controller.operator import ReservationControllerThread

# What asyncio's loop hands its exception handler when shutdown_asyncgens cannot close a generator.
CLOSING = {
    "message": "an error occurred during closing of asynchronous generator <async_generator object infinite_watch>",
    "exception": RuntimeError("generator didn't stop after athrow()"),
    "asyncgen": object(),
}


def _controller(*, stopping: bool) -> ReservationControllerThread:
    none: Any = None  # never used: the thread is not started
    controller = ReservationControllerThread(none, none)
    controller._stop = asyncio.Event()
    if stopping:
        controller._stop.set()
    return controller


def _only(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    (record,) = caplog.records
    assert record.exc_info is None and "\n" not in record.getMessage()
    return record


@pytest.mark.parametrize(
    ("stopping", "context", "level", "want"),
    [
        (True, CLOSING, logging.INFO, "reservation controller stopping: an error occurred during closing of "
         "asynchronous generator <async_generator object infinite_watch>: RuntimeError: generator didn't stop "
         "after athrow()"),
        (False, CLOSING, logging.ERROR, "reservation controller: an error occurred during closing of "
         "asynchronous generator <async_generator object infinite_watch>: RuntimeError: generator didn't stop "
         "after athrow()"),
        (True, {"message": "Task exception was never retrieved", "exception": ValueError("x")}, logging.ERROR,
         "reservation controller: Task exception was never retrieved: ValueError: x"),
        (False, {"message": "Task was destroyed but it is pending!\ntask: <Task>"}, logging.ERROR,
         "reservation controller: Task was destroyed but it is pending!"),
    ],
    ids=["closing-while-stopping", "closing-while-running", "task-error", "no-exception"],
)
def test_loop_errors_are_one_line(
    caplog: pytest.LogCaptureFixture, stopping: bool, context: dict[str, Any], level: int, want: str
) -> None:
    caplog.set_level(logging.INFO)
    loop = asyncio.new_event_loop()
    try:
        _controller(stopping=stopping).loop_error(loop, context)
    finally:
        loop.close()
    record = _only(caplog)
    assert (record.levelno, record.getMessage()) == (level, want)
