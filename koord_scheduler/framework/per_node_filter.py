"""A per-node Filter plugin run over many nodes: the batch form the Filter chain calls."""

from __future__ import annotations

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.interfaces import FilterPlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import NodeFilterResult


class PerNodeFilter:
    """A per-node Filter plugin run over many nodes (the batch signature).

    Lean on purpose: the runtime asks it for the node or two a cached cycle recomputes, once per pod, so
    the wrapper's own cost is on every pod's path. It calls ``filter`` directly, answers the shared
    all-pass result when no node fails (no arrays built), and tables the failing statuses by identity
    (a plugin returns the same few status objects; hashing a status costs more than the call)."""

    __slots__ = ("_plugin", "name")

    def __init__(self, plugin: FilterPlugin) -> None:
        self.name = plugin.name
        self._plugin = plugin

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        check = self._plugin.filter  # looked up per call: the plugin's attribute may be replaced
        infos = snapshot.infos
        failures: list[tuple[int, Status]] | None = None
        for i, pos in enumerate(positions.tolist()):
            info = infos[pos]
            if info is None or info.node is None:
                info = snapshot.info(pos)  # raises, naming the position
            status = check(state, pod, info)
            if status.code is not Code.SUCCESS:
                if failures is None:
                    failures = [(i, status)]
                else:
                    failures.append((i, status))
        if failures is None:
            return NodeFilterResult.all_pass(len(positions))
        return _failures_result(len(positions), failures)


def _failures_result(n: int, failures: list[tuple[int, Status]]) -> NodeFilterResult:
    """The batch answer for ``n`` nodes of which those in ``failures`` (index, status) failed."""
    passed = np.ones(n, dtype=np.bool_)
    ids = np.zeros(n, dtype=np.int32)
    index_of: dict[int, int] = {}
    statuses: list[Status] = []
    for i, status in failures:
        k = index_of.get(id(status))
        if k is None:
            k = index_of[id(status)] = len(statuses)
            statuses.append(status)
        passed[i] = False
        ids[i] = k
    return NodeFilterResult(passed, ids, tuple(statuses))
