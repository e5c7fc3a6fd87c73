"""``RdtResctrl`` and ``Resctrl``: LLC ways and memory bandwidth per QoS class, and per annotated pod.

``RdtResctrl`` (Koordinator ``qosmanager/plugins/resctrl``), every ``--reconcile-interval-seconds``: make the
groups ``LSR``, ``LS`` and ``BE`` under the resctrl mount, write each group's ``schemata`` from the NodeSLO
``resctrlQOS`` of its class (when it differs from what the group holds), and append the threads of each
running pod whose class has ``resctrlQOS.enable`` to its class's group (only the threads not yet there).
Pods with the ``node.koordinator.sh/resctrl`` annotation are left to ``Resctrl``.

``Resctrl`` (Koordinator's runtime hook ``hooks/resctrl``, delivered here by this reconcile loop): each pod
with the annotation gets a group ``koordlet-<pod uid>`` with the annotation's schemata and its threads;
groups of pods that are gone are removed. Koordinator also sets them at container creation through NRI.

Threads are the ``tasks`` of each child cgroup of the pod (its containers and its sandbox). Nothing here
writes cgroups: resctrl writes go straight to :class:`ResctrlFS` (``--qos-dry-run`` logs them instead).
"""

from __future__ import annotations

import argparse
import logging
from functools import partial
from pathlib import Path

from apis.extension import QoSClass
from apis.slo.nodeslo import ResourceQOS, ResourceQOSStrategy
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.resctrl.policy import (
    ANNOTATION_RESCTRL,
    GROUPS,
    POD_GROUP_PREFIX,
    ResctrlConfigError,
    class_resctrl,
    group_schemata,
    parse_pod_resctrl,
    pod_group,
    pod_schemata,
    schemata_lines,
)
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag, arg
from koordlet.statesinformer import PodMeta
from koordlet.system.resctrl import ResctrlFS, Schemata, cpu_vendor, parse_tasks

log = logging.getLogger("koordlet.qos")

CLASS_GATE = "RdtResctrl"
POD_GATE = "Resctrl"
ACTIVE_PHASES = ("Running", "Pending", "")


class ResctrlUnavailableError(RuntimeError):
    """The resctrl mount lacks what a schemata needs (``info/L3/cbm_mask``, cache ids)."""


class _ResctrlStrategy(Strategy):
    INTERVAL_FLAG = "reconcile_interval_seconds"

    def __init__(self) -> None:
        super().__init__()
        self.resctrl = ResctrlFS("/sys/fs/resctrl")
        self.vendor = ""

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(
            parser,
            "--reconcile-interval-seconds",
            type=positive_seconds,
            default=1.0,
            help="CPUBurst/CgroupReconcile/resctrl tick",
        )
        add_flag(
            parser,
            "--sys-fs-root-dir",
            dest="sys_fs_root_dir",
            type=Path,
            default=Path("/sys/fs"),
            help="the directory holding the resctrl mount (Koordinator: --sys-fs-root-dir)",
        )

    def configure(self, ctx: PluginContext) -> None:
        self.resctrl = ResctrlFS(Path(arg(ctx, "sys_fs_root_dir", Path("/sys/fs"))) / "resctrl")
        self.vendor = cpu_vendor(Path(arg(ctx, "proc_root", Path("/proc"))))

    def geometry(self) -> tuple[int, list[int]]:
        """(cbm, cache ids) of the mount."""
        cbm, ids = self.resctrl.cbm_mask(), self.resctrl.cache_ids()
        if cbm is None or not ids:
            raise ResctrlUnavailableError(f"no L3 cbm_mask or cache ids under {self.resctrl.root}")
        return cbm, ids

    def write_schemata(self, group: str, want: Schemata) -> None:
        lines = schemata_lines(want, self.resctrl.schemata(group))
        if not lines:
            return
        if self.dry_run:
            log.warning("%s dry-run: would write %s/schemata = %s", self.NAME, group, " ".join(lines))
            return
        self.resctrl.write_schemata(group, lines)
        log.info("%s: %s/schemata <- %s", self.NAME, group, " ".join(lines))

    def pod_threads(self, pod: PodMeta) -> set[int]:
        """Thread ids in the pod's child cgroups (containers and sandbox)."""
        fs = self.ctx.executor.cgroupfs
        tids: set[int] = set()
        for child in fs.list_children(pod.cgroup_dir, "cpu"):
            text = fs.read_raw("tasks", f"{pod.cgroup_dir}/{child}")
            if text is not None:
                tids |= parse_tasks(text)
        return tids

    def add_threads(self, group: str, tids: set[int]) -> None:
        new = sorted(tids - (self.resctrl.tasks(group) or set()))
        if not new:
            return
        if self.dry_run:
            log.warning("%s dry-run: would add %d threads to %s/tasks", self.NAME, len(new), group)
            return
        failed = self.resctrl.add_tasks(group, new)
        log.debug("%s: %d threads to %s/tasks (%d gone)", self.NAME, len(new) - len(failed), group, len(failed))


