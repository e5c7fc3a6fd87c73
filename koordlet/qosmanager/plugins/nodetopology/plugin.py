"""NodeTopologyReport: publish this node's NodeResourceTopology (Koordinator
``pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go``; gate ``NodeTopologyReport``, Beta, on).

Every ``--node-topology-sync-interval`` (3 s) the object is recomputed from sysfs (and, once,
``/proc/cpuinfo`` for the ``cpu-basic-info`` annotation CPU normalization reads), the pods' bound
cpusets, the kubelet CPU manager checkpoint and the node's reservation annotation
(:mod:`koordlet.statesinformer.nodetopology`). It is created when missing (named after the node, owned
by it) and updated only when a managed field differs, so the API server sees a write only when a
pod's allocation, the pools or the hardware changed. The kubelet topology-manager policy is not read
(``topologyPolicies`` is ``None``); set the node label ``node.koordinator.sh/numa-topology-policy``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.cpuset.node_state import NodeCPUState, add_node_state_flags
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag, arg
from koordlet.statesinformer.nodetopology import build_node_resource_topology, topology_annotations, topology_zones
from koordlet.statesinformer.topology_writer import KubeTopologyWriter
from koordlet.system.cpuinfo import read_cpu_basic_info
from koordlet.system.errorlog import FailureLog
from koordlet.system.hugepages import read_numa_hugepages

NAME = "NodeTopologyReport"
WRITE_KIND = "NodeResourceTopology write"
log = logging.getLogger("koordlet.statesinformer.nodetopology")


class NodeTopologyReport(Strategy):
    NAME = NAME
    INTERVAL_FLAG = "node_topology_sync_interval"
    DEFAULT_INTERVAL = 3.0
    BLOCKING = True

    def __init__(self) -> None:
        super().__init__()
        self.node_state: NodeCPUState | None = None
        self.local: dict[str, Any] | None = None
        """The last computed object (kept without an API server too, as upstream keeps its local copy)."""
        self.writes = 0
        self.writer: KubeTopologyWriter | None = None
        """Built on the first write from ``ctx.kube_api``."""
        self.failures = FailureLog(log)
        self.cpu_basic_info: str | None = None
        """Read once (model, HT, turbo change only with a reboot)."""

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(
            parser,
            "--node-topology-sync-interval",
            dest="node_topology_sync_interval",
            type=positive_seconds,
            default=3.0,
            help="how often the NodeResourceTopology is recomputed (written only when it changed)",
        )
        add_node_state_flags(parser)

    def configure(self, ctx: PluginContext) -> None:
        self.node_state = NodeCPUState.from_context(ctx)

    def desired(self) -> dict[str, Any]:
        assert self.node_state is not None
        informer = self.ctx.states_informer
        node = informer.node
        topology = self.node_state.cpu_topology()
        if self.cpu_basic_info is None:
            self.cpu_basic_info = read_cpu_basic_info(
                Path(arg(self.ctx, "proc_root", Path("/proc"))), self.node_state.sysfs_root, topology
            ).to_json()
        annotations = topology_annotations(
            topology,
            informer.get_all_pods(),
            self.node_state.kubelet(),
            node.annotations if node else {},
            cpu_basic_info=self.cpu_basic_info,
        )
        gates = self.ctx.gates
        hugepages = None
        if gates is not None and gates.enabled("HugePageReport"):
            hugepages = read_numa_hugepages(Path(arg(self.ctx, "sysfs_root", Path("/sys"))))
        zones = topology_zones(topology, hugepages=hugepages)
        return build_node_resource_topology(
            self.ctx.node_name, node.uid if node else "", annotations=annotations, zones=zones
        )

    def tick(self) -> None:
        desired = self.desired()
        self.local = desired
        if self.ctx.kube_api is None or self.dry_run:
            return
        if not desired["metadata"].get("ownerReferences"):
            # The Node was not synced when ``desired`` was built (checked on what was built, so a Node
            # arriving meanwhile cannot leave an object without its owner): it is created owned by it, so wait.
            return
        try:
            self.publish(desired)
        except Exception as err:  # an API outage: one line per kind, retried next tick
            self.failures.failed(WRITE_KIND, err)
        else:
            self.failures.succeeded(WRITE_KIND)

    def publish(self, desired: dict[str, Any]) -> None:
        """Create the object, or update its managed fields when they differ (:class:`KubeTopologyWriter`)."""
        if self.writer is None:
            assert self.ctx.kube_api is not None
            self.writer = KubeTopologyWriter(self.ctx.kube_api, self.ctx.node_name)
        if self.writer.write(desired):
            self.writes += 1


ENTRY = PluginEntry(NAME, NodeTopologyReport, KOORDLET_FEATURES[NAME])
