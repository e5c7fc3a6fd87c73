"""Unit-test isolation for process-wide state that the binaries' start-up code installs."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _restore_logging_and_hooks() -> Iterator[None]:
    """A test that runs a binary's ``main`` replaces the root logger's handlers (``basicConfig(force=True)``),
    installs log filters on them and the thread and unraisable hooks (``koord_scheduler.app.logs.install``);
    put them back after it, so the order tests run in does not decide what a later test's log output looks
    like (a leftover handler's filter folds a shared record's traceback before the test's handler sees it)."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    filters = {id(h): list(h.filters) for h in handlers}
    level = root.level
    thread_hook, unraisable_hook = threading.excepthook, sys.unraisablehook
    yield
    root.handlers[:] = handlers  # logging.basicConfig(force=True) replaces them
    for handler in handlers:
        handler.filters[:] = filters[id(handler)]
    root.setLevel(level)
    threading.excepthook, sys.unraisablehook = thread_hook, unraisable_hook
