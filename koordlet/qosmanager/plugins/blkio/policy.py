"""Blkio values (Koordinator ``qosmanager/plugins/blkio``), as pure functions.

Per block of a class (BE, or a pod through its ``koordinator.sh/blkioQOS`` annotation), with Koordinator's
defaults for unset fields (no throttle, weight 100):

- cgroup v1: ``blkio.throttle.{read,write}_{iops,bps}_device`` = ``MAJ:MIN value`` (0 removes the rule) and
  ``blkio.cost.weight`` = ``MAJ:MIN ioWeightPercent`` (Anolis iocost);
- cgroup v2 (Koordinator registers no v2 files; pykoord maps them): ``io.max`` = ``MAJ:MIN rbps=.. wbps=..
  riops=.. wiops=..`` (0 is ``max``) and ``io.weight`` = ``MAJ:MIN ioWeightPercent`` (the default weight is 100
  on both, so the percent is the weight).

For the cgroup root (``cgroupRoot.blkioQOS``), iocost's QoS and cost model per disk: ``blkio.cost.qos`` (v2
``io.cost.qos``) = ``MAJ:MIN enable=1 ctrl=user rpct=95 rlat=3000 wpct=95 wlat=3000`` and ``blkio.cost.model``
(``io.cost.model``) = ``MAJ:MIN ctrl=user rbps=.. rseqiops=.. rrandiops=.. wbps=.. wseqiops=.. wrandiops=..``
with ``enableUserModel``, else ``MAJ:MIN ctrl=auto``. A disk configured in a cgroup's files but no longer in
the NodeSLO is reset: throttles 0, weight 100, root ``enable=0``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from apis.core import boundedjson
from apis.slo.nodeslo import BlkIOQOSCfg, BlockCfg, IOCfg

NAME = "BlkIOReconcile"
ANNOTATION_BLKIO_QOS = "koordinator.sh/blkioQOS"
DEFAULT_WEIGHT = 100
DEFAULT_LATENCY_US = 3000
DEFAULT_LATENCY_PERCENT = 95
BLOCK_DEVICE, BLOCK_VOLUME_GROUP, BLOCK_POD_VOLUME = "device", "volumegroup", "podvolume"

V1_THROTTLES = (
    ("blkio.throttle.read_iops_device", "read_iops"),
    ("blkio.throttle.read_bps_device", "read_bps"),
    ("blkio.throttle.write_iops_device", "write_iops"),
    ("blkio.throttle.write_bps_device", "write_bps"),
)
CLASS_FILES = {1: (*(r for r, _ in V1_THROTTLES), "blkio.cost.weight"), 2: ("io.max", "io.weight")}
ROOT_FILES = {1: ("blkio.cost.qos", "blkio.cost.model"), 2: ("io.cost.qos", "io.cost.model")}


class BlkioConfigError(ValueError):
    """A block that cannot be applied (unknown device or type, bad annotation); the message names it."""


@dataclass(frozen=True, slots=True)
class BlkioWrite:
    resource: str
    disk: str
    value: str
    """The whole line: ``MAJ:MIN ...``."""


def _v(value: int | None, default: int) -> int:
    return default if value is None else value


def class_writes(version: int, disk: str, io: IOCfg | None) -> list[BlkioWrite]:
    """``getBlkIOUpdaterFromBlockCfg`` (v1) and its v2 equivalent."""
    io = io or IOCfg()
    limits = {
        "read_iops": _v(io.read_iops, 0),
        "read_bps": _v(io.read_bps, 0),
        "write_iops": _v(io.write_iops, 0),
        "write_bps": _v(io.write_bps, 0),
    }
    weight = _v(io.io_weight_percent, DEFAULT_WEIGHT)
    if version == 1:
        out = [BlkioWrite(resource, disk, f"{disk} {limits[key]}") for resource, key in V1_THROTTLES]
        return [*out, BlkioWrite("blkio.cost.weight", disk, f"{disk} {weight}")]

    def v2(n: int) -> str:
        return "max" if n <= 0 else str(n)

    line = (
        f"{disk} rbps={v2(limits['read_bps'])} wbps={v2(limits['write_bps'])} "
        f"riops={v2(limits['read_iops'])} wiops={v2(limits['write_iops'])}"
    )
    return [BlkioWrite("io.max", disk, line), BlkioWrite("io.weight", disk, f"{disk} {weight}")]


def class_reset(version: int, disk: str) -> list[BlkioWrite]:
    """``getBlkIORemoverFromDiskNumber``: back to no throttle, weight 100."""
    return class_writes(version, disk, None)


def root_writes(version: int, disk: str, io: IOCfg | None) -> list[BlkioWrite]:
    """``getDiskConfigUpdaterFromBlockCfg``: iocost QoS and cost model of a disk at the cgroup root."""
    io = io or IOCfg()
    qos_file, model_file = ROOT_FILES[version]
    qos = (
        f"{disk} enable=1 ctrl=user rpct={_v(io.read_latency_percent, DEFAULT_LATENCY_PERCENT)} "
        f"rlat={_v(io.read_latency, DEFAULT_LATENCY_US)} wpct={_v(io.write_latency_percent, DEFAULT_LATENCY_PERCENT)} "
        f"wlat={_v(io.write_latency, DEFAULT_LATENCY_US)}"
    )
    if io.enable_user_model:
        model = (
            f"{disk} ctrl=user rbps={_v(io.model_read_bps, 0)} rseqiops={_v(io.model_read_seq_iops, 0)} "
            f"rrandiops={_v(io.model_read_rand_iops, 0)} wbps={_v(io.model_write_bps, 0)} "
            f"wseqiops={_v(io.model_write_seq_iops, 0)} wrandiops={_v(io.model_write_rand_iops, 0)}"
        )
    else:
        model = f"{disk} ctrl=auto"
    return [BlkioWrite(qos_file, disk, qos), BlkioWrite(model_file, disk, model)]


def root_reset(version: int, disk: str) -> list[BlkioWrite]:
    """``getDiskConfigRemoverFromDiskNumber``: iocost off for the disk."""
    return [BlkioWrite(ROOT_FILES[version][0], disk, f"{disk} enable=0")]


def class_blocks(cfg: BlkIOQOSCfg | None) -> list[BlockCfg] | None:
    """The blocks to apply for a class: ``None`` when the class has no ``blkioQOS`` (left alone), ``[]`` when
    it is disabled (every configured disk is reset)."""
    if cfg is None:
        return None
    return list(cfg.blocks or []) if cfg.enable else []


def parse_pod_blkio(raw: str) -> list[BlockCfg]:
    """The pod annotation ``{"blocks": [{"name": "/dev/vdb", "type": "device", "ioCfg": {...}}]}``."""
    try:
        data = boundedjson.loads(raw)
    except ValueError as err:
        raise BlkioConfigError(f"annotation {ANNOTATION_BLKIO_QOS}: not JSON: {err}") from None
    if not isinstance(data, dict):
        raise BlkioConfigError(f"annotation {ANNOTATION_BLKIO_QOS}: want a JSON object")
    try:
        return list(BlkIOQOSCfg.model_validate(data).blocks or [])
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BlkioConfigError(f"annotation {ANNOTATION_BLKIO_QOS}: {where}: {first['msg']}") from None


def configured_disks(text: str | None) -> dict[str, str]:
    """A blkio/io file → {MAJ:MIN: the rest of its line} (``default 100`` and other non-device lines skipped)."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        disk, _, rest = line.strip().partition(" ")
        major, colon, minor = disk.partition(":")
        if colon and major.isdigit() and minor.isdigit():
            out[disk] = rest.strip()
    return out


def _fields(rest: str) -> dict[str, str]:
    out = {}
    for i, token in enumerate(rest.split()):
        key, eq, value = token.partition("=")
        out[key if eq else f"#{i}"] = value if eq else token
    return out


def _same(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def is_applied(write: BlkioWrite, current: Mapping[str, str]) -> bool:
    """Whether the file (``configured_disks`` of it) already says what ``write`` would: every field of the
    wanted line matches (the kernel adds fields and formats numbers its own way), and a reset value matches a
    disk the file does not list (0 throttles, weight 100, all-``max`` io.max, ``enable=0``)."""
    want = _fields(write.value.partition(" ")[2])
    have = current.get(write.disk)
    if have is None:
        reset = {"0", "max", str(DEFAULT_WEIGHT)}
        return bool(want) and all(v in reset for v in want.values())
    got = _fields(have)
    return all(k in got and _same(got[k], v) for k, v in want.items())


def resets_for(version: int, configured: Sequence[str], wanted: set[str], *, root: bool) -> list[BlkioWrite]:
    """Resets of disks configured in the files but no longer wanted."""
    out: list[BlkioWrite] = []
    for disk in sorted(set(configured) - wanted):
        out += root_reset(version, disk) if root else class_reset(version, disk)
    return out
