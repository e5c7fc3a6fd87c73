"""``BlkIOReconcile`` (Alpha): blkio throttles and weights per QoS class, and iocost at the cgroup root.

Koordinator ``qosmanager/plugins/blkio``, every ``--reconcile-interval-seconds``:

- ``beClass.blkioQOS`` → the besteffort QoS cgroup; ``cgroupRoot.blkioQOS`` → iocost QoS/model at the root;
  blocks of LSR and LS are not supported (Koordinator warns; so does this, once);
- pods with the ``koordinator.sh/blkioQOS`` annotation (and a ``koordinator.sh/qosClass`` label) → their pod
  cgroup.

A block names a ``device`` (``/dev/vdb``, a partition resolves to its disk) or a ``volumegroup`` (its LVM
disk), found in sysfs (``--sysfs-root``). ``podvolume`` blocks need the pod's PVCs, which pykoord does not
read yet: such a block is skipped with a warning naming the pod. Values are written only where the file says
something else, one device line per write; disks configured before but not any more are reset.
"""

from __future__ import annotations

import argparse
import logging
from functools import partial
from pathlib import Path

from apis.extension import LABEL_POD_QOS, KubeQOSClass
from apis.slo.nodeslo import BlockCfg, ResourceQOS
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.blkio.policy import (
    ANNOTATION_BLKIO_QOS,
    BLOCK_DEVICE,
    BLOCK_VOLUME_GROUP,
    CLASS_FILES,
    NAME,
    ROOT_FILES,
    BlkioConfigError,
    BlkioWrite,
    class_blocks,
    class_writes,
    configured_disks,
    is_applied,
    parse_pod_blkio,
    resets_for,
    root_writes,
)
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag, arg
from koordlet.statesinformer import PodMeta
from koordlet.system import CgroupVersion, WriteStatus
from koordlet.system.blockdev import disk_number, vg_disk_number

log = logging.getLogger("koordlet.qos")
audit_log = logging.getLogger("koordlet.audit")


class BlkIOReconcile(Strategy):
    NAME = NAME
    INTERVAL_FLAG = "reconcile_interval_seconds"

    def __init__(self) -> None:
        super().__init__()
        self.sys_root = Path("/sys")
        self._warned: set[str] = set()

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(parser, "--reconcile-interval-seconds", type=positive_seconds, default=1.0, help="reconcile tick")

    def configure(self, ctx: PluginContext) -> None:
        self.sys_root = Path(arg(ctx, "sysfs_root", Path("/sys")))

    @property
    def version(self) -> int:
        return 2 if self.ctx.executor.cgroupfs.version is CgroupVersion.V2 else 1

    def warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s: %s", self.NAME, message)

    def disk_of(self, block: BlockCfg) -> str:
        name = block.name or ""
        if block.type == BLOCK_DEVICE:
            number = disk_number(self.sys_root, name)
        elif block.type == BLOCK_VOLUME_GROUP:
            number = vg_disk_number(self.sys_root, name)
        else:
            raise BlkioConfigError(f"block {name!r}: type {block.type!r} is not supported (device, volumegroup)")
        if number is None:
            raise BlkioConfigError(f"block {name!r} ({block.type}): no such disk under {self.sys_root}/class/block")
        return number

    def tick(self) -> None:
        strategy = self.ctx.states_informer.node_slo.resource_qos_strategy
        if strategy is None:
            return
        for label, qos in (("LSR", strategy.lsr_class), ("LS", strategy.ls_class)):
            blocks = class_blocks(qos.blkio_qos if qos else None)
            if blocks:
                self.warn_once(label, f"blkioQOS of {label}Class is not supported (Koordinator neither); only BE")
        layout = self.ctx.executor.cgroupfs.layout
        be = self._blocks(strategy.be_class)
        if be is not None:
            rel = layout.qos_dir(KubeQOSClass.BEST_EFFORT)
            self.contain("class BE", partial(self.reconcile_dir, rel, be, root=False))
        root = self._blocks(strategy.cgroup_root)
        if root is not None:
            self.contain("cgroup root", partial(self.reconcile_dir, "", root, root=True))
        for pod in self.ctx.states_informer.get_all_pods():
            raw = pod.annotations.get(ANNOTATION_BLKIO_QOS)
            if raw is None or not pod.labels.get(LABEL_POD_QOS) or pod.phase != "Running":
                continue
            self.contain(f"pod {pod.namespace}/{pod.name}", partial(self.reconcile_pod, pod, raw))

    @staticmethod
    def _blocks(qos: ResourceQOS | None) -> list[BlockCfg] | None:
        return class_blocks(qos.blkio_qos if qos else None)

    def reconcile_pod(self, pod: PodMeta, raw: str) -> None:
        self.reconcile_dir(pod.cgroup_dir, parse_pod_blkio(raw) if raw else [], root=False)

    def reconcile_dir(self, rel: str, blocks: list[BlockCfg], *, root: bool) -> None:
        """Write the blocks' values to cgroup ``rel`` and reset the disks it lists but no block names."""
        fs = self.ctx.executor.cgroupfs
        files = (ROOT_FILES if root else CLASS_FILES)[self.version]
        current = {f: configured_disks(fs.read_raw(f, rel)) for f in files}
        writes: list[BlkioWrite] = []
        wanted: set[str] = set()
        errors: list[str] = []
        for block in blocks:
            try:
                disk = self.disk_of(block)
            except BlkioConfigError as err:
                errors.append(str(err))
                continue
            wanted.add(disk)
            writes += (root_writes if root else class_writes)(self.version, disk, block.io_cfg)
        listed = sorted({d for disks in current.values() for d in disks})
        writes += resets_for(self.version, listed, wanted, root=root)
        for write in writes:
            if is_applied(write, current.get(write.resource, {})):
                continue
            if self.dry_run:
                log.warning("%s dry-run: would write %s/%s = %s", self.NAME, rel, write.resource, write.value)
                continue
            result = fs.write(write.resource, rel, write.value)
            level = logging.DEBUG if result.status is not WriteStatus.WRITTEN and result.ignorable else logging.INFO
            audit_log.log(level, "%s %s/%s -> %s: %s", self.NAME, rel, write.resource, write.value, result.status.value)
        if errors:
            raise BlkioConfigError("; ".join(errors))


ENTRY = PluginEntry(NAME, BlkIOReconcile, KOORDLET_FEATURES[NAME])
