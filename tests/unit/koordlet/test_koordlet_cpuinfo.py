"""cpu-basic-info for CPU normalization: read from /proc/cpuinfo and sysfs, written as Koordinator writes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordlet.system.cpuinfo import CPUBasicInfo, read_cpu_basic_info
from koordlet.system.cputopology import CPUTopology, LogicalCPU, NUMANode

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz
"""
MODEL = "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz"


def tree(tmp_path: Path, *, smt: str | None, no_turbo: str | None) -> tuple[Path, Path]:
    proc, sysfs = tmp_path / "proc", tmp_path / "sys"
    proc.mkdir()
    (proc / "cpuinfo").write_text(CPUINFO)
    cpu = sysfs / "devices" / "system" / "cpu"
    cpu.mkdir(parents=True)
    if smt is not None:
        (cpu / "smt").mkdir()
        (cpu / "smt" / "active").write_text(smt)
    if no_turbo is not None:
        (cpu / "intel_pstate").mkdir()
        (cpu / "intel_pstate" / "no_turbo").write_text(no_turbo)
    return proc, sysfs


def topology(*cores: int) -> CPUTopology:
    cpus = tuple(LogicalCPU(i, core, 0, 0) for i, core in enumerate(cores))
    return CPUTopology(cpus, (NUMANode(0, frozenset(range(len(cores))), 0),))


@pytest.mark.parametrize(
    ("files", "topo", "want"),
    [
        pytest.param(("1\n", "0\n"), None, (True, True), id="ht-and-turbo"),
        pytest.param(("0\n", "1\n"), None, (False, False), id="neither"),
        pytest.param((None, None), topology(0, 0, 1, 1), (True, False), id="no-smt-file-two-threads-per-core"),
        pytest.param((None, None), topology(0, 1), (False, False), id="no-smt-file-one-thread-per-core"),
    ],
)
def test_read_cpu_basic_info(
    tmp_path: Path, files: tuple[str | None, str | None], topo: CPUTopology | None, want: tuple[bool, bool]
) -> None:
    proc, sysfs = tree(tmp_path, smt=files[0], no_turbo=files[1])
    assert read_cpu_basic_info(proc, sysfs, topo) == CPUBasicInfo(MODEL, *want, "GenuineIntel")


def test_json_leaves_out_empty_and_false_fields_as_go_omitempty() -> None:
    assert CPUBasicInfo(MODEL, True, False, "GenuineIntel").to_json() == (
        '{"cpuModel":"Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz","hyperThreadEnabled":true,'
        '"vendorID":"GenuineIntel"}'
    )
    assert CPUBasicInfo().to_json() == "{}"


def test_missing_files_give_an_empty_info(tmp_path: Path) -> None:
    assert read_cpu_basic_info(tmp_path / "none", tmp_path / "none") == CPUBasicInfo()
