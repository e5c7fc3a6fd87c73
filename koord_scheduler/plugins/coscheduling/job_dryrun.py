"""The dry run of job-level preemption (Koordinator ``coscheduling/core/preemption.go``: ``dryRunPreemption``).

1. On every node Filter found Unschedulable, take every possible victim off
   (:func:`.preemption_policy.is_possible_victim`); a node without one gets ``no potential victims``.
2. Place the job's pending pods one after another: each goes to the cheapest node
   (:func:`.preemption_policy.preemption_costs`) among those where it passes Filter, with the job's pods
   already placed counted; a pod is only tried on the nodes the previous pod passed (Koordinator narrows
   the same way). If one pod fits nowhere, nothing is preempted. With a :data:`Placer` (network-topology
   gangs, Koordinator's ``PlanNodes``) all pods are placed at once over every potential node instead.
3. On every node that received pods, give the victims back in :func:`.preemption_policy.victim_order_key`
   order and keep each one with which all the pods placed there still fit, in turn. What is left are the
   victims.

The snapshot is edited in place and restored before :meth:`JobDryRun.run` returns. Every pod of the job is
filtered with the CycleState of the pod that triggered the preemption (as Koordinator: a job's pods are
alike), kept in step through ``PreFilterExtensions``. Nominated pods of a priority at least the member's
and outside the job are counted as ``RunFilterPluginsWithNominatedPods`` does: the member must fit with
them and without them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.errors import PluginCycleError
from koord_scheduler.framework.handle import Handle, NominatedPods
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo
from koord_scheduler.framework.status import Code, Status, error, unresolvable
from koord_scheduler.plugins.coscheduling import preemption_policy as policy


@dataclass(slots=True)
class JobPlan:
    """A successful dry run: where each pending pod goes, and the victims per node."""

    nominations: dict[str, str] = field(default_factory=dict)
    """Pod key -> node."""
    victims: dict[str, list[Pod]] = field(default_factory=dict)


Placer = Callable[[CycleState, Sequence[Pod], list[str], Mapping[str, int]], "dict[str, str] | str"]
"""Places every pending pod at once instead of one by one: ``(state, pods, nodes, costs)`` -> pod key ->
node, or why not. Network-topology gangs use it (Koordinator's ``PlanNodes``)."""


class DryRunError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class JobDryRun:
    """One dry run for ``trigger``'s job (see the module docstring)."""

    def __init__(
        self,
        fwk: Handle,
        snapshot: ClusterSnapshot,
        state: CycleState,
        trigger: Pod,
        *,
        nominated: NominatedPods | None,
        job: Collection[str],
        placer: Placer | None = None,
    ) -> None:
        self._fwk = fwk
        self._snapshot = snapshot
        self._state = state.clone()
        self._trigger = trigger
        self._nominated = nominated
        self._job = job
        self._removed: dict[str, Pod] = {}
        self._added: dict[str, Pod] = {}
        self.statuses: dict[str, Status] = {}
        """Node -> why it is not part of the plan (for the FitError message)."""
        self._placer = placer
        self.failure = ""
        """Why the placer found no placement ("" when it was not asked or did)."""

    def run(self, pending: Sequence[Pod], potential: Sequence[str]) -> JobPlan | None:
        """The plan, or None (``statuses`` says why). Raises :class:`DryRunError` when a plugin fails."""
        try:
            return self._run(pending, potential)
        finally:
            self._restore()

    def _run(self, pending: Sequence[Pod], potential: Sequence[str]) -> JobPlan | None:
        possible: dict[str, list[Pod]] = {}
        for name in potential:
            info = self._snapshot.node_info(name)
            if info is None:
                continue
            victims = [p for p in info.pods.values() if policy.is_possible_victim(p, self._trigger, self._job)]
            if not victims:
                self.statuses[name] = unresolvable(policy.NO_POTENTIAL_VICTIMS)
                continue
            possible[name] = victims
            for victim in victims:
                self._remove(victim, info)
        if not possible:
            return None
        costs = policy.preemption_costs(possible)
        plan = JobPlan()
        placed: dict[str, list[Pod]] = {}
        if self._placer is not None:
            nodes = [n for n in potential if self._snapshot.node_info(n) is not None]
            outcome = self._placer(self._state, pending, nodes, costs)
            if isinstance(outcome, str):
                self.failure = outcome
                return None
            for pod in pending:
                plan.nominations[pod.key] = outcome[pod.key]
                placed.setdefault(outcome[pod.key], []).append(pod)
                self._add_member(pod, outcome[pod.key])
        feasible = sorted(possible)
        for pod in pending if self._placer is None else ():
            feasible = self._feasible(pod, feasible)
            if not feasible:
                return None
            node = policy.pick_node(feasible, costs)
            plan.nominations[pod.key] = node
            placed.setdefault(node, []).append(pod)
            self._add_member(pod, node)
        for pods in placed.values():
            for pod in pods:
                self._take_member_off(pod)
        for node, pods in placed.items():
            plan.victims[node] = self._select_victims(node, possible.get(node, []), pods)
        return plan

    # ----- steps -----

    def _feasible(self, pod: Pod, names: list[str]) -> list[str]:
        """The nodes of ``names`` where ``pod`` passes Filter now, with and without the nominated pods
        that count; failures go to ``statuses``."""
        positions = [self._info(n).position for n in names]
        passed = self._filter(self._state, pod, positions)
        extra: dict[int, list[Pod]] = {}
        for name in names:
            info = self._info(name)
            if info.position in passed:
                others = self._counted_nominated(pod, info)
                if others:
                    extra[info.position] = others
        if extra:
            state = self._state.clone()
            added: list[Pod] = []
            try:
                for pos, others in extra.items():
                    info = self._snapshot.info(pos)
                    for other in others:
                        placed = replace(other, node_name=info.name)
                        self._snapshot.add_pod(placed)
                        added.append(placed)
                        self._extension(state, pod, placed, info, add=True)
                passed -= set(extra) - self._filter(state, pod, list(extra))
            finally:
                for placed in added:
                    self._snapshot.remove_pod(placed)
        return [n for n in names if self._info(n).position in passed]

    def _select_victims(self, node: str, possible: list[Pod], pods: list[Pod]) -> list[Pod]:
        info = self._info(node)
        victims: list[Pod] = []
        for victim in sorted(possible, key=policy.victim_order_key):
            self._add_back(victim, info)
            if not self._all_fit(pods, info):
                self._remove(victim, info)
                victims.append(victim)
        return victims

    def _all_fit(self, pods: list[Pod], info: NodeInfo) -> bool:
        """Every pod of ``pods`` fits on the node, each with the ones before it placed."""
        state = self._state.clone()
        added: list[Pod] = []
        try:
            for pod in pods:
                if not self._filter(state, pod, [info.position]):
                    return False
                placed = replace(pod, node_name=info.name)
                self._snapshot.add_pod(placed)
                added.append(placed)
                self._extension(state, pod, placed, info, add=True)
            return True
        finally:
            for placed in added:
                self._snapshot.remove_pod(placed)

    # ----- snapshot edits -----

    def _remove(self, victim: Pod, info: NodeInfo) -> None:
        self._snapshot.remove_pod(victim)
        self._removed[victim.key] = victim
        self._extension(self._state, self._trigger, victim, info, add=False)

    def _add_back(self, victim: Pod, info: NodeInfo) -> None:
        self._snapshot.add_pod(victim)
        del self._removed[victim.key]
        self._extension(self._state, self._trigger, victim, info, add=True)

    def _add_member(self, pod: Pod, node: str) -> None:
        info = self._info(node)
        placed = replace(pod, node_name=node)
        self._snapshot.add_pod(placed)
        self._added[pod.key] = placed
        self._extension(self._state, self._trigger, placed, info, add=True)

    def _take_member_off(self, pod: Pod) -> None:
        placed = self._added.pop(pod.key)
        self._snapshot.remove_pod(placed)
        self._extension(self._state, self._trigger, placed, self._info(placed.node_name), add=False)

    def _restore(self) -> None:
        for placed in self._added.values():
            self._snapshot.remove_pod(placed)
        self._added.clear()
        for victim in self._removed.values():
            self._snapshot.add_pod(victim)
        self._removed.clear()

    # ----- helpers -----

    def _info(self, name: str) -> NodeInfo:
        info = self._snapshot.node_info(name)
        assert info is not None, name
        return info

    def _counted_nominated(self, pod: Pod, info: NodeInfo) -> list[Pod]:
        if self._nominated is None:
            return []
        return [
            other
            for other in self._nominated.nominated_pods_for_node(info.name)
            if other.priority >= pod.priority and other.key not in self._job and other.key not in info.pods
        ]

    def _filter(self, state: CycleState, pod: Pod, positions: list[int]) -> set[int]:
        if not positions:
            return set()
        probe = Diagnosis(num_all_nodes=len(positions))
        try:
            passed = self._fwk.filter_nodes_uncached(state, pod, np.asarray(positions, dtype=np.intp), probe)
        except PluginCycleError as exc:
            raise DryRunError(exc.status) from exc
        for chunk in probe.chunks:
            for i, pos in enumerate(chunk.positions.tolist()):
                self.statuses[self._snapshot.info(pos).name] = chunk.status_at(i)
        return set(passed.tolist())

    def _extension(self, state: CycleState, pod: Pod, other: Pod, info: NodeInfo, *, add: bool) -> None:
        for plugin in self._fwk.pre_filter_plugins:
            if plugin.name in state.skip_filter:
                continue
            extensions = plugin.pre_filter_extensions()
            if extensions is None:
                continue
            try:
                if add:
                    status = extensions.add_pod(state, pod, other, info)
                else:
                    status = extensions.remove_pod(state, pod, other, info)
            except Exception as exc:
                status = error(str(exc))
            if status.code != Code.SUCCESS:
                point = "AddPod" if add else "RemovePod"
                raise DryRunError(
                    error(f"running {point} on PreFilter plugin {plugin.name!r}: {status.message}").with_plugin(
                        plugin.name
                    )
                )
