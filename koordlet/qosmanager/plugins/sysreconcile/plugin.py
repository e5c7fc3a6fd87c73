"""``SystemConfig`` (Alpha): the node's kernel settings from NodeSLO ``systemStrategy``, every
``--reconcile-interval-seconds`` (Koordinator ``qosmanager/plugins/sysreconcile``; values in :mod:`.policy`).

Each value is written only when the file holds another one, and never put back. The node's memory capacity
comes from the Node object; until it is known nothing is written. Files under ``--proc-root`` (``sys/...``)
and ``--sysfs-root``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag, arg
from koordlet.qosmanager.plugins.sysreconcile.policy import (
    NAME,
    SYS_SCHED_FEATURES,
    KernelWrite,
    parse_sched_features,
    sched_feature_writes,
    system_writes,
)
from koordlet.system.sysctl import KernelFiles

log = logging.getLogger("koordlet.qos")


class SystemConfig(Strategy):
    NAME = NAME
    INTERVAL_FLAG = "reconcile_interval_seconds"

    def __init__(self) -> None:
        super().__init__()
        self.kernel = KernelFiles()
        self.written: list[tuple[str, str]] = []
        """(path, value) of every write, newest last (tests and the audit log read it)."""

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(parser, "--reconcile-interval-seconds", type=positive_seconds, default=1.0, help="reconcile tick")

    def configure(self, ctx: PluginContext) -> None:
        self.kernel = KernelFiles(
            Path(arg(ctx, "proc_root", Path("/proc"))), Path(arg(ctx, "sysfs_root", Path("/sys")))
        )

    def _path(self, write: KernelWrite) -> Path:
        return self.kernel.sysctl_path(write.name) if write.root == "proc" else self.kernel.sys_path(write.name)

    def _write(self, path: Path, value: str) -> None:
        if self.dry_run:
            log.warning("%s dry-run: would set %s = %s", self.NAME, path, value)
            return
        path.write_text(value + "\n")
        self.written.append((str(path), value))
        logging.getLogger("koordlet.audit").info("%s %s -> %s: written", self.NAME, path, value)

    def tick(self) -> None:
        informer = self.ctx.states_informer
        node = informer.node
        if node is None:
            return
        strategy = informer.node_slo.system_strategy
        for write in system_writes(strategy, node.capacity.get("memory", 0)):
            path = self._path(write)
            current = self.kernel.read(path)
            if current is None:
                if not write.optional:
                    raise FileNotFoundError(f"{path}: no such kernel file")
                continue
            if current.split() != [write.value]:
                self._write(path, write.value)
        wanted = strategy.sched_features if strategy else None
        if wanted:
            path = self.kernel.sys_path(SYS_SCHED_FEATURES)
            text = self.kernel.read(path)
            if text is not None:
                for line in sched_feature_writes(parse_sched_features(text), wanted):
                    self._write(path, line)


ENTRY = PluginEntry(NAME, SystemConfig, KOORDLET_FEATURES[NAME])
