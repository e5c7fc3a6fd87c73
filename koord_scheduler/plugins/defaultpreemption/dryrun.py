"""One node's preemption dry run: take pods off the node, put some back, ask Filter each time.

Upstream copies the NodeInfo and the CycleState for every node it examines. pykoord's snapshot is one
columnar object, so :class:`NodeTrial` edits it in place (``remove_pod`` / ``add_pod``: exact integer
accounting) and :meth:`NodeTrial.restore` puts every pod back before the next node; the CycleState is
cloned per node and kept in step through ``PreFilterExtensions.remove_pod`` / ``add_pod``, as upstream.
Filter runs uncached (the node cache keys on the node's row version, which these edits move anyway).

Nominated pods with a priority >= the preemptor's are counted, as ``RunFilterPluginsWithNominatedPods``
does: the node must fit the pod with them added and without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.errors import PluginCycleError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo
from koord_scheduler.framework.status import Code, Status, error


class NominatedPods(Protocol):
    """The scheduler's nominator, as preemption sees it."""

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]: ...


class DryRunError(Exception):
    """A PreFilter extension failed: the dry run on this node is an Error status."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class NodeTrial:
    """The node at ``info`` with some pods taken off, for one preemptor. Always call :meth:`restore`."""

    def __init__(
        self,
        fwk: Handle,
        snapshot: ClusterSnapshot,
        state: CycleState,
        pod: Pod,
        info: NodeInfo,
        *,
        nominated: Sequence[Pod] = (),
    ) -> None:
        self._fwk = fwk
        self._snapshot = snapshot
        self._state = state
        self._pod = pod
        self._info = info
        self._positions = np.array([info.position], dtype=np.intp)
        self._removed: dict[str, Pod] = {}
        self._nominated = [p for p in nominated if p.priority >= pod.priority and p.key != pod.key]

    def remove(self, victim: Pod) -> None:
        self._snapshot.remove_pod(victim)
        self._removed[victim.key] = victim
        self._extensions(self._state, "remove_pod", victim)

    def add(self, victim: Pod) -> None:
        self._snapshot.add_pod(victim)
        self._removed.pop(victim.key, None)
        self._extensions(self._state, "add_pod", victim)

    def fits_with(self, victim: Pod) -> bool:
        """Put ``victim`` back; if the pod no longer fits, take it off again."""
        self.add(victim)
        if self.filter().is_success:
            return True
        self.remove(victim)
        return False

    def filter(self) -> Status:
        """Filter the pod on the node as it stands now (two passes when nominated pods count)."""
        if self._nominated:
            status = self._filter_with_nominated()
            if not status.is_success:
                return status
        return self._filter(self._state)

    def restore(self) -> None:
        for victim in list(self._removed.values()):
            self._snapshot.add_pod(victim)
        self._removed.clear()

    def _filter_with_nominated(self) -> Status:
        state = self._state.clone()
        added: list[Pod] = []
        try:
            for other in self._nominated:
                if other.key in self._info.pods:
                    continue
                placed = replace(other, node_name=self._info.name)
                self._snapshot.add_pod(placed)
                added.append(placed)
                self._extensions(state, "add_pod", placed)
            return self._filter(state)
        finally:
            for placed in added:
                self._snapshot.remove_pod(placed)

    def _filter(self, state: CycleState) -> Status:
        probe = Diagnosis(num_all_nodes=1)
        try:
            passed = self._fwk.filter_nodes_uncached(state, self._pod, self._positions, probe)
        except PluginCycleError as exc:
            raise DryRunError(exc.status) from exc
        if len(passed):
            return Status()
        return probe.chunks[0].status_at(0) if probe.chunks else Status(Code.UNSCHEDULABLE)

    def _extensions(self, state: CycleState, method: str, other: Pod) -> None:
        for plugin in self._fwk.pre_filter_plugins:
            if plugin.name in state.skip_filter:
                continue
            extensions = plugin.pre_filter_extensions()
            if extensions is None:
                continue
            point = "AddPod" if method == "add_pod" else "RemovePod"
            try:
                status: Status = getattr(extensions, method)(state, self._pod, other, self._info)
            except Exception as exc:
                raise DryRunError(
                    error(f"running {point} on PreFilter plugin {plugin.name!r}: {exc}").with_plugin(plugin.name)
                ) from exc
            if not status.is_success:
                raise DryRunError(
                    error(f"running {point} on PreFilter plugin {plugin.name!r}: {status.message}").with_plugin(
                        plugin.name
                    )
                )
