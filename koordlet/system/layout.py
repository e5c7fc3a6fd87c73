"""Where Kubernetes puts pod and container cgroups, for the cgroupfs and systemd drivers (no I/O).

Paths are relative to a controller's mount (v1, e.g. ``<root>/cpu/``) or to the unified root (v2)::

                 systemd                                              cgroupfs
    kubepods     kubepods.slice/                                      kubepods/
    Burstable    kubepods.slice/kubepods-burstable.slice/             kubepods/burstable/
    BestEffort   kubepods.slice/kubepods-besteffort.slice/            kubepods/besteffort/
    Guaranteed   (kubepods itself)                                    (kubepods itself)
    pod          kubepods-<qos>-pod<uid with _>.slice/                pod<uid>/
    container    cri-containerd-<id>.scope, docker-<id>.scope, ...    <id>/
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from apis.extension import KubeQOSClass


class CgroupDriver(StrEnum):
    CGROUPFS = "cgroupfs"
    SYSTEMD = "systemd"


class ContainerRuntime(StrEnum):
    CONTAINERD = "containerd"
    DOCKER = "docker"
    CRIO = "cri-o"
    POUCH = "pouch"


_SYSTEMD_SCOPE_PREFIX = {
    ContainerRuntime.CONTAINERD: "cri-containerd-",
    ContainerRuntime.DOCKER: "docker-",
    ContainerRuntime.CRIO: "crio-",
    ContainerRuntime.POUCH: "pouch-",
}
_QOS_SUFFIX = {KubeQOSClass.BURSTABLE: "burstable", KubeQOSClass.BEST_EFFORT: "besteffort"}


@dataclass(frozen=True, slots=True)
class ContainerID:
    runtime: ContainerRuntime
    id: str


def parse_container_id(raw: str) -> ContainerID | None:
    """``status.containerStatuses[].containerID`` (``<runtime>://<id>``); ``None`` if empty or unknown."""
    runtime, sep, cid = raw.partition("://")
    if not sep or not cid:
        return None
    try:
        return ContainerID(ContainerRuntime(runtime), cid)
    except ValueError:
        return None


def default_kubepods_dir(driver: CgroupDriver) -> str:
    return "kubepods.slice" if driver is CgroupDriver.SYSTEMD else "kubepods"


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """Path builder for one driver. ``kubepods_dir`` is the kubepods cgroup, relative to the mount.

    It is configurable so tests (and nested setups) can put a whole kubepods tree under their own parent.
    """

    driver: CgroupDriver
    kubepods_dir: str

    @classmethod
    def for_driver(cls, driver: CgroupDriver, kubepods_dir: str | None = None) -> CgroupLayout:
        return cls(driver, (kubepods_dir or default_kubepods_dir(driver)).strip("/"))

    def qos_dir(self, qos: KubeQOSClass) -> str:
        if qos is KubeQOSClass.GUARANTEED:
            return self.kubepods_dir
        suffix = _QOS_SUFFIX[qos]
        if self.driver is CgroupDriver.SYSTEMD:
            return f"{self.kubepods_dir}/kubepods-{suffix}.slice"
        return f"{self.kubepods_dir}/{suffix}"

    def pod_dir(self, qos: KubeQOSClass, pod_uid: str) -> str:
        if self.driver is CgroupDriver.SYSTEMD:
            uid = pod_uid.replace("-", "_")
            name = (
                f"kubepods-pod{uid}.slice"
                if qos is KubeQOSClass.GUARANTEED
                else (f"kubepods-{_QOS_SUFFIX[qos]}-pod{uid}.slice")
            )
        else:
            name = f"pod{pod_uid}"
        return f"{self.qos_dir(qos)}/{name}"

    def container_dir(self, qos: KubeQOSClass, pod_uid: str, container: ContainerID) -> str:
        if self.driver is CgroupDriver.SYSTEMD:
            name = f"{_SYSTEMD_SCOPE_PREFIX[container.runtime]}{container.id}.scope"
        else:
            name = container.id
        return f"{self.pod_dir(qos, pod_uid)}/{name}"


_POD_DIR_RE = re.compile(
    r"^(?:kubepods-(?:burstable-|besteffort-)?pod(?P<sd>[0-9a-f_]+)\.slice|pod(?P<fs>[0-9a-f-]+))$"
)


def pod_uid_from_dir(name: str) -> str | None:
    """The pod UID a pod cgroup directory name stands for (either driver), or ``None``."""
    match = _POD_DIR_RE.match(name)
    if match is None:
        return None
    if match.group("sd"):
        return match.group("sd").replace("_", "-")
    return match.group("fs")
