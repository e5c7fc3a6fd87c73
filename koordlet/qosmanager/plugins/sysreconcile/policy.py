"""System config values (Koordinator ``qosmanager/plugins/sysreconcile`` ``calculateMemoryConfig``), pure.

From NodeSLO ``systemStrategy``, each field only when set and within Koordinator's validator range
(otherwise skipped, the file keeps its value):

- ``/proc/sys/vm/min_free_kbytes = capacity.memory / 1024 * minFreeKbytesFactor / 10000``, in
  [10 MiB, 10 GiB] of KiB (no write when the node's memory capacity is unknown);
- ``/proc/sys/vm/watermark_scale_factor = watermarkScaleFactor``, in [10, 400];
- ``/sys/kernel/mm/memcg_reaper/reap_background = memcgReapBackGround``, 0 or 1 (Anolis);
- ``/proc/sys/kernel/sched_group_identity_enabled``, 0 or 1, and ``/proc/sys/kernel/sched_idle_saver_wmark``
  (Anolis);
- ``/sys/kernel/debug/sched_features``: one ``NAME`` or ``NO_NAME`` write per feature whose value differs.

Nothing is ever put back: a value removed from the NodeSLO stays as it was last written (as Koordinator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.slo.nodeslo import SystemStrategy
from koordlet.system.sysctl import (
    SYS_MEMCG_REAP_BACKGROUND,
    SYSCTL_MIN_FREE_KBYTES,
    SYSCTL_SCHED_GROUP_IDENTITY,
    SYSCTL_SCHED_IDLE_SAVER_WMARK,
    SYSCTL_WATERMARK_SCALE_FACTOR,
)

NAME = "SystemConfig"
SYS_SCHED_FEATURES = "kernel/debug/sched_features"
MIN_FREE_KBYTES_RANGE = (10 * 1024, 10 * 1024 * 1024)
WATERMARK_SCALE_FACTOR_RANGE = (10, 400)
SWITCH_RANGE = (0, 1)


@dataclass(frozen=True, slots=True)
class KernelWrite:
    """``root`` is ``proc`` (under ``<proc>/sys``) or ``sys`` (under ``<sys>``); ``optional``: skip quietly
    when the kernel has no such file."""

    root: str
    name: str
    value: str
    optional: bool = False


def _within(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


def system_writes(strategy: SystemStrategy | None, memory_capacity_bytes: int) -> list[KernelWrite]:
    if strategy is None:
        return []
    out: list[KernelWrite] = []
    if strategy.min_free_kbytes_factor is not None and memory_capacity_bytes // 1024 > 0:
        value = memory_capacity_bytes // 1024 * strategy.min_free_kbytes_factor // 10000
        if _within(value, MIN_FREE_KBYTES_RANGE):
            out.append(KernelWrite("proc", SYSCTL_MIN_FREE_KBYTES, str(value)))
    factor = strategy.watermark_scale_factor
    if factor is not None and _within(factor, WATERMARK_SCALE_FACTOR_RANGE):
        out.append(KernelWrite("proc", SYSCTL_WATERMARK_SCALE_FACTOR, str(factor)))
    reap = strategy.memcg_reap_back_ground
    if reap is not None and _within(reap, SWITCH_RANGE):
        out.append(KernelWrite("sys", SYS_MEMCG_REAP_BACKGROUND, str(reap), optional=True))
    identity = strategy.sched_group_identity_enabled
    if identity is not None and _within(identity, SWITCH_RANGE):
        out.append(KernelWrite("proc", SYSCTL_SCHED_GROUP_IDENTITY, str(identity), optional=True))
    if strategy.sched_idle_saver_wmark is not None:
        out.append(KernelWrite("proc", SYSCTL_SCHED_IDLE_SAVER_WMARK, str(strategy.sched_idle_saver_wmark), True))
    return out


def parse_sched_features(text: str) -> dict[str, bool]:
    """``GetSchedFeatures``: ``A NO_B`` → {A: True, B: False}."""
    out: dict[str, bool] = {}
    for token in text.split():
        if token.startswith("NO_"):
            out.setdefault(token[3:], False)
        else:
            out.setdefault(token, True)
    return out


def sched_feature_writes(current: Mapping[str, bool], wanted: Mapping[str, bool] | None) -> list[str]:
    """``SetSchedFeatures``: the ``NAME`` / ``NO_NAME`` lines to write, one per feature that differs."""
    out = []
    for name, value in sorted((wanted or {}).items()):
        if current.get(name) is value:
            continue
        out.append(name if value else f"NO_{name}")
    return out
