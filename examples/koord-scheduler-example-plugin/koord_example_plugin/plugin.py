"""AvoidNodes: filter out named nodes, prefer nodes with a label. Batch form, over all nodes at once."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from koord_scheduler.framework.status import unresolvable
from koord_scheduler.framework.types import NodeFilterResult

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

    def filter_nodes(self, state: Any, pod: Any, snapshot: Any, positions: Any) -> NodeFilterResult:
        passed = np.fromiter(
            (snapshot.info(p).name not in self.avoid for p in positions.tolist()), dtype=np.bool_, count=len(positions)
        )
        return NodeFilterResult.from_mask(passed, unresolvable("node(s) are on the AvoidNodes list"))

    def score_nodes(self, state: Any, pod: Any, snapshot: Any, positions: Any) -> Any:
        if not self.prefer_label:
            return np.zeros(len(positions), dtype=np.int64)
        return np.fromiter(
            (100 if self.prefer_label in snapshot.info(p).node.labels else 0 for p in positions.tolist()),
            dtype=np.int64,
            count=len(positions),
        )

    def score_extensions(self) -> None:
        return None


def new(args: AvoidNodesArgs | None, handle: Any) -> AvoidNodes:
    return AvoidNodes(args or AvoidNodesArgs())


