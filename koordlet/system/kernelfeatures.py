"""Probes of the kernel interfaces some feature gates need: each returns ``None`` when the interface is
there, or a short phrase naming what is missing (the start-up report prints it as is).

They look where Koordinator's ``SystemSupported`` checks look (``pkg/koordlet/util/system``): the resctrl
mount, ``cpu.bvt_warp_ns`` in the kubepods cgroup or the ``sched_group_identity_enabled`` sysctl, the blkio
controller, kidled, the per-NUMA hugepage directories and PSI. Roots are injected, so tests hand in trees.
"""

from __future__ import annotations

from pathlib import Path

from koordlet.system.cgroupfs import CgroupFS, CgroupVersion

SYSCTL_GROUP_IDENTITY = "sys/kernel/sched_group_identity_enabled"
"""Under the proc root (Koordinator writes ``/proc/sys/kernel/sched_group_identity_enabled``)."""


def resctrl_missing(resctrl_root: Path) -> str | None:
    """resctrl is usable when it is mounted: ``<root>/schemata`` and ``<root>/info`` exist."""
    if (resctrl_root / "schemata").is_file() and (resctrl_root / "info").is_dir():
        return None
    return f"no resctrl filesystem mounted at {resctrl_root}"


def group_identity_missing(cgroupfs: CgroupFS, proc_root: Path) -> str | None:
    """Koordinator's test: ``cpu.bvt_warp_ns`` in the kubepods (Guaranteed) cgroup, or the sysctl."""
    for rel in (cgroupfs.layout.kubepods_dir, ""):
        path = cgroupfs.file_path("cpu.bvt_warp_ns", rel)
        if path is not None and path.is_file():
            return None
    if (proc_root / SYSCTL_GROUP_IDENTITY).is_file():
        return None
    return "no cpu.bvt_warp_ns in the cpu cgroup and no kernel.sched_group_identity_enabled (not an Anolis kernel)"


def blkio_missing(cgroupfs: CgroupFS) -> str | None:
    """v1: the blkio controller with throttle files; v2: ``io`` among the root's controllers."""
    if cgroupfs.version is CgroupVersion.V1:
        if (cgroupfs.root / "blkio" / "blkio.throttle.read_bps_device").is_file():
            return None
        return f"no blkio cgroup controller at {cgroupfs.root / 'blkio'}"
    try:
        controllers = (cgroupfs.root / "cgroup.controllers").read_text().split()
    except OSError:
        controllers = []
    return None if "io" in controllers else f"no io controller in {cgroupfs.root / 'cgroup.controllers'}"


def kidled_missing(sysfs_root: Path) -> str | None:
    if (sysfs_root / "kernel" / "mm" / "kidled" / "scan_period_in_seconds").is_file():
        return None
    return f"no kidled at {sysfs_root / 'kernel' / 'mm' / 'kidled'} (an Anolis kernel feature)"


def hugepages_missing(sysfs_root: Path) -> str | None:
    nodes = sysfs_root / "devices" / "system" / "node"
    if any(nodes.glob("node*/hugepages/hugepages-*")):
        return None
    return f"no per-NUMA hugepages under {nodes}"


def psi_missing(proc_root: Path) -> str | None:
    if (proc_root / "pressure" / "cpu").is_file():
        return None
    return f"no PSI at {proc_root / 'pressure'} (kernel without CONFIG_PSI or booted with psi=0)"
