"""NodePorts (kube-scheduler ``nodeports/node_ports.go``).

PreFilter collects the pod's container host ports (``hostPort > 0``) and returns Skip when there are none.
Filter rejects, with Unschedulable ``"node(s) didn't have free ports for the requested pod ports"``, the
nodes where one of them conflicts with a port already in use (see :mod:`.policy`). Unschedulable, not
unresolvable: preempting the pod that holds the port frees it. Ports a reservation holds for this pod
(``RestoredCapacity.ports``) count as free for it; that recheck runs only on conflicting nodes.

Only nodes with used ports can conflict. They are indexed by ``(protocol, port)`` once per
``pods_generation``, and only for pods that request host ports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from apis.core.types import HostPort, Pod
from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.fast_paths import SignedPlugin
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import BatchFilterPlugin, EnqueueExtensions, PreFilterPlugin
from koord_scheduler.framework.restored import RESTORED_CAPACITY
from koord_scheduler.framework.snapshot import ClusterSnapshot, PortKey, Positions
from koord_scheduler.framework.status import Status, skip, success, unschedulable
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    NodeFilterResult,
    PreFilterResult,
    QueueingHint,
)
from koord_scheduler.plugins import names
from koord_scheduler.plugins.nodeports.policy import (
    ProtocolPort,
    conflict_positions,
    free_ports_mask,
    port_users,
)

NAME = names.NODE_PORTS
ARGS = None

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
_REJECTED = unschedulable(ERR_REASON)


@dataclass(frozen=True, slots=True)
class PreFilterState:
    host_ports: tuple[HostPort, ...]


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)


@dataclass(slots=True)
class _PortIndex:
    snapshot: ClusterSnapshot | None = None
    generation: int = -1
    users: dict[ProtocolPort, list[tuple[int, str]]] | None = None


class NodePorts:
    name = NAME

    def sign_pod(self, pod: Pod) -> Hashable:
        """What this plugin's per-node answer depends on, besides the node (see framework.node_cache)."""
        return pod.host_ports

    def __init__(self) -> None:
        self._index = _PortIndex()

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> tuple[PreFilterResult | None, Status]:
        wanted = tuple(hp for hp in pod.host_ports if hp.port > 0)
        if not wanted:
            return None, skip()
        state.write(PRE_FILTER_KEY, PreFilterState(wanted))
        return None, success()

    def pre_filter_extensions(self) -> None:
        return None

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        pre = state.get(PRE_FILTER_KEY)
        wanted = pre.host_ports if pre is not None else tuple(hp for hp in pod.host_ports if hp.port > 0)
        if not wanted:
            return NodeFilterResult.all_pass(len(positions))
        bad = conflict_positions(self._users(snapshot), wanted)
        if bad:
            restored = state.get(RESTORED_CAPACITY)
            if restored is not None and restored.ports:
                bad = _recheck_restored(bad, wanted, restored.ports, snapshot)
        return NodeFilterResult.from_mask(free_ports_mask(positions, bad, snapshot.capacity), _REJECTED)

    def _users(self, snapshot: ClusterSnapshot) -> dict[ProtocolPort, list[tuple[int, str]]]:
        index = self._index
        stale = index.snapshot is not snapshot or index.generation != snapshot.pods_generation
        if index.users is None or stale:
            index.users = port_users(
                (info.position, info.used_ports.keys())
                for info in snapshot.infos
                if info is not None and info.used_ports
            )
            index.snapshot = snapshot
            index.generation = snapshot.pods_generation
        return index.users

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), is_schedulable_after_pod_deleted
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE)),
        )


def _recheck_restored(
    bad: set[int],
    wanted: Sequence[HostPort],
    held: Mapping[int, frozenset[PortKey]],
    snapshot: ClusterSnapshot,
) -> set[int]:
    """Recheck the conflicting nodes where ports are held for this pod (a reservation it owns), with one
    use of each held port taken away: the pod may take the reservation's place, not another pod's."""
    still = set(bad)
    for pos in bad & held.keys():
        info = snapshot.infos[pos]
        if info is None:
            continue
        used = info.used_ports - Counter(held[pos])
        if not conflict_positions(port_users([(pos, used.keys())]), wanted):
            still.discard(pos)
    return still


def is_schedulable_after_pod_deleted(pod: Pod, old: object | None, new: object | None) -> QueueingHint:
    """A deleted pod frees ports only if it held one the waiting pod wants."""
    if not isinstance(old, Pod) or not old.node_name or not old.host_ports:
        return QueueingHint.SKIP
    held = port_users([(0, [(hp.host_ip, hp.protocol, hp.port) for hp in old.host_ports])])
    return QueueingHint.QUEUE if conflict_positions(held, pod.host_ports) else QueueingHint.SKIP


def new(args: None, handle: Handle) -> NodePorts:
    return NodePorts()


def declared_capabilities(
    plugin: NodePorts,
) -> tuple[
    PreFilterPlugin,
    BatchFilterPlugin,
    EnqueueExtensions,
    SignedPlugin,
]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return plugin, plugin, plugin, plugin
