"""Why a pod fits nowhere: per-node statuses kept in bulk, and kube-scheduler's FitError message."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import Code, Status

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


@dataclass(slots=True)
class FailureChunk:
    """The nodes one Filter plugin rejected in one call: ``reason_ids[i]`` indexes ``statuses``."""

    positions: Positions
    reason_ids: np.ndarray | None
    statuses: tuple[Status, ...]

    def status_at(self, i: int) -> Status:
        return self.statuses[0] if self.reason_ids is None else self.statuses[int(self.reason_ids[i])]


@dataclass(slots=True)
class Diagnosis:
    """What the filter phase learned. Statuses are stored per failure chunk, not per node, so recording
    5,000 rejections costs a few array slices."""

    num_all_nodes: int = 0
    chunks: list[FailureChunk] = field(default_factory=list)
    absent_status: Status | None = None
    """Status of nodes a PreFilterResult excluded (they are not in any chunk)."""
    num_absent: int = 0
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    all_nodes_status: Status | None = None
    """Set when PreFilter rejected the pod: every node carries this status."""

    def add_chunk(self, chunk: FailureChunk) -> None:
        if len(chunk.positions):
            self.chunks.append(chunk)
            for status in chunk.statuses:
                if status.code == Code.PENDING:
                    self.pending_plugins.add(status.plugin)
                elif status.is_rejected:
                    self.unschedulable_plugins.add(status.plugin)

    def num_recorded(self) -> int:
        return sum(len(c.positions) for c in self.chunks)

    def reason_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for chunk in self.chunks:
            if chunk.reason_ids is None:
                for reason in chunk.statuses[0].reasons:
                    counts[reason] += len(chunk.positions)
                continue
            ids, freq = np.unique(chunk.reason_ids, return_counts=True)
            for i, n in zip(ids.tolist(), freq.tolist(), strict=True):
                for reason in chunk.statuses[i].reasons:
                    counts[reason] += n
        if self.absent_status is not None and self.num_absent:
            for reason in self.absent_status.reasons:
                counts[reason] += self.num_absent
        return counts

    def node_statuses(self, snapshot: ClusterSnapshot) -> dict[str, Status]:
        """Materialise name -> Status (preemption needs it; the happy path never calls this)."""
        out: dict[str, Status] = {}
        if self.all_nodes_status is not None:
            for info in snapshot.iter_nodes():
                out[info.name] = self.all_nodes_status
            return out
        for chunk in self.chunks:
            for i, pos in enumerate(chunk.positions.tolist()):
                info = snapshot.infos[pos]
                if info is not None:
                    out[info.name] = chunk.status_at(i)
        if self.absent_status is not None:
            for info in snapshot.iter_nodes():
                out.setdefault(info.name, self.absent_status)
        return out


def fit_error_message(diagnosis: Diagnosis) -> str:
    """kube-scheduler's ``FitError.Error()``: ``0/5 nodes are available: 3 Insufficient cpu, ...``."""
    text = NO_NODE_AVAILABLE_MSG.format(diagnosis.num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        text += f" {diagnosis.pre_filter_msg}."
    else:
        parts = sorted(f"{n} {reason}" for reason, n in diagnosis.reason_counts().items())
        text += " " + ", ".join(parts) + "."
    if diagnosis.post_filter_msg:
        text += " " + diagnosis.post_filter_msg
    return text
