"""Kernel knobs that are plain files: sysctls under ``<proc>/sys`` and switches under ``<sys>`` (Koordinator's
``SystemFile``/``ProcSysctl`` in ``pkg/koordlet/util/system/system_file.go``).

Reads return ``None`` for a file this kernel lacks; :meth:`KernelFiles.write_if_different` writes only when
the file holds another value (``True`` when it wrote) and raises ``OSError`` for a failed write.
"""

from __future__ import annotations

from pathlib import Path

SYSCTL_MIN_FREE_KBYTES = "vm/min_free_kbytes"
SYSCTL_WATERMARK_SCALE_FACTOR = "vm/watermark_scale_factor"
SYSCTL_SCHED_GROUP_IDENTITY = "kernel/sched_group_identity_enabled"
SYSCTL_SCHED_CORE = "kernel/sched_core"
SYSCTL_SCHED_IDLE_SAVER_WMARK = "kernel/sched_idle_saver_wmark"
SYS_MEMCG_REAP_BACKGROUND = "kernel/mm/memcg_reaper/reap_background"
SYS_PAGECACHE_LIMIT_ENABLED = "kernel/mm/pagecache_limit/enabled"


class KernelFiles:
    def __init__(self, proc_root: str | Path = "/proc", sys_root: str | Path = "/sys") -> None:
        self.proc_root = Path(proc_root)
        self.sys_root = Path(sys_root)

    def sysctl_path(self, name: str) -> Path:
        """``vm/min_free_kbytes`` → ``<proc>/sys/vm/min_free_kbytes``."""
        return self.proc_root / "sys" / name

    def sys_path(self, name: str) -> Path:
        return self.sys_root / name

    @staticmethod
    def read(path: Path) -> str | None:
        try:
            return path.read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read_int(self, path: Path) -> int | None:
        text = self.read(path)
        try:
            return None if text is None else int(text.split()[0])
        except (ValueError, IndexError):
            return None

    @staticmethod
    def exists(path: Path) -> bool:
        return path.is_file()

    def write_if_different(self, path: Path, value: str) -> bool:
        """Write ``value`` unless the file already holds it; ``FileNotFoundError`` when the knob is absent."""
        if self.read(path) == value.strip():
            return False
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such kernel file")
        path.write_text(value)
        return True
