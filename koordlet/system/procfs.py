"""``ProcFS``: reads of ``/proc`` (node CPU ticks, meminfo, PSI), under an injected root."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from koordlet.system.cgroupfs import parse_pressure


@dataclass(frozen=True, slots=True)
class CPUTicks:
    """The ``cpu`` line of ``/proc/stat`` in USER_HZ ticks."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def busy(self) -> int:
        """Koordinator's node usage ticks: user+nice+system+irq+softirq (idle, iowait, steal excluded)."""
        return self.user + self.nice + self.system + self.irq + self.softirq


class ProcFS:
    def __init__(self, root: str | Path = "/proc", *, clock_ticks: int | None = None) -> None:
        self.root = Path(root)
        self.clock_ticks = clock_ticks or os.sysconf("SC_CLK_TCK")

    def _read(self, rel: str) -> str | None:
        try:
            return (self.root / rel).read_text()
        except OSError:
            return None

    def oom_score_adj(self, pid: int) -> int | None:
        """``/proc/<pid>/oom_score_adj``; ``None`` when the process is gone or unreadable."""
        text = self._read(f"{pid}/oom_score_adj")
        try:
            return None if text is None else int(text)
        except ValueError:
            return None

    def set_oom_score_adj(self, pid: int, value: int) -> None:
        """Write ``/proc/<pid>/oom_score_adj``. Raises ``OSError`` (gone, read-only ``/proc``, or lowering a
        score without ``CAP_SYS_RESOURCE``)."""
        (self.root / str(pid) / "oom_score_adj").write_text(f"{value}\n")

    def cpu_ticks(self) -> CPUTicks | None:
        text = self._read("stat")
        if text is None:
            return None
        for line in text.splitlines():
            if line.startswith("cpu "):
                values = [int(v) for v in line.split()[1:9]]
                values += [0] * (8 - len(values))
                return CPUTicks(*values)
        return None

    def num_cpus(self) -> int:
        text = self._read("stat") or ""
        count = sum(1 for line in text.splitlines() if line.startswith("cpu") and line[3:4].isdigit())
        return count or (os.cpu_count() or 1)

    def meminfo(self) -> dict[str, int] | None:
        """``/proc/meminfo`` in bytes (the file's kB  x 1024)."""
        text = self._read("meminfo")
        if text is None:
            return None
        out: dict[str, int] = {}
        for line in text.splitlines():
            key, _, rest = line.partition(":")
            fields = rest.split()
            if fields:
                out[key] = int(fields[0]) * (1024 if len(fields) > 1 and fields[1] == "kB" else 1)
        return out

    def memory_used_bytes(self) -> int | None:
        """Koordinator's node memory: MemTotal - MemAvailable."""
        info = self.meminfo()
        if info is None or "MemTotal" not in info or "MemAvailable" not in info:
            return None
        return info["MemTotal"] - info["MemAvailable"]

    def memory_used_with_page_cache_bytes(self) -> int | None:
        """Koordinator's page-cache collector node memory: MemTotal - MemFree (page cache included)."""
        info = self.meminfo()
        if info is None or "MemTotal" not in info or "MemFree" not in info:
            return None
        return info["MemTotal"] - info["MemFree"]

    def pressure(self, resource: str) -> dict[str, float] | None:
        text = self._read(f"pressure/{resource}")
        return None if text is None else parse_pressure(text)
