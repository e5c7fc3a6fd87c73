"""``CgroupFS``: every read and write of a cgroup file goes through one of these (injected, never global).

A missing cgroup (the pod is gone) or a file this kernel does not have is a normal outcome: reads return
``None`` and writes return a :class:`WriteResult` saying so. Nothing here raises for them, so a collector
loop never dies because a pod went away between listing and reading.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from dataclasses import dataclass
from enum import Enum, IntEnum
from pathlib import Path

from koordlet.system.layout import CgroupDriver, CgroupLayout, default_kubepods_dir
from koordlet.system.resources import (
    RESOURCES,
    CgroupResource,
    format_cpu_max,
    format_v2_limit,
    parse_cpu_max,
    parse_cpuset,
    parse_flat_keyed,
    parse_flat_keyed_raw,
    parse_limit,
    shares_to_weight,
    weight_to_shares,
)

CGROUP2_SUPER_MAGIC = 0x63677270


class CgroupVersion(IntEnum):
    V1 = 1
    V2 = 2


def statfs_magic(path: str | Path) -> int | None:
    """``statfs(path).f_type``, or ``None`` when the call fails (path missing, no libc)."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on x86_64/arm64
    if libc.statfs(os.fsencode(str(path)), buf) != 0:
        return None
    return int.from_bytes(buf.raw[: ctypes.sizeof(ctypes.c_long)], "little", signed=True)


def detect_cgroup_version(root: str | Path) -> CgroupVersion:
    """v2 iff ``statfs(root).f_type == CGROUP2_SUPER_MAGIC``; a hybrid host (tmpfs root) counts as v1."""
    return CgroupVersion.V2 if statfs_magic(root) == CGROUP2_SUPER_MAGIC else CgroupVersion.V1


def detect_cgroup_driver(
    root: str | Path, version: CgroupVersion, kubepods_dir: str | None = None
) -> CgroupDriver | None:
    """The driver whose kubepods dir exists: ``kubepods.slice`` → systemd, ``kubepods`` → cgroupfs, else None.

    With ``kubepods_dir`` (kubelet's kubepods under a ``cgroupRoot``, e.g. ``pykoord-1/kubepods``) only that
    dir is looked at, and its name says the driver: a ``.slice`` is systemd's, anything else cgroupfs's.
    """
    base = Path(root) / ("cpu" if version is CgroupVersion.V1 else "")
    if kubepods_dir:
        rel = kubepods_dir.strip("/")
        if not (base / rel).is_dir():
            return None
        return CgroupDriver.SYSTEMD if rel.rsplit("/", 1)[-1].endswith(".slice") else CgroupDriver.CGROUPFS
    if (base / "kubepods.slice").is_dir():
        return CgroupDriver.SYSTEMD
    if (base / "kubepods").is_dir():
        return CgroupDriver.CGROUPFS
    return None


class WriteStatus(Enum):
    WRITTEN = "written"
    MISSING_CGROUP = "missing-cgroup"
    UNSUPPORTED = "unsupported"
    INVALID = "invalid"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class WriteResult:
    status: WriteStatus
    path: str = ""
    message: str = ""

    @property
    def ignorable(self) -> bool:
        """A missing cgroup or an unsupported file is expected on some nodes; callers log quietly."""
        return self.status in (WriteStatus.MISSING_CGROUP, WriteStatus.UNSUPPORTED)


@dataclass(frozen=True, slots=True)
class CPUStat:
    """Throttling counters; ``throttled_ns`` is v1 ``throttled_time`` or v2 ``throttled_usec`` x 1000."""

    nr_periods: int
    nr_throttled: int
    throttled_ns: int


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """``memory.stat`` with v1 ``total_*`` and v2 names folded into one set (bytes, hierarchical)."""

    anon: int
    file: int
    active_anon: int
    inactive_anon: int
    active_file: int
    inactive_file: int
    unevictable: int

    @property
    def usage_without_page_cache(self) -> int:
        """Koordinator's pod/container memory: ``inactive_anon + active_anon + unevictable``."""
        return self.inactive_anon + self.active_anon + self.unevictable

    @property
    def usage_with_page_cache(self) -> int:
        return self.usage_without_page_cache + self.active_file + self.inactive_file