def _class_config_enabled(strategy: ResourceQOSStrategy, qos: QoSClass) -> bool:
    """Koordinator's ``GetPodResourceQoSByQoSClass(pod).ResctrlQOS.Enable``."""
    by_qos: dict[QoSClass, ResourceQOS | None] = {
        QoSClass.LSE: strategy.lsr_class,
        QoSClass.LSR: strategy.lsr_class,
        QoSClass.LS: strategy.ls_class,
        QoSClass.BE: strategy.be_class,
        QoSClass.SYSTEM: strategy.system_class,
    }
    resource_qos = by_qos.get(qos)
    cfg = resource_qos.resctrl_qos if resource_qos else None
    return bool(cfg and cfg.enable)


class ResctrlReconcile(_ResctrlStrategy):
    NAME = CLASS_GATE

    def tick(self) -> None:
        strategy = self.ctx.states_informer.node_slo.resource_qos_strategy
        if strategy is None:
            return
        cbm, cache_ids = self.geometry()
        for group in GROUPS:
            if self.resctrl.ensure_group(group):
                log.info("%s: created resctrl group %s", self.NAME, group)
            want = group_schemata(class_resctrl(strategy, group), cbm=cbm, cache_ids=cache_ids, vendor=self.vendor)
            self.contain(f"group {group}", partial(self.write_schemata, group, want))
        threads: dict[str, set[int]] = {group: set() for group in GROUPS}
        for pod in self.ctx.states_informer.get_all_pods():
            if pod.phase not in ACTIVE_PHASES or ANNOTATION_RESCTRL in pod.annotations:
                continue
            target = pod_group(pod.qos)
            if target is None or not _class_config_enabled(strategy, pod.qos):
                continue
            threads[target] |= self.pod_threads(pod)
        for group, tids in threads.items():
            self.contain(f"group {group} tasks", partial(self.add_threads, group, tids))


class PodResctrl(_ResctrlStrategy):
    NAME = POD_GATE

    def tick(self) -> None:
        cbm, cache_ids = self.geometry()
        wanted: set[str] = set()
        for pod in self.ctx.states_informer.get_all_pods():
            raw = pod.annotations.get(ANNOTATION_RESCTRL)
            if raw is None or pod.phase not in ACTIVE_PHASES:
                continue
            group = POD_GROUP_PREFIX + pod.uid
            wanted.add(group)
            self.contain(
                f"pod {pod.namespace}/{pod.name}", partial(self.reconcile_pod, pod, raw, group, cbm, cache_ids)
            )
        for group in self.resctrl.groups():
            if group.startswith(POD_GROUP_PREFIX) and group not in wanted:
                if self.dry_run:
                    log.warning("%s dry-run: would remove resctrl group %s", self.NAME, group)
                    continue
                self.resctrl.remove_group(group)
                log.info("%s: removed resctrl group %s (its pod is gone)", self.NAME, group)

    def reconcile_pod(self, pod: PodMeta, raw: str, group: str, cbm: int, cache_ids: list[int]) -> None:
        try:
            want = pod_schemata(parse_pod_resctrl(raw), cbm=cbm, cache_ids=cache_ids, vendor=self.vendor)
        except ResctrlConfigError as err:
            raise ResctrlConfigError(f"annotation {ANNOTATION_RESCTRL}: {err}") from None
        if not self.dry_run and self.resctrl.ensure_group(group):
            log.info("%s: created resctrl group %s for pod %s/%s", self.NAME, group, pod.namespace, pod.name)
        self.write_schemata(group, want)
        self.add_threads(group, self.pod_threads(pod))


CLASS_ENTRY = PluginEntry(CLASS_GATE, ResctrlReconcile, KOORDLET_FEATURES[CLASS_GATE])
POD_ENTRY = PluginEntry(POD_GATE, PodResctrl, KOORDLET_FEATURES[POD_GATE])
