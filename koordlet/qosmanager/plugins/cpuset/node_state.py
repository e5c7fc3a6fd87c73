"""The node-wide CPU facts both CPU plugins need, read once per tick: the sysfs topology (re-read when it
could not be read before) and the kubelet CPU manager checkpoint."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from koordlet.qosmanager.framework import PluginContext
from koordlet.qosmanager.plugins.strategy import add_flag, arg
from koordlet.statesinformer.nodetopology import KubeletCPUManager, parse_cpu_manager_state
from koordlet.system.cputopology import (
    DEFAULT_CPU_MANAGER_STATE,
    CPUTopology,
    TopologyError,
    read_cpu_manager_state,
    read_cpu_topology,
)

log = logging.getLogger("koordlet.qos")


def add_node_state_flags(parser: argparse.ArgumentParser) -> None:
    add_flag(
        parser,
        "--sysfs-root",
        "--sys-root-dir",
        dest="sysfs_root",
        type=Path,
        default=Path("/sys"),
        help="sysfs (CPU topology); Koordinator: --sys-root-dir",
    )
    add_flag(
        parser,
        "--kubelet-cpu-manager-state",
        dest="kubelet_cpu_manager_state",
        type=Path,
        default=DEFAULT_CPU_MANAGER_STATE,
        help="the kubelet CPU manager checkpoint (its policyName and the CPUs of static pods)",
    )


@dataclass(slots=True)
class NodeCPUState:
    sysfs_root: Path
    state_file: Path
    topology: CPUTopology | None = None

    @staticmethod
    def from_context(ctx: PluginContext) -> NodeCPUState:
        return NodeCPUState(
            Path(arg(ctx, "sysfs_root", Path("/sys"))),
            Path(arg(ctx, "kubelet_cpu_manager_state", DEFAULT_CPU_MANAGER_STATE)),
        )

    def cpu_topology(self) -> CPUTopology:
        """Raises :class:`TopologyError` while sysfs cannot be read."""
        if self.topology is None:
            self.topology = read_cpu_topology(self.sysfs_root)
        return self.topology

    def kubelet(self) -> KubeletCPUManager:
        text = read_cpu_manager_state(self.state_file)
        if text is None:
            return KubeletCPUManager()
        try:
            policy, pods = parse_cpu_manager_state(text)
        except ValueError as err:
            log.debug("ignoring %s: %s", self.state_file, err)
            return KubeletCPUManager()
        return KubeletCPUManager(policy or "none", pod_cpus=pods)


__all__ = ["NodeCPUState", "TopologyError", "add_node_state_flags"]
