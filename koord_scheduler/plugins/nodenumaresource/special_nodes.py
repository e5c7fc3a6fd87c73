"""The nodes that matter to pods not asking for bound CPUs: labelled ``cpu-bind-policy`` or
``numa-topology-policy``, annotated with a resource amplification ratio, or whose NodeResourceTopology
says kubelet full-pcpus-only or a NUMA policy. Kept up to date incrementally from the snapshot's changed
rows."""

from __future__ import annotations

from collections.abc import Mapping

from apis.extension.numa import LABEL_NODE_CPU_BIND_POLICY, LABEL_NODE_NUMA_TOPOLOGY_POLICY, NUMATopologyPolicy
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.plugins.nodenumaresource.amplification import ANNOTATION_AMPLIFICATION_RATIO
from koord_scheduler.plugins.nodenumaresource.nrt import NodeTopologyRecord


class SpecialNodes:
    def __init__(self, snapshot: ClusterSnapshot, topologies: Mapping[str, NodeTopologyRecord]) -> None:
        self._snapshot = snapshot
        self._topologies = topologies
        self.positions: set[int] = set()
        self.topology_changed = False
        """Set when a NodeResourceTopology changed: every changed row is re-read even if its Node is not new."""
        self._version = -1
        self._checked: dict[int, object] = {}
        """Position → the Node object last classified there (a pod change leaves it the same object)."""

    def sync(self) -> None:
        """Bring :attr:`positions` up to date with the nodes the snapshot changed since the last look."""
        snap = self._snapshot
        if snap.version == self._version:
            return
        changed = snap.changed_since(self._version) if self._version >= 0 else None
        if changed is None:
            self.positions.clear()
            self._checked.clear()
            rows = [info.position for info in snap.iter_nodes()]
        else:
            rows = changed.tolist()
        for pos in rows:
            node = snap.info(pos).node
            if self._checked.get(pos) is node and not self.topology_changed:
                continue
            self._checked[pos] = node
            record = self._topologies.get(node.name) if node is not None else None
            special = node is not None and (
                LABEL_NODE_CPU_BIND_POLICY in node.labels
                or ANNOTATION_AMPLIFICATION_RATIO in node.annotations
                or LABEL_NODE_NUMA_TOPOLOGY_POLICY in node.labels
                or (
                    record is not None and (record.full_pcpus_only or record.numa_policy is not NUMATopologyPolicy.NONE)
                )
            )
            if special:
                self.positions.add(pos)
            else:
                self.positions.discard(pos)
        self._version = snap.version
        self.topology_changed = False
