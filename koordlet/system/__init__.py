"""The only code that touches files: cgroups (:class:`CgroupFS`) and ``/proc`` (:class:`ProcFS`)."""

from koordlet.system.cgroupfs import (
    CgroupFS,
    CgroupVersion,
    CPUStat,
    MemoryStat,
    WriteResult,
    WriteStatus,
    detect_cgroup_driver,
    detect_cgroup_version,
)
from koordlet.system.layout import (
    CgroupDriver,
    CgroupLayout,
    ContainerID,
    ContainerRuntime,
    parse_container_id,
    pod_uid_from_dir,
)
from koordlet.system.procfs import CPUTicks, ProcFS
from koordlet.system.resources import RESOURCES, shares_to_weight, weight_to_shares

__all__ = [
    "RESOURCES",
    "CPUStat",
    "CPUTicks",
    "CgroupDriver",
    "CgroupFS",
    "CgroupLayout",
    "CgroupVersion",
    "ContainerID",
    "ContainerRuntime",
    "MemoryStat",
    "ProcFS",
    "WriteResult",
    "WriteStatus",
    "detect_cgroup_driver",
    "detect_cgroup_version",
    "parse_container_id",
    "pod_uid_from_dir",
    "shares_to_weight",
    "weight_to_shares",
]
