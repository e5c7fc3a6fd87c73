"""AvoidNodes: filter out named nodes, prefer nodes with a label. Batch form, over all nodes at once.

Typed against koord-scheduler's public surface (``koord_scheduler``): the module declares the extension
points it implements at the bottom (``declared_capabilities``), so mypy checks the signatures.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from apis.core.types import Pod
from koord_scheduler import (
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterSnapshot,
    CycleState,
    Handle,
    IntArray,
    NodeFilterResult,
    Positions,
    unresolvable,
)

NAME = "AvoidNodes"


class AvoidNodesArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    node_names: list[str] = Field(default_factory=list, alias="nodeNames")
    prefer_label: str = Field(default="", alias="preferLabel")


ARGS = AvoidNodesArgs


class AvoidNodes:
    name = NAME

    def __init__(self, args: AvoidNodesArgs) -> None:
        self.avoid = frozenset(args.node_names)
        self.prefer_label = args.prefer_label

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        passed = np.fromiter(
            (snapshot.info(p).name not in self.avoid for p in positions.tolist()), dtype=np.bool_, count=len(positions)
        )
        return NodeFilterResult.from_mask(passed, unresolvable("node(s) are on the AvoidNodes list"))

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        if not self.prefer_label:
            return np.zeros(len(positions), dtype=np.int64)
        labels = [snapshot.info(p).node for p in positions.tolist()]
        return np.fromiter(
            (100 if node is not None and self.prefer_label in node.labels else 0 for node in labels),
            dtype=np.int64,
            count=len(positions),
        )

    def score_extensions(self) -> None:
        return None


def new(args: AvoidNodesArgs | None, handle: Handle) -> AvoidNodes:
    return AvoidNodes(args or AvoidNodesArgs())


def declared_capabilities(plugin: AvoidNodes) -> tuple[BatchFilterPlugin, BatchScorePlugin]:
    """The extension points this plugin implements; mypy checks the signatures."""
    return plugin, plugin
