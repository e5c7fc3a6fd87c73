"""Giving freed heap memory back to the operating system after the list+watch threads list again.

After a kube-apiserver restart each list+watch thread lists its kind again: the response and its
decoded JSON are held for a moment and freed. glibc's malloc keeps freed memory in the arena of the
thread that used it (each list+watch thread has its own), so without help the resident size grows by
a step at every restart although the live data does not. ``malloc_trim(0)`` walks every arena and
releases the free pages. A :class:`HeapTrimmer` coalesces the requests of the threads: the trim runs
once, ``delay`` seconds after the first request of a burst, on a timer thread. Only where the C
library is glibc; elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

TRIM_DELAY_SECONDS = 5.0


def glibc_malloc_trim() -> Callable[[], None] | None:
    """``malloc_trim(0)`` of the process's glibc, or None where the C library is another one."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def call() -> None:
        trim(0)

    return call


class HeapTrimmer:
    """Runs ``trim`` ``delay`` seconds after the first of a burst of :meth:`request` calls, from any
    thread. ``trim`` None (not glibc) makes every request a no-op."""

    def __init__(self, trim: Callable[[], None] | None, *, delay: float = TRIM_DELAY_SECONDS) -> None:
        self._trim = trim
        self.delay = delay
        self.trims = 0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def request(self) -> None:
        if self._trim is None:
            return
        with self._lock:
            if self._timer is not None:
                return  # the trim already due covers this request too
            self._timer = threading.Timer(self.delay, self._run)
            self._timer.daemon = True
            self._timer.name = "heap-trim"
            self._timer.start()

    def _run(self) -> None:
        with self._lock:
            self._timer = None
        if self._trim is None:
            return
        try:
            self._trim()
        except OSError as exc:
            log.debug("malloc_trim failed: %s", exc)
            return
        self.trims += 1

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None


DEFAULT_TRIMMER = HeapTrimmer(glibc_malloc_trim())
"""The process's trimmer (glibc's ``malloc_trim`` where there is one)."""


def request_trim() -> None:
    """Ask the process's trimmer for a trim (see :class:`HeapTrimmer`)."""
    DEFAULT_TRIMMER.request()
