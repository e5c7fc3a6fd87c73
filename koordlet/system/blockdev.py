"""Block devices from sysfs: the ``MAJ:MIN`` number of the disk behind a device name or an LVM volume group
(what Koordinator's ``NodeStorageInfoCollector`` derives from lsblk and LVM for ``BlkIOReconcile``).

- a device ``/dev/vda`` is ``<sys>/class/block/vda/dev``; a partition (``vda1``, it has a ``partition`` file)
  resolves to its disk;
- a volume group ``yoda-pool0`` is found through its device-mapper volumes (``<sys>/class/block/dm-N/dm/name``
  ``yoda--pool0-lv``, dashes inside names doubled) and their ``slaves``: the disk of the first one.
"""

from __future__ import annotations

import os
from pathlib import Path


def _dev(entry: Path) -> str | None:
    try:
        return (entry / "dev").read_text().strip() or None
    except OSError:
        return None


def _disk_entry(sys_root: Path, name: str) -> Path | None:
    entry = sys_root / "class" / "block" / name
    if not entry.exists():
        return None
    if (entry / "partition").exists():
        return Path(os.path.realpath(entry)).parent
    return entry


def disk_number(sys_root: Path, device: str) -> str | None:
    """``/dev/vda`` (or ``vda``, or a partition of it) → ``"254:0"``; ``None`` if there is no such device."""
    entry = _disk_entry(sys_root, device.removeprefix("/dev/").removeprefix("mapper/"))
    return None if entry is None else _dev(entry)


def volume_group_of(dm_name: str) -> str:
    """``yoda--pool0-yoda--test1`` → ``yoda-pool0`` (device-mapper doubles dashes inside VG and LV names)."""
    return dm_name.replace("--", "\0").split("-", 1)[0].replace("\0", "-")


def vg_disk_number(sys_root: Path, vg: str) -> str | None:
    """The disk number under a volume group's first logical volume; ``None`` when no LV of ``vg`` exists."""
    block = sys_root / "class" / "block"
    try:
        names = sorted(e.name for e in os.scandir(block) if e.name.startswith("dm-"))
    except OSError:
        return None
    for name in names:
        try:
            dm_name = (block / name / "dm" / "name").read_text().strip()
        except OSError:
            continue
        if volume_group_of(dm_name) != vg:
            continue
        try:
            slaves = sorted(e.name for e in os.scandir(block / name / "slaves"))
        except OSError:
            continue
        for slave in slaves:
            number = disk_number(sys_root, slave)
            if number is not None:
                return number
    return None
