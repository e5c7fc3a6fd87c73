"""Errors are one line at default verbosity, whoever logs them (koord_scheduler.app.logs,
framework.errors.log_failure); the traceback appears from -v 4 on."""

from __future__ import annotations

import asyncio
import gc
import io
import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from koord_scheduler.app import logs
from koord_scheduler.framework.errors import describe, log_failure

TRACEBACK = "Traceback (most recent call last)"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """A handler on the root logger writing to a buffer (the only one :func:`install` is given); it,
    the root level and the hooks are removed or restored afterwards."""
    root = logging.getLogger()
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved = (root.level, threading.excepthook, sys.unraisablehook)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        threading.excepthook, sys.unraisablehook = saved[1], saved[2]


def install(verbosity: int, buffer: io.StringIO) -> None:
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "stream", None) is buffer)
    logs.install(verbosity, handlers=[handler])


def _boom() -> None:
    raise ValueError("cpu out of range")


@pytest.mark.parametrize(
    ("exc", "want"),
    [
        (ValueError("bad"), "ValueError: bad"),
        (TimeoutError(), "TimeoutError"),
        (ConnectionRefusedError(111, "Connection refused"), "ConnectionRefusedError: [Errno 111] Connection refused"),
    ],
    ids=["message", "no-message", "os-error"],
)
def test_describe(exc: BaseException, want: str) -> None:
    assert describe(exc) == want


def test_a_library_traceback_is_folded_into_one_line(stream: io.StringIO) -> None:
    install(0, stream)
    try:
        _boom()
    except ValueError:
        logging.getLogger("aiohttp.server").exception("Error handling request %r", "/metrics")
    want = "ERROR aiohttp.server: Error handling request '/metrics': ValueError: cpu out of range"
    assert stream.getvalue().splitlines() == [want]


def test_the_traceback_is_kept_from_verbosity_4(stream: io.StringIO) -> None:
    install(4, stream)
    try:
        _boom()
    except ValueError:
        logging.getLogger("aiohttp.server").exception("Error handling request")
    assert TRACEBACK in stream.getvalue()


def test_log_failure_is_one_line_at_default_verbosity(stream: io.StringIO) -> None:
    install(0, stream)
    log_failure(logging.getLogger("koord_scheduler.test"), "sweep failed", ValueError("not a duration"))
    assert stream.getvalue() == "ERROR koord_scheduler.test: sweep failed: ValueError: not a duration\n"


def test_log_failure_adds_the_traceback_at_debug_level(stream: io.StringIO) -> None:
    install(4, stream)
    logging.getLogger().setLevel(logging.DEBUG)
    try:
        _boom()
    except ValueError as exc:
        log_failure(logging.getLogger("koord_scheduler.test"), "sweep failed", exc)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "ERROR koord_scheduler.test: sweep failed: ValueError: cpu out of range"
    assert lines[1] == "DEBUG koord_scheduler.test: sweep failed: traceback" and lines[2] == TRACEBACK + ":"


def test_a_thread_that_dies_is_one_line(stream: io.StringIO) -> None:
    install(0, stream)
    thread = threading.Thread(target=_boom, name="reservation-controller")
    thread.start()
    thread.join()
    out = stream.getvalue()
    assert out == "ERROR koord-scheduler: thread reservation-controller failed: ValueError: cpu out of range\n"


def test_an_unretrieved_task_error_is_one_line_naming_the_task(stream: io.StringIO) -> None:
    install(0, stream)

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(logs.loop_exception_handler)

        async def fail() -> None:
            _boom()

        task = asyncio.get_running_loop().create_task(fail(), name="watch-nodes")
        await asyncio.sleep(0.01)
        assert task.done()
        del task
        gc.collect()  # the loop reports "Task exception was never retrieved" when the task is collected

    asyncio.run(main())
    out = stream.getvalue()
    assert "(task watch-nodes): ValueError: cpu out of range" in out
    assert TRACEBACK not in out and len(out.splitlines()) == 1


def test_an_unraisable_error_is_one_line(stream: io.StringIO) -> None:
    install(0, stream)

    class Finalizer:
        def __del__(self) -> None:
            _boom()

    Finalizer()
    gc.collect()
    out = stream.getvalue()
    assert "Finalizer" in out and out.endswith("ValueError: cpu out of range\n"), out
    assert TRACEBACK not in out


@pytest.mark.parametrize(("verbosity", "traceback"), [(0, False), (2, False), (4, True)], ids=["v0", "v2", "v4"])
def test_koord_scheduler_logging_setup_installs_it(
    capsys: pytest.CaptureFixture[str], verbosity: int, traceback: bool
) -> None:
    from koord_scheduler.app.serve import _setup_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level, threading.excepthook, sys.unraisablehook)
    try:
        _setup_logging(verbosity)
        try:
            _boom()
        except ValueError:
            logging.getLogger("aiohttp.server").exception("Error handling request")
        err = capsys.readouterr().err
    finally:
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
        threading.excepthook, sys.unraisablehook = saved[2], saved[3]
    assert "ERROR aiohttp.server: Error handling request" in err
    assert (TRACEBACK in err) is traceback
    if not traceback:
        assert err.strip().endswith("Error handling request: ValueError: cpu out of range") and err.count("\n") == 1
