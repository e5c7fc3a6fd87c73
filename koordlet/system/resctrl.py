"""The resctrl filesystem (Intel RDT / AMD PQoS): groups, their ``schemata`` and ``tasks``, and ``mon_data``.

Layout, as the kernel mounts it (``Documentation/arch/x86/resctrl.rst``) under ``--sys-fs-root-dir``
(``/sys/fs``) + ``resctrl``::

    resctrl/schemata                  L3:0=7ff;1=7ff   MB:0=100;1=100   (the root group)
    resctrl/info/L3/cbm_mask          7ff
    resctrl/<group>/schemata, tasks   a group is a directory made with mkdir
    resctrl/<group>/mon_data/mon_L3_<cache id>/{llc_occupancy, mbm_local_bytes, mbm_total_bytes}

Writing a ``schemata`` line changes only the resources it names; ``tasks`` takes one thread id per
write. Koordinator's reader is ``pkg/koordlet/util/system/resctrl.go``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

L3_PREFIX = "L3"
MB_PREFIX = "MB"
MON_FILES = ("llc_occupancy", "mbm_local_bytes", "mbm_total_bytes")
INTEL_VENDOR_ID = "GenuineIntel"
AMD_VENDOR_ID = "AuthenticAMD"


@dataclass(frozen=True, slots=True)
class Schemata:
    """Per cache id: the L3 mask (an int from hex) and the MB value (percent on Intel, MBps/… on AMD)."""

    l3: dict[int, int] = field(default_factory=dict)
    mb: dict[int, int] = field(default_factory=dict)

    def l3_line(self) -> str:
        return f"{L3_PREFIX}:" + ";".join(f"{i}={self.l3[i]:x}" for i in sorted(self.l3))

    def mb_line(self) -> str:
        return f"{MB_PREFIX}:" + ";".join(f"{i}={self.mb[i]}" for i in sorted(self.mb))


def parse_schemata(text: str) -> Schemata:
    """``L3:0=7ff;1=7ff\\nMB:0=100;1=100`` → Schemata; other lines (L2, MPAM...) and bad items are ignored
    (Koordinator's ``ParseResctrlSchemataMap``)."""
    out = Schemata()
    for line in text.splitlines():
        prefix, sep, items = line.strip().partition(":")
        target, base = {L3_PREFIX: (out.l3, 16), MB_PREFIX: (out.mb, 10)}.get(prefix.strip(), (None, 0))
        if not sep or target is None:
            continue
        for item in items.split(";"):
            cache, eq, value = item.partition("=")
            if not eq:
                continue
            with contextlib.suppress(ValueError):
                target[int(cache)] = int(value.strip(), base)
    return out


def parse_tasks(text: str) -> set[int]:
    return {int(line) for line in text.split() if line.strip().isdigit()}


def cpu_vendor(proc_root: Path) -> str:
    """``vendor_id`` of the first CPU in ``/proc/cpuinfo`` ("" when unknown)."""
    try:
        text = (proc_root / "cpuinfo").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id":
            return value.strip()
    return ""


class ResctrlFS:
    """Reads and writes under one resctrl mount. Missing files read as ``None``; writes raise ``OSError``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ResctrlFS({str(self.root)!r})"

    def _read(self, *parts: str) -> str | None:
        try:
            return self.root.joinpath(*parts).read_text()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def cbm_mask(self) -> int | None:
        """The root's L3 capacity bit mask (``info/L3/cbm_mask``), e.g. 0x7ff for 11 ways."""
        text = self._read("info", "L3", "cbm_mask")
        try:
            return None if text is None else int(text.strip(), 16)
        except ValueError:
            return None

    def cache_ids(self) -> list[int]:
        """The L3 cache ids, from the root group's schemata (Koordinator's ``GetCacheIds``)."""
        text = self._read("schemata")
        return sorted(parse_schemata(text).l3) if text is not None else []

    def group_dir(self, group: str) -> Path:
        return self.root if group == "" else self.root / group

    def ensure_group(self, group: str) -> bool:
        """mkdir the group; True when it was created."""
        try:
            self.group_dir(group).mkdir()
        except FileExistsError:
            return False
        return True

    def remove_group(self, group: str) -> None:
        """rmdir the group (the kernel moves its tasks back to the root group). On resctrl rmdir always
        works; a plain directory tree standing in for it (tests) is emptied first."""
        path = self.group_dir(group)
        try:
            path.rmdir()
        except FileNotFoundError:
            return
        except OSError as err:
            if err.errno != errno.ENOTEMPTY:
                raise
            shutil.rmtree(path)

    def groups(self) -> list[str]:
        """Control groups under the root (``info`` and ``mon_groups``/``mon_data`` excluded)."""
        skip = {"info", "mon_groups", "mon_data"}
        try:
            return sorted(e.name for e in os.scandir(self.root) if e.is_dir() and e.name not in skip)
        except OSError:
            return []

    def schemata(self, group: str) -> Schemata | None:
        text = self._read(*([group] if group else []), "schemata")
        return None if text is None else parse_schemata(text)

    def write_schemata(self, group: str, lines: list[str]) -> None:
        """One write with every line (the kernel applies each named resource)."""
        (self.group_dir(group) / "schemata").write_text("\n".join(lines) + "\n")

    def tasks(self, group: str) -> set[int] | None:
        text = self._read(*([group] if group else []), "tasks")
        return None if text is None else parse_tasks(text)

    def add_tasks(self, group: str, tids: list[int]) -> list[int]:
        """Append each thread id with its own write; returns the ids the kernel refused (gone threads)."""
        failed: list[int] = []
        fd = os.open(self.group_dir(group) / "tasks", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            for tid in tids:
                try:
                    os.write(fd, f"{tid}\n".encode())
                except OSError:
                    failed.append(tid)
        finally:
            os.close(fd)
        return failed

    def mon_data(self, group: str) -> dict[int, dict[str, int]]:
        """``mon_data/mon_L3_<id>/<file>`` of a group: {cache id: {file: value}}; unreadable values skipped."""
        base = self.group_dir(group) / "mon_data"
        out: dict[int, dict[str, int]] = {}
        try:
            domains = sorted(e.name for e in os.scandir(base) if e.is_dir() and e.name.startswith("mon_L3_"))
        except OSError:
            return out
        for domain in domains:
            try:
                cache_id = int(domain.rsplit("_", 1)[1])
            except ValueError:
                continue
            values: dict[str, int] = {}
            for name in MON_FILES:
                text = self._read(*([group] if group else []), "mon_data", domain, name)
                if text is not None and text.strip().isdigit():
                    values[name] = int(text.strip())
            out[cache_id] = values
        return out
