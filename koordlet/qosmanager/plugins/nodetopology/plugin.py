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
import json
import logging
from pathlib import Path
from typing import Any

from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.cpuset.node_state import NodeCPUState, add_node_state_flags
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag, arg
from koordlet.statesinformer.nodetopology import (
    MANAGED_ANNOTATIONS,
    build_node_resource_topology,
    merge_zones,
    needs_update,
    topology_annotations,
    topology_zones,
)
from koordlet.system.cpuinfo import read_cpu_basic_info
from koordlet.system.errorlog import FailureLog
from koordlet.system.hugepages import read_numa_hugepages

NAME = "NodeTopologyReport"
WRITE_KIND = "NodeResourceTopology write"
log = logging.getLogger("koordlet.statesinformer.nodetopology")
GROUP, VERSION, PLURAL = "topology.node.k8s.io", "v1alpha1", "noderesourcetopologies"


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
        if self.ctx.kube_client is None or self.dry_run:
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
        """Create the object, or update its managed fields when they differ."""
        from kubernetes import client

        api = client.CustomObjectsApi(self.ctx.kube_client)
        try:
            response: Any = api.get_cluster_custom_object(
                GROUP, VERSION, PLURAL, self.ctx.node_name, _preload_content=False
            )
        except client.ApiException as err:
            if err.status != 404:
                raise
            api.create_cluster_custom_object(GROUP, VERSION, PLURAL, desired)
            self.writes += 1
            return
        current: dict[str, Any] = json.loads(response.data)
        if not needs_update(current, desired):
            return
        meta = current.setdefault("metadata", {})
        annotations = dict(meta.get("annotations") or {})
        for key in MANAGED_ANNOTATIONS:
            annotations[key] = desired["metadata"]["annotations"][key]
        meta["annotations"] = annotations
        current["zones"] = merge_zones(current.get("zones"), desired["zones"])
        current["topologyPolicies"] = desired["topologyPolicies"]
        api.replace_cluster_custom_object(GROUP, VERSION, PLURAL, self.ctx.node_name, current)
        self.writes += 1


ENTRY = PluginEntry(NAME, NodeTopologyReport, KOORDLET_FEATURES[NAME])
