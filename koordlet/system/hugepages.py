"""Hugepages per NUMA node from sysfs (Koordinator ``pkg/koordlet/util/meminfo.go`` ``GetHugePagesInfo``):
``<sys>/devices/system/node/node<N>/hugepages/hugepages-<size>kB/nr_hugepages``. Only the 2 MiB and 1 GiB
sizes are kept, as Koordinator keeps them."""

from __future__ import annotations

import os
import re
from pathlib import Path

HUGEPAGE_2M_KB = 2048
HUGEPAGE_1G_KB = 1048576
_NODE = re.compile(r"^node(\d+)$")
_SIZE = re.compile(r"^hugepages-(\d+)kB$")


def read_numa_hugepages(sysfs_root: Path) -> dict[int, dict[int, int]]:
    """{NUMA node: {page size in KiB: number of pages}}; both sizes present (0) for every node found."""
    base = sysfs_root / "devices" / "system" / "node"
    out: dict[int, dict[int, int]] = {}
    try:
        nodes = [(int(m.group(1)), e.name) for e in os.scandir(base) if (m := _NODE.match(e.name))]
    except OSError:
        return out
    for node, name in sorted(nodes):
        pages = {HUGEPAGE_2M_KB: 0, HUGEPAGE_1G_KB: 0}
        try:
            sizes = [
                (int(m.group(1)), e.name) for e in os.scandir(base / name / "hugepages") if (m := _SIZE.match(e.name))
            ]
        except OSError:
            sizes = []
        for size, dirname in sizes:
            if size not in pages:
                continue
            try:
                pages[size] = int((base / name / "hugepages" / dirname / "nr_hugepages").read_text())
            except (OSError, ValueError):
                continue
        out[node] = pages
    return out
