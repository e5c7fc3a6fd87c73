"""The CPU's basic info the koordlet reports for CPU normalization (Koordinator
``pkg/koordlet/util/cpuinfo.go`` ``getCPUBasicInfo``), read from files under injected roots.

- ``cpuModel`` and ``vendorID``: the first ``model name`` and ``vendor_id`` lines of ``/proc/cpuinfo``;
- ``hyperThreadEnabled``: ``/sys/devices/system/cpu/smt/active`` is 1; without that file, more than one
  logical CPU on some physical core (Koordinator asks ``lscpu`` for threads per core instead);
- ``turboEnabled``: ``/sys/devices/system/cpu/intel_pstate/no_turbo`` is 0 (absent: off; Koordinator reads
  only Intel's switch too).

The JSON leaves out empty and false fields, as Go's ``omitempty`` does, so the annotation reads the same
as Koordinator's koordlet writes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from koordlet.system.cputopology import CPUTopology


@dataclass(frozen=True, slots=True)
class CPUBasicInfo:
    cpu_model: str = ""
    hyper_thread_enabled: bool = False
    turbo_enabled: bool = False
    vendor_id: str = ""

    def to_json(self) -> str:
        out: dict[str, object] = {}
        if self.cpu_model:
            out["cpuModel"] = self.cpu_model
        if self.hyper_thread_enabled:
            out["hyperThreadEnabled"] = True
        if self.turbo_enabled:
            out["turboEnabled"] = True
        if self.vendor_id:
            out["vendorID"] = self.vendor_id
        return json.dumps(out, separators=(",", ":"))


def _first_field(text: str, name: str) -> str:
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return ""


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_cpu_basic_info(proc_root: Path, sysfs_root: Path, topology: CPUTopology | None = None) -> CPUBasicInfo:
    """What can be read; a missing or unreadable file leaves its field empty (or false)."""
    try:
        cpuinfo = (proc_root / "cpuinfo").read_text(errors="replace")
    except OSError:
        cpuinfo = ""
    cpu_base = sysfs_root / "devices" / "system" / "cpu"
    smt = _read_int(cpu_base / "smt" / "active")
    if smt is not None:
        hyper_thread = smt == 1
    elif topology is not None:
        cores = [(c.socket, c.core) for c in topology.cpus]
        hyper_thread = len(set(cores)) < len(cores)
    else:
        hyper_thread = False
    no_turbo = _read_int(cpu_base / "intel_pstate" / "no_turbo")
    return CPUBasicInfo(
        cpu_model=_first_field(cpuinfo, "model name"),
        hyper_thread_enabled=hyper_thread,
        turbo_enabled=no_turbo == 0,
        vendor_id=_first_field(cpuinfo, "vendor_id"),
    )
