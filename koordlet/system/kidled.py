"""kidled, the Anolis/Alibaba kernel's idle-page scanner (``Documentation/vm/kidled.rst`` of the Alibaba
cloud kernel), as Koordinator's ``pkg/koordlet/util/system/kidled_util.go`` reads and starts it.

``<sys>/kernel/mm/kidled/{scan_period_in_seconds,use_hierarchy}`` turn it on; each memory cgroup then has
``memory.idle_page_stats``: header lines (``# version: 1.0``, ``# scan_period_in_seconds: 120``, ``# buckets:
1,2,5,15,30,60,120,240``) and one row per page kind (``csei``, ``dsei``, ``cfei``, ...) with the bytes idle for
each bucket of scan periods. Cold = the file-backed kinds ``cfei``, ``dfei``, ``cfui``, ``dfui`` idle for at
least ``cold boundary`` buckets (5 by default: 60 scan periods or more).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

DEFAULT_SCAN_PERIOD_SECONDS = 5
DEFAULT_USE_HIERARCHY = 1
DEFAULT_COLD_BOUNDARY = 5
COLD_KINDS = ("cfei", "dfei", "cfui", "dfui")


class IdlePageStatsError(ValueError):
    """``memory.idle_page_stats`` is not in kidled's format."""


def parse_idle_page_stats(text: str) -> dict[str, list[int]]:
    """Each row ``kind v0 v1 ...`` → {kind: [v0, v1, ...]}; header lines are skipped. Koordinator's parser
    insists on exactly 31 lines; this one needs at least the cold kinds."""
    rows: dict[str, list[int]] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        try:
            rows[fields[0]] = [int(v) for v in fields[1:]]
        except ValueError:
            raise IdlePageStatsError(f"bad row {line.strip()!r}") from None
    missing = [k for k in COLD_KINDS if k not in rows]
    if missing:
        raise IdlePageStatsError(f"no {', '.join(missing)} rows")
    return rows


def cold_page_bytes(stats: Mapping[str, list[int]], *, boundary: int = DEFAULT_COLD_BOUNDARY) -> int:
    """``GetColdPageTotalBytes``: the cold kinds summed from bucket ``boundary`` on."""
    return sum(sum(stats.get(kind, [])[boundary:]) for kind in COLD_KINDS)


class Kidled:
    def __init__(self, sys_root: str | Path = "/sys") -> None:
        self.dir = Path(sys_root) / "kernel" / "mm" / "kidled"

    def supported(self) -> bool:
        return (self.dir / "scan_period_in_seconds").is_file() and (self.dir / "use_hierarchy").is_file()

    def start(
        self, *, scan_period_seconds: int = DEFAULT_SCAN_PERIOD_SECONDS, use_hierarchy: int = DEFAULT_USE_HIERARCHY
    ) -> None:
        """Koordinator's collector ``Enabled``: write the scan period and ``use_hierarchy`` (raises OSError)."""
        (self.dir / "scan_period_in_seconds").write_text(str(scan_period_seconds))
        (self.dir / "use_hierarchy").write_text(str(use_hierarchy))
