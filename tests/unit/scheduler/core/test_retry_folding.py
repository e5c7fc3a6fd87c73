"""kopf's per-attempt retry errors during an API-server outage become one warning per outage
(koord_scheduler.app.logs.RetryFolding)."""

from __future__ import annotations

import io
import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from koord_scheduler.app import logs

WATCH = "GET https://10.0.0.1:6443/apis/scheduling.koordinator.sh/v1alpha1/reservations?watch=true"
REFUSED = "ClientConnectorError(ConnectionKey(host='10.0.0.1', port=6443), ConnectionRefusedError(111))"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO, logs.RetryFolding, Clock]]:
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    clock = Clock()
    folding = logs.RetryFolding(60.0, clock=clock)
    handler.addFilter(folding)
    logger = logging.getLogger("kopf._cogs.clients.watching")
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, buffer, folding, clock
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _retry(logger: logging.Logger, attempt: int) -> None:
    logger.error(f"Request attempt #{attempt}/9 failed; will retry: {WATCH} -> {REFUSED}")


def test_one_warning_per_outage(logged: tuple[logging.Logger, io.StringIO, logs.RetryFolding, Clock]) -> None:
    logger, buffer, folding, clock = logged
    for attempt in (1, 2, 3, 4):  # one outage: attempts a few seconds apart
        _retry(logger, attempt)
        clock.now += 3
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("WARNING kopf._cogs.clients.watching: API server requests are failing")
    assert lines[0].endswith(f"{WATCH} -> {REFUSED}")
    assert folding.dropped == 3

    clock.now += 61  # a quiet minute: the next failure is a new outage
    _retry(logger, 1)
    _retry(logger, 2)
    assert len(buffer.getvalue().splitlines()) == 2


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("kopf._cogs.clients.watching", f"Request attempt #9/9 failed; escalating: {WATCH} -> {REFUSED}"),
        ("kopf._cogs.clients.watching", "Request attempt #2/9 failed; SSL closed; will re-authenticate: GET /"),
        ("kopf.objects", "Handler 'reservation_events' failed with an exception. Will retry."),
        ("kubeapi.reflector", f"Request attempt #1/9 failed; will retry: {WATCH}"),
    ],
    ids=["escalating", "re-authenticate", "other-kopf-error", "not-kopf"],
)
def test_everything_else_passes_unchanged(name: str, message: str) -> None:
    folding = logs.RetryFolding(60.0, clock=Clock())
    for _ in range(3):
        record = logging.LogRecord(name, logging.ERROR, __file__, 1, message, None, None)
        assert folding.filter(record)
        assert record.levelno == logging.ERROR
        assert record.getMessage() == message
    assert folding.dropped == 0


def test_install_adds_one_shared_folding_below_v4() -> None:
    hooks = (threading.excepthook, sys.unraisablehook)  # install() replaces them
    try:
        handlers = [logging.StreamHandler(io.StringIO()), logging.StreamHandler(io.StringIO())]
        logs.install(2, handlers=handlers)
        logs.install(2, handlers=handlers)  # idempotent
        foldings = [[f for f in h.filters if isinstance(f, logs.RetryFolding)] for h in handlers]
        assert [len(f) for f in foldings] == [1, 1]
        assert foldings[0][0] is foldings[1][0]

        verbose = logging.StreamHandler(io.StringIO())
        logs.install(4, handlers=[verbose])
        assert not any(isinstance(f, logs.RetryFolding) for f in verbose.filters)
    finally:
        threading.excepthook, sys.unraisablehook = hooks
