"""Linux core scheduling through ``prctl(PR_SCHED_CORE, ...)`` (mainline since 5.14, CONFIG_SCHED_CORE).

The operations Koordinator's ``CoreSchedExtendedInterface`` offers (``pkg/koordlet/util/system/
core_sched_linux.go``): get a thread's cookie, create a new cookie for a task, and the two compound ones,
``clear`` (share the cookie 0 of a fresh thread to the targets) and ``assign`` (a fresh thread pulls the
source's cookie, then pushes it to the targets). A fresh thread starts with cookie 0, and changing its own
cookie never touches the agent's other threads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import threading
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Protocol, TypeVar

PR_SCHED_CORE = 62
PR_SCHED_CORE_GET = 0
PR_SCHED_CORE_CREATE = 1
PR_SCHED_CORE_SHARE_TO = 2
PR_SCHED_CORE_SHARE_FROM = 3

T = TypeVar("T")


class CoreSchedScope(IntEnum):
    """The pid type of a prctl call: a thread, a thread group (process) or a process group."""

    THREAD = 0
    THREAD_GROUP = 1
    PROCESS_GROUP = 2


class CoreSchedError(OSError):
    """A prctl call failed; ``errno`` says why (ESRCH: the task is gone)."""


class CoreSchedOps(Protocol):
    """What the CoreSched strategy needs; :class:`PrctlCoreSched` is the kernel, tests pass a fake."""

    def get(self, pid: int) -> int:
        """The cookie of thread ``pid`` (0 = default)."""
        ...

    def create(self, pid: int) -> None:
        """A new unique cookie for the whole thread group of ``pid``."""
        ...

    def clear(self, pids: Sequence[int]) -> list[int]:
        """Reset each thread group to cookie 0; returns the pids that failed."""
        ...

    def assign(self, source: int, pids: Sequence[int]) -> list[int]:
        """Give each thread group the cookie of thread ``source``; returns the pids that failed (all of them
        when ``source`` cannot be read)."""
        ...


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.prctl.restype = ctypes.c_int
    return libc


def _in_fresh_thread(work: Callable[[], T]) -> T:
    """Run ``work`` in a new OS thread (cookie 0) and return its result or raise its error."""
    box: dict[str, object] = {}

    def body() -> None:
        try:
            box["result"] = work()
        except BaseException as err:  # re-raised in the caller's thread
            box["error"] = err

    thread = threading.Thread(target=body, name="core-sched", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]


class PrctlCoreSched:
    """Core scheduling by prctl in this process."""

    def __init__(self) -> None:
        self._libc = _libc()

    def _prctl(self, cmd: int, pid: int, scope: CoreSchedScope, addr: int = 0) -> None:
        if self._libc.prctl(PR_SCHED_CORE, cmd, pid, int(scope), addr) != 0:
            code = ctypes.get_errno()
            raise CoreSchedError(code, f"prctl(PR_SCHED_CORE, {cmd}, pid {pid}): {os.strerror(code)}")

    def get(self, pid: int) -> int:
        cookie = ctypes.c_ulong(0)
        self._prctl(PR_SCHED_CORE_GET, pid, CoreSchedScope.THREAD, ctypes.addressof(cookie))
        return int(cookie.value)

    def create(self, pid: int) -> None:
        self._prctl(PR_SCHED_CORE_CREATE, pid, CoreSchedScope.THREAD_GROUP)

    def _share_to_each(self, pids: Sequence[int]) -> list[int]:
        failed = []
        for pid in pids:
            try:
                self._prctl(PR_SCHED_CORE_SHARE_TO, pid, CoreSchedScope.THREAD_GROUP)
            except CoreSchedError:
                failed.append(pid)
        return failed

    def clear(self, pids: Sequence[int]) -> list[int]:
        return _in_fresh_thread(lambda: self._share_to_each(pids))

    def assign(self, source: int, pids: Sequence[int]) -> list[int]:
        def work() -> list[int]:
            try:
                self._prctl(PR_SCHED_CORE_SHARE_FROM, source, CoreSchedScope.THREAD)
            except CoreSchedError:
                return list(pids)
            return self._share_to_each(pids)

        return _in_fresh_thread(work)


def core_sched_missing() -> str | None:
    """Koordinator's ``ProbeCoreSchedIfEnabled``: ``PR_SCHED_CORE_GET`` on the calling thread succeeds."""
    try:
        PrctlCoreSched().get(0)
    except CoreSchedError as err:
        why = {
            errno.EINVAL: "the kernel has no core scheduling (CONFIG_SCHED_CORE off or older than 5.14)",
            errno.ENODEV: "no SMT on this machine",
        }.get(err.errno or 0, err.strerror or "")
        return f"prctl(PR_SCHED_CORE) fails with {errno.errorcode.get(err.errno or 0, err.errno)}: {why}"
    except OSError as err:  # no libc
        return f"prctl unavailable: {err}"
    return None
