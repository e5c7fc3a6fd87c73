"""NUMA alignment across plugins (Koordinator ``frameworkext/topologymanager``): the hints a plugin
offers for the NUMA nodes a pod's resources could come from, and the affinity the topology manager
(NodeNUMAResource) chose per node in this cycle.

A mask is a bit mask of NUMA node ids (bit ``i`` is NUMA node ``i``); ``None`` means any NUMA node.
"""

from __future__ import annotations

from dataclasses import dataclass

from koord_scheduler.framework.cycle_state import StateKey


@dataclass(frozen=True, slots=True)
class NUMATopologyHint:
    """One NUMA affinity offered for a resource (``topologymanager.NUMATopologyHint``)."""

    mask: int | None
    preferred: bool
    score: int = 0
    """Summed over providers where the merged mask equals the hint's; higher wins at equal width."""


NUMA_AFFINITY_KEY: StateKey[dict[str, int | None]] = StateKey("frameworkext/NUMAAffinity")
"""Node name → the NUMA affinity chosen there this cycle (``topologymanager.Store``); written by the
topology manager when it admits the pod, read by hint providers to allocate inside it."""