class CgroupFS:
    """cgroup files under ``root`` (``/sys/fs/cgroup``), for one version and driver.

    ``kubepods_dir`` is the kubepods cgroup relative to each mount; default from the driver.
    """

    def __init__(
        self,
        root: str | Path,
        version: CgroupVersion,
        driver: CgroupDriver,
        kubepods_dir: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.version = version
        self.driver = driver
        self.layout = CgroupLayout.for_driver(driver, kubepods_dir or default_kubepods_dir(driver))
        self._prefix = str(self.root).rstrip("/") + "/"

    @classmethod
    def detect(cls, root: str | Path = "/sys/fs/cgroup", kubepods_dir: str | None = None) -> CgroupFS:
        """Version by statfs; driver by which kubepods dir exists, else systemd (Koordinator's fallback)."""
        version = detect_cgroup_version(root)
        driver = detect_cgroup_driver(root, version, kubepods_dir) or CgroupDriver.SYSTEMD
        return cls(root, version, driver, kubepods_dir)

    def __repr__(self) -> str:
        kubepods = self.layout.kubepods_dir
        return f"CgroupFS({str(self.root)!r}, v{int(self.version)}, {self.driver.value}, {kubepods!r})"

    # -- paths ---------------------------------------------------------------------------------

    def dir_path(self, subsystem: str, rel_dir: str) -> Path:
        """Absolute directory of a cgroup for a v1 controller (ignored on v2)."""
        if self.version is CgroupVersion.V2:
            return self.root / rel_dir
        return self.root / subsystem / rel_dir

    def file_path(self, resource: str | CgroupResource, rel_dir: str) -> Path | None:
        """Absolute file for a resource, or ``None`` if this cgroup version has no such file."""
        path = self._file(RESOURCES[resource] if isinstance(resource, str) else resource, rel_dir)
        return None if path is None else Path(path)

    def _file(self, res: CgroupResource, rel_dir: str) -> str | None:
        # plain strings: pathlib costs more than the read itself on the collector's hot path
        if self.version is CgroupVersion.V2:
            return None if res.v2_file is None else f"{self._prefix}{rel_dir}/{res.v2_file}"
        return f"{self._prefix}{res.v1_subsystem}/{rel_dir}/{res.name}"

    def exists(self, rel_dir: str, subsystem: str = "cpu") -> bool:
        return self.dir_path(subsystem, rel_dir).is_dir()

    def list_children(self, rel_dir: str, subsystem: str = "cpu") -> list[str]:
        """Names of child cgroups (``[]`` when the cgroup does not exist)."""
        try:
            return [e.name for e in os.scandir(self.dir_path(subsystem, rel_dir)) if e.is_dir()]
        except OSError:
            return []

    # -- raw access ----------------------------------------------------------------------------

    def read_raw(self, resource: str, rel_dir: str) -> str | None:
        """The file's text, or ``None`` if the cgroup or the file does not exist."""
        path = self._file(RESOURCES[resource], rel_dir)
        if path is None:
            return None
        try:
            fd = os.open(path, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        except OSError as err:
            if err.errno in (errno.ENODEV, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOENT):
                return None
            raise
        finally:
            os.close(fd)
        return b"".join(chunks).decode()

    def write(self, resource: str, rel_dir: str, value: str) -> WriteResult:
        """Write ``value`` in v1 terms (``-1`` = unlimited, shares), converted for v2.

        Never raises for I/O: the result says what happened.
        """
        res = RESOURCES.get(resource)
        if res is None:
            return WriteResult(WriteStatus.UNSUPPORTED, message=f"unknown resource {resource}")
        path = self.file_path(res, rel_dir)
        if path is None:
            return WriteResult(WriteStatus.UNSUPPORTED, message=f"{resource} has no cgroup v2 file")
        if not path.parent.is_dir():
            return WriteResult(WriteStatus.MISSING_CGROUP, str(path))
        if not path.exists():
            return WriteResult(WriteStatus.UNSUPPORTED, str(path), "file not present on this kernel")
        try:
            text = self._to_file_format(res, rel_dir, value)
        except ValueError as err:
            return WriteResult(WriteStatus.INVALID, str(path), str(err))
        try:
            with open(path, "w") as f:
                f.write(text)
        except FileNotFoundError:
            return WriteResult(WriteStatus.MISSING_CGROUP, str(path))
        except OSError as err:
            return WriteResult(WriteStatus.FAILED, str(path), os.strerror(err.errno or 0))
        return WriteResult(WriteStatus.WRITTEN, str(path))

    def _to_file_format(self, res: CgroupResource, rel_dir: str, value: str) -> str:
        if res.name == "cpuset.cpus":
            parse_cpuset(value)
            return value
        if res.valid_range is not None:
            number = int(value)
            lo, hi = res.valid_range
            if not lo <= number <= hi:
                raise ValueError(f"{res.name}={number} outside [{lo}, {hi}]")
        if self.version is CgroupVersion.V1:
            return value
        if res.name == "cpu.shares":
            return str(shares_to_weight(int(value)))
        if res.name == "cpu.cfs_quota_us":
            return format_v2_limit(int(value))
        if res.name == "cpu.cfs_period_us":
            current = self.read_raw("cpu.cfs_quota_us", rel_dir)
            quota = parse_cpu_max(current)[0] if current else -1
            return format_cpu_max(quota, int(value))
        if res.name in ("memory.limit_in_bytes", "memory.high"):
            return format_v2_limit(int(value))
        return value

    # -- typed reads ---------------------------------------------------------------------------

    def cpu_usage_ns(self, rel_dir: str) -> int | None:
        """Cumulative CPU time in ns: v1 ``cpuacct.usage``, v2 ``cpu.stat usage_usec`` x 1000."""
        text = self.read_raw("cpuacct.usage", rel_dir)
        if text is None:
            return None
        if self.version is CgroupVersion.V1:
            return int(text)
        usec = parse_flat_keyed(text).get("usage_usec")
        return None if usec is None else usec * 1000

    def cpu_stat(self, rel_dir: str) -> CPUStat | None:
        text = self.read_raw("cpu.stat", rel_dir)
        if text is None:
            return None
        kv = parse_flat_keyed(text)
        throttled = kv["throttled_time"] if "throttled_time" in kv else kv.get("throttled_usec", 0) * 1000
        return CPUStat(kv.get("nr_periods", 0), kv.get("nr_throttled", 0), throttled)

    def memory_stat(self, rel_dir: str) -> MemoryStat | None:
        text = self.read_raw("memory.stat", rel_dir)
        if text is None:
            return None
        kv = parse_flat_keyed_raw(text)
        prefix = "total_" if self.version is CgroupVersion.V1 else ""
        anon, file = ("rss", "cache") if self.version is CgroupVersion.V1 else ("anon", "file")

        def get(key: str) -> int:
            return int(kv.get(prefix + key, 0))

        return MemoryStat(
            anon=get(anon),
            file=get(file),
            active_anon=get("active_anon"),
            inactive_anon=get("inactive_anon"),
            active_file=get("active_file"),
            inactive_file=get("inactive_file"),
            unevictable=get("unevictable"),
        )

    def memory_usage_bytes(self, rel_dir: str) -> int | None:
        """v1 ``memory.usage_in_bytes`` / v2 ``memory.current`` (includes page cache)."""
        text = self.read_raw("memory.usage_in_bytes", rel_dir)
        return None if text is None else int(text)

    def memory_limit_bytes(self, rel_dir: str) -> int | None:
        """-1 for unlimited (v2 ``max``); v1's huge "unlimited" number is returned as read."""
        text = self.read_raw("memory.limit_in_bytes", rel_dir)
        return None if text is None else parse_limit(text)

    def cfs_quota(self, rel_dir: str) -> tuple[int, int] | None:
        """(quota us, -1 unlimited; period us): v1 ``cfs_quota_us``/``cfs_period_us``, v2 ``cpu.max``."""
        if self.version is CgroupVersion.V2:
            text = self.read_raw("cpu.cfs_quota_us", rel_dir)
            return None if text is None else parse_cpu_max(text)
        quota = self.read_raw("cpu.cfs_quota_us", rel_dir)
        period = self.read_raw("cpu.cfs_period_us", rel_dir)
        if quota is None or period is None:
            return None
        return int(quota), int(period)

    def cpu_shares(self, rel_dir: str) -> int | None:
        """``cpu.shares`` (v2: converted back from ``cpu.weight``)."""
        text = self.read_raw("cpu.shares", rel_dir)
        if text is None:
            return None
        value = int(text)
        return weight_to_shares(value) if self.version is CgroupVersion.V2 else value

    def cpuset(self, rel_dir: str) -> frozenset[int] | None:
        text = self.read_raw("cpuset.cpus", rel_dir)
        return None if text is None else parse_cpuset(text)

    def pids(self, rel_dir: str) -> list[int] | None:
        text = self.read_raw("cgroup.procs", rel_dir)
        return None if text is None else [int(p) for p in text.split()]

    def pressure(self, rel_dir: str, resource: str) -> dict[str, float] | None:
        """PSI ``avg10`` of ``cpu``/``memory``/``io``: {"some": x, "full": y}; None if not supported."""
        text = self.read_raw(f"{resource}.pressure", rel_dir)
        return None if text is None else parse_pressure(text)


def parse_pressure(text: str) -> dict[str, float]:
    """``some avg10=0.12 avg60=… total=…`` lines → {"some": 0.12, "full": …} (avg10, percent)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        kind, *fields = line.split()
        for field in fields:
            key, _, value = field.partition("=")
            if key == "avg10":
                out[kind] = float(value)
    return out
