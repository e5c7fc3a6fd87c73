"""NodeResourcesBalancedAllocation (kube-scheduler v1.35 ``noderesources/balanced_allocation.go``).

PreScore resolves the configured resources to snapshot columns and returns Skip for a best-effort pod
(every configured request 0, kubernetes#129138), so such pods get no score from this plugin at all.
Score uses real requests (``requested`` plus the pod's request, no non-zero defaults). No NormalizeScore.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from apis.config.errors import ConfigError
from apis.config.plugin_args import NodeResourcesBalancedAllocationArgs
from apis.core.types import CPU, EPHEMERAL_STORAGE, MEMORY, Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.fast_paths import SignedPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import BatchScorePlugin, PreScorePlugin, ScoreExtensions, ScorePlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import Status, skip, success
from koord_scheduler.plugins import names
from koord_scheduler.plugins.balancedallocation.scoring import balanced_allocation, balanced_allocation_row
from koord_scheduler.plugins.resource_scoring import column_index

NAME = names.NODE_RESOURCES_BALANCED_ALLOCATION
ARGS = NodeResourcesBalancedAllocationArgs

_NON_SCALAR = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE})


@dataclass(frozen=True, slots=True)
class PreScoreState:
    """Snapshot columns of the resources this pod is scored on, and the pod's request in each."""

    columns: tuple[int, ...]
    amounts: IntArray
    """Read-only."""
    index: slice | list[int]
    """Selects ``columns`` (:func:`~koord_scheduler.plugins.resource_scoring.column_index`)."""


PRE_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)


def is_best_effort(pod: Pod, resources: Sequence[str]) -> bool:
    """Whether the pod requests none of ``resources`` (real requests, no non-zero defaults)."""
    return all(pod.requests.get(name, 0) == 0 for name in resources)


def pre_score_state(pod: Pod, snapshot: ClusterSnapshot, resources: Sequence[str]) -> PreScoreState:
    """Resolve ``resources`` to columns. cpu, memory and ephemeral-storage are always scored; a scalar
    resource is scored only when the pod requests it and some node has the column."""
    columns: list[int] = []
    amounts: list[int] = []
    for name in resources:
        amount = pod.requests.get(name, 0)
        column = snapshot.column(name)
        if column is None or (amount == 0 and name not in _NON_SCALAR):
            continue
        columns.append(column)
        amounts.append(amount)
    return _state(tuple(columns), tuple(amounts))


@lru_cache(maxsize=256)
def _state(columns: tuple[int, ...], amounts: tuple[int, ...]) -> PreScoreState:
    """One shared state per (columns, amounts): pods of one request shape share it."""
    array = np.array(amounts, dtype=np.int64)
    array.flags.writeable = False
    return PreScoreState(columns, array, column_index(columns))


class BalancedAllocation:
    """The NodeResourcesBalancedAllocation plugin (PreScore, Score).

    Score has both forms: the batch form over arrays and the per-node form over one node's row (the
    runtime asks the latter for the few nodes a cached answer recomputes). ``snapshot`` is the one the
    per-node form reads rows from (the handle's)."""

    name = NAME

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answer depends on, besides the node (see framework.node_cache)."""
        return pod.requests

    def __init__(self, args: NodeResourcesBalancedAllocationArgs, *, snapshot: ClusterSnapshot | None = None) -> None:
        self._snapshot = snapshot
        self._resources = tuple(r.name for r in args.resources)

    def pre_score(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> Status:
        if is_best_effort(pod, self._resources):
            return skip()
        state.write(PRE_SCORE_KEY, pre_score_state(pod, snapshot, self._resources))
        return success()

    def score_nodes(self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions) -> IntArray:
        pre = state.get(PRE_SCORE_KEY) or pre_score_state(pod, snapshot, self._resources)
        # One row gather, then the scored columns: a few numpy calls however many nodes (the node cache
        # rescores a few dozen at a time, where calls, not data, are the cost). The allocatable rows are
        # the snapshot's shared answer (NodeResourcesFit has usually just read the same ones).
        requested = snapshot.requested[positions][:, pre.index]
        requested += pre.amounts  # the gathered rows are a fresh array
        allocatable, all_positive = snapshot.allocatable_rows(positions, pre.index)
        return balanced_allocation(requested, allocatable, all_positive=all_positive)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        """The per-node form: plain numbers read from the node's row (the same answer as
        :meth:`score_nodes`, which a dozen numpy calls cost more than on one node)."""
        snapshot = self._snapshot
        if snapshot is None:
            raise RuntimeError(f"{NAME}: the per-node Score needs the snapshot (build the plugin with new())")
        pre = state.get(PRE_SCORE_KEY) or pre_score_state(pod, snapshot, self._resources)
        pos = node_info.position
        used, alloc = snapshot.requested, snapshot.allocatable
        return balanced_allocation_row(
            [used.item(pos, c) + a for c, a in zip(pre.columns, pre.amounts.tolist(), strict=True)],
            [alloc.item(pos, c) for c in pre.columns],
        )

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(args: NodeResourcesBalancedAllocationArgs | None, handle: Handle) -> BalancedAllocation:
    """Factory: validates ``args`` and builds the plugin; ``None`` means defaults (cpu, memory)."""
    args = args if args is not None else NodeResourcesBalancedAllocationArgs()
    errors = args.field_errors("")
    if errors:
        raise ConfigError(errors, summary=f"invalid {NAME} args")
    return BalancedAllocation(args, snapshot=handle.snapshot)


def declared_capabilities(
    plugin: BalancedAllocation,
) -> tuple[
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    SignedPlugin,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin
