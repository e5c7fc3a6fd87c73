"""Bound CPUs in preemption dry runs (Koordinator ``nodenumaresource/preempt.go``: ``AddPod`` /
``RemovePod`` and ``preemptibleAlloc``).

A dry run takes victims off a node and puts some back, asking Filter each time; the plugin's own cache
does not change. The cycle state carries, per node, what the dry run did there: the holding keys of the
pods it took off, and the holdings of pods it placed that the cache does not hold (a nominated pod, a
member of a gang placed by a job dry run), given CPUs as Reserve would. Filter then reads the node
through an :class:`~.cache.AllocationsOverlay` of those changes, so a victim's CPUs (and NUMA shares)
are free for the preemptor, and a pod placed ahead of it holds its own.

Koordinator keeps sets of CPUs to add and remove instead of pod keys; keeping the keys is exact also
when a victim consumed a Reservation: its CPUs go back to the Reservation's remainder (restored to that
Reservation's owners only), as Koordinator's per-reservation ``reservationsAlloc`` does. Koordinator's
AddPod counts nothing for a pod it holds no CPUs for; here such a pod is given CPUs, so that two members
of a gang are not both promised the same free cores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.plugins.nodenumaresource.cache import AllocationsOverlay, Holding, NodeAllocations


@dataclass(slots=True)
class NodeDelta:
    """One node's changes in a dry run."""

    removed: set[str] = field(default_factory=set)
    """Holding keys of pods taken off the node."""
    added: dict[str, Holding] = field(default_factory=dict)
    """Holdings given to pods placed on the node that the cache does not hold."""

    def clone(self) -> NodeDelta:
        return NodeDelta(set(self.removed), dict(self.added))


@dataclass(slots=True)
class PreemptionDeltas:
    """Node name → its :class:`NodeDelta` (the cycle state keeps one; ``clone`` copies it deeply, as the
    dry run clones the state per node and per trial)."""

    nodes: dict[str, NodeDelta] = field(default_factory=dict)

    def clone(self) -> PreemptionDeltas:
        return PreemptionDeltas({name: delta.clone() for name, delta in self.nodes.items()})


PREEMPTION_KEY: StateKey[PreemptionDeltas] = StateKey("PreemptibleNodeNUMAResource")


def deltas_of(state: CycleState) -> PreemptionDeltas | None:
    """The dry run's changes in ``state`` (None outside preemption dry runs and nominated-pod checks)."""
    return state.get(PREEMPTION_KEY)


def allocations_for(state: CycleState, base: NodeAllocations, node: str) -> NodeAllocations:
    """What pods hold on ``node`` as this cycle sees it: ``base``, or ``base`` with the dry run's changes."""
    return allocations_in(deltas_of(state), base, node)


def allocations_in(deltas: PreemptionDeltas | None, base: NodeAllocations, node: str) -> NodeAllocations:
    """:func:`allocations_for` with the state's changes already read (once per batch Filter call)."""
    if deltas is None:
        return base
    delta = deltas.nodes.get(node)
    if delta is None or (not delta.removed and not delta.added):
        return base
    return AllocationsOverlay(base, node, frozenset(delta.removed), delta.added)


def _delta(state: CycleState, node: str) -> NodeDelta:
    deltas = state.get(PREEMPTION_KEY)
    if deltas is None:
        deltas = PreemptionDeltas()
        state.write(PREEMPTION_KEY, deltas)
    delta = deltas.nodes.get(node)
    if delta is None:
        delta = deltas.nodes[node] = NodeDelta()
    return delta


def remove_pod(state: CycleState, base: NodeAllocations, node: str, key: str) -> None:
    """``RemovePod``: the pod under holding ``key`` is off ``node``; what it holds is free in this state."""
    delta = _delta(state, node)
    if delta.added.pop(key, None) is not None:
        return
    if base.holding(node, key) is not None:
        delta.removed.add(key)


def add_pod(
    state: CycleState,
    base: NodeAllocations,
    node: str,
    key: str,
    give: Callable[[NodeAllocations], Holding | None],
) -> None:
    """``AddPod``: the pod under holding ``key`` runs on ``node``. A pod taken off earlier holds its CPUs
    again; a pod the cache does not hold gets what ``give`` allocates it on the node as it stands now
    (None: it needs no bound CPUs or NUMA shares there, or none fit)."""
    delta = _delta(state, node)
    if key in delta.removed:
        delta.removed.discard(key)
        return
    if key in delta.added or base.holding(node, key) is not None:
        return  # already counted
    holding = give(allocations_for(state, base, node))
    if holding is not None:
        delta.added[key] = holding
