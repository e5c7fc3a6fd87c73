"""Counting cycles and instructions of a cgroup with ``perf_event_open`` (Koordinator's
``pkg/koordlet/util/perf``, which wraps ``hodgesds/perf-utils``).

One counter per (event, CPU) in cgroup mode (``PERF_FLAG_PID_CGROUP``: ``pid`` is an open fd of the
container's ``perf_event`` cgroup directory). Each read is scaled by ``time_enabled / time_running``, as
Koordinator scales multiplexed counters, and the per-CPU values are summed. The same syscall wrapper also
counts one task (``pid`` >= 0), which the tests use where the machine has no perf_event cgroups.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_ATTR_SIZE = 128
_ATTR_DISABLED = 1 << 0
_ATTR_EXCLUDE_HV = 1 << 6
_IOC_ENABLE = 0x2400
_IOC_DISABLE = 0x2401
_IOC_RESET = 0x2403

_SYSCALL_NUMBERS = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}

HARDWARE_CPI_EVENTS = ((PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES), (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS))


class PerfError(OSError):
    """perf_event_open or a read failed; ``errno`` says why (ENOENT: no such event on this PMU)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _attr(event_type: int, config: int) -> ctypes.Array[ctypes.c_char]:
    raw = struct.pack(
        "<IIQQQQQ",
        event_type,
        PERF_ATTR_SIZE,
        config,
        0,  # sample_period
        0,  # sample_type
        PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
        _ATTR_DISABLED | _ATTR_EXCLUDE_HV,
    )
    return ctypes.create_string_buffer(raw.ljust(PERF_ATTR_SIZE, b"\0"), PERF_ATTR_SIZE)


def perf_event_open(event_type: int, config: int, *, pid: int, cpu: int, cgroup: bool = False) -> int:
    """A disabled counter; returns its fd. ``cgroup``: ``pid`` is a cgroup directory fd."""
    number = _SYSCALL_NUMBERS.get(platform.machine())
    if number is None:
        raise PerfError(errno.ENOSYS, f"perf_event_open: unknown syscall number on {platform.machine()}")
    libc = _libc()
    attr = _attr(event_type, config)
    flags = PERF_FLAG_FD_CLOEXEC | (PERF_FLAG_PID_CGROUP if cgroup else 0)
    fd = int(libc.syscall(number, attr, ctypes.c_int(pid), ctypes.c_int(cpu), ctypes.c_int(-1), ctypes.c_ulong(flags)))
    if fd < 0:
        code = ctypes.get_errno()
        raise PerfError(code, f"perf_event_open(type {event_type}, config {config}): {os.strerror(code)}")
    return fd


def _ioctl(fd: int, request: int) -> None:
    if _libc().ioctl(ctypes.c_int(fd), ctypes.c_ulong(request), ctypes.c_ulong(0)) != 0:
        code = ctypes.get_errno()
        raise PerfError(code, f"perf ioctl {request:#x}: {os.strerror(code)}")


def read_scaled(fd: int) -> float:
    """The counter's value scaled for multiplexing: ``value * enabled / running`` (value when not scaled)."""
    value, enabled, running = (int(x) for x in struct.unpack("<QQQ", os.read(fd, 24)))
    if enabled and running:
        return value * enabled / running
    return float(value)


@dataclass
class CounterSet:
    """Open counters for one target, one fd per (event, CPU); start, read and close them together."""

    events: tuple[tuple[int, int], ...]
    fds: dict[tuple[int, int], list[int]]

    @classmethod
    def open(
        cls,
        events: Sequence[tuple[int, int]],
        *,
        pid: int,
        cpus: Sequence[int],
        cgroup: bool = False,
    ) -> CounterSet:
        """Open every (event, CPU); on failure close what was opened and raise."""
        out = cls(tuple(events), {e: [] for e in events})
        try:
            for event in events:
                for cpu in cpus:
                    out.fds[event].append(perf_event_open(*event, pid=pid, cpu=cpu, cgroup=cgroup))
        except PerfError:
            out.close()
            raise
        return out

    def start(self) -> None:
        for fds in self.fds.values():
            for fd in fds:
                _ioctl(fd, _IOC_RESET)
                _ioctl(fd, _IOC_ENABLE)

    def read(self) -> dict[tuple[int, int], float]:
        """Each event summed over CPUs."""
        return {event: sum(read_scaled(fd) for fd in fds) for event, fds in self.fds.items()}

    def close(self) -> None:
        for fds in self.fds.values():
            for fd in fds:
                os.close(fd)
            fds.clear()


def perf_cgroup_dir(cgroup_root: Path, rel_dir: str, *, v2: bool) -> Path:
    """The directory whose fd names a cgroup to perf: v1 ``<root>/perf_event/<rel>``, v2 ``<root>/<rel>``."""
    return cgroup_root / rel_dir if v2 else cgroup_root / "perf_event" / rel_dir


def perf_hardware_missing(cgroup_root: Path, *, v2: bool) -> str | None:
    """Hardware cycles can be counted (a PMU this kernel exposes) and cgroups can be named to perf."""
    if not v2 and not (cgroup_root / "perf_event").is_dir():
        return f"no perf_event cgroup controller at {cgroup_root / 'perf_event'}"
    try:
        fd = perf_event_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, pid=0, cpu=-1)
    except PerfError as err:
        name = errno.errorcode.get(err.errno or 0, str(err.errno))
        return f"perf_event_open(cycles) fails with {name}: no hardware PMU events (a VM without a vPMU?)"
    os.close(fd)
    return None


def open_cgroup_counters(cgroup_dir: Path, cpus: Sequence[int], events: Sequence[tuple[int, int]]) -> CounterSet:
    """Counters of every task in a cgroup, one per (event, CPU): Koordinator's ``GetContainerPerfCollector``.
    The directory fd is needed only to open the counters (each holds its own reference to the cgroup)."""
    dir_fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return CounterSet.open(events, pid=dir_fd, cpus=cpus, cgroup=True)
    finally:
        os.close(dir_fd)
