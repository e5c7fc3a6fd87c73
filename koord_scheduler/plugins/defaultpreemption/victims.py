"""The victim search of DefaultPreemption (kube-scheduler ``DryRunPreemption`` and ``SelectVictimsOnNode``).

For each potential node, in dry-run order from an offset: take every lower-priority pod off (reserve
pods are never victims); if the pod still does not fit, the node fails with Filter's status; otherwise
put pods back, most important first and PDB-violating ones first, and keep those the pod still fits
with (:func:`.policy.reprieve`). The search stops once it has at least one candidate that violates no
PodDisruptionBudget and ``wanted`` in all.

Two batch shortcuts give the same answers (tests compare them with the per-node search on random
clusters):

- **Screening.** When no active PreFilter plugin keeps cross-node state, the nodes without preemptible
  pods and those where the pod does not fit even with all of them gone get their final status from one
  batch Filter call.
- **Resource arithmetic.** When NodeResourcesFit is the only active Filter plugin that looks at the pods
  on a node (:func:`.resource_reprieve.resource_fit_request`), victims are found for a batch of nodes as
  arithmetic on their requested rows (:mod:`.resource_reprieve`), and each node so found is confirmed by
  one full Filter pass (with and without nominated pods) before it becomes a candidate; any node it
  cannot settle goes through the per-node search.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.errors import PluginCycleError
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.snapshot import NodeInfo
from koord_scheduler.framework.status import Status, error, unresolvable
from koord_scheduler.plugins.defaultpreemption import policy
from koord_scheduler.plugins.defaultpreemption.dryrun import DryRunError, NodeTrial, NominatedPods
from koord_scheduler.plugins.defaultpreemption.policy import Candidate, DisruptionBudget
from koord_scheduler.plugins.defaultpreemption.resource_reprieve import (
    node_rows,
    rejection_statuses,
    reprieve_rows,
)
from koord_scheduler.plugins.resource_fit import FitRequest, resource_fit_request


@dataclass(frozen=True, slots=True)
class FoundVictims:
    """A node where resource arithmetic found victims (:meth:`VictimSearch._fast_chunk`), not yet
    confirmed by the Filter chain."""

    info: NodeInfo
    victims: list[Pod]
    violations: int
    nominated: list[Pod]


class VictimSearch:
    """See the module docstring. ``handle`` is the profile's framework: the dry run runs its Filter chain
    and PreFilter extensions, and leaves room for its nominated pods."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self.fast_reprieve = True
        """Search victims by resource arithmetic where that is exact (:mod:`.resource_reprieve`); False
        forces the generic per-node Filter search (tests and benchmarks compare the two)."""

    @property
    def fwk(self) -> Handle:
        """The profile's framework (the plugin's handle)."""
        return self._handle

    @property
    def nominated(self) -> NominatedPods:
        return self._handle.nominator

    def dry_run(
        self,
        state: CycleState,
        pod: Pod,
        potential: list[str],
        offset: int,
        wanted: int,
        *,
        budgets: list[DisruptionBudget],
    ) -> tuple[list[Candidate], dict[str, Status]]:
        """``DryRunPreemption``, sequentially from ``offset``: candidates (non-violating first) and the
        statuses of the nodes that are not candidates."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        snapshot = self._handle.snapshot
        bulk = self.nodes_independent(state)
        fit = resource_fit_request(self.fwk, state) if bulk and self.fast_reprieve else None
        screened: dict[str, Status] = {}
        found: dict[str, FoundVictims] = {}
        confirmed: set[str] = set()
        batch_end = 0
        for i in range(len(potential)):
            name = potential[(offset + i) % len(potential)]
            if bulk and i == batch_end:
                # Screen the next nodes in dry-run order only: the scan usually stops within one batch.
                found_so_far = len(non_violating) + len(violating)
                batch_end = i + policy.batch_size(wanted, examined=i, found=found_so_far)
                upcoming = [potential[(offset + j) % len(potential)] for j in range(i, min(batch_end, len(potential)))]
                rejected: dict[str, Status] = {}
                found = self._fast_chunk(pod, upcoming, fit, budgets, rejected) if fit is not None else {}
                screened = self._screen(state, pod, [n for n in upcoming if n not in found and n not in rejected])
                screened.update(rejected)
            info = snapshot.node_info(name)
            if info is None:
                continue
            early = screened.get(name)
            if early is not None:
                statuses[name] = early
                continue
            fast = found.pop(name, None)
            if fast is not None and name not in confirmed:
                # Confirm as many found nodes as may still be needed, in one Filter pass.
                needed = max(wanted - len(non_violating) - len(violating), 1)
                batch = [fast, *itertools.islice(found.values(), needed - 1)]
                confirmed |= self._confirm(state, pod, batch)
            if fast is not None and name in confirmed:
                victims, violations, status = fast.victims, fast.violations, Status()
            else:
                victims, violations, status = self.select_victims_on_node(state, pod, info, budgets)
            if status.is_success and victims:
                candidate = Candidate(name, tuple(victims), violations)
                group = non_violating if violations == 0 else violating
                if len(group) < wanted:
                    group.append(candidate)
                if non_violating and len(non_violating) + len(violating) >= wanted:
                    break
                continue
            if status.is_success:
                status = error(f'expected at least one victim pod on node "{name}"')
            statuses[name] = status
        return non_violating + violating, statuses

    def nodes_independent(self, state: CycleState) -> bool:
        """No active PreFilter plugin keeps cross-node state (none has PreFilterExtensions): then one
        node's answer does not depend on what was taken off the others, and nodes can be screened in bulk."""
        return all(
            p.name in state.skip_filter or p.pre_filter_extensions() is None for p in self.fwk.pre_filter_plugins
        )

    def _screen(self, state: CycleState, pod: Pod, potential: list[str]) -> dict[str, Status]:
        """The first step of :meth:`select_victims_on_node` for every potential node in one batch Filter
        call: the nodes without preemptible pods, and those where the pod does not fit even with all of
        them gone (nominated pods counted), get their final status here. Only valid when
        :meth:`nodes_independent`; the per-node search then runs on the rest only."""
        snapshot = self._handle.snapshot
        out: dict[str, Status] = {}
        removed: list[Pod] = []
        added: list[Pod] = []
        positions: list[int] = []
        try:
            for name in potential:
                info = snapshot.node_info(name)
                if info is None:
                    continue
                victims = [p for p in info.pods.values() if policy.is_preemptible(p, pod)]
                if not victims:
                    out[name] = unresolvable(policy.NO_VICTIMS)
                    continue
                for victim in victims:
                    snapshot.remove_pod(victim)
                    removed.append(victim)
                for other in self.nominated.nominated_pods_for_node(name):
                    if other.priority >= pod.priority and other.key != pod.key and other.key not in info.pods:
                        placed = replace(other, node_name=name)
                        snapshot.add_pod(placed)
                        added.append(placed)
                positions.append(info.position)
            if positions:
                probe = Diagnosis(num_all_nodes=len(positions))
                self.fwk.filter_nodes_uncached(state, pod, np.asarray(positions, dtype=np.intp), probe)
                for chunk in probe.chunks:
                    for i, pos in enumerate(chunk.positions.tolist()):
                        out[snapshot.info(pos).name] = chunk.status_at(i)
        finally:
            for placed in added:
                snapshot.remove_pod(placed)
            for victim in removed:
                snapshot.add_pod(victim)
        return out

    def _fast_chunk(
        self,
        pod: Pod,
        node_names: list[str],
        fit: FitRequest,
        budgets: list[DisruptionBudget],
        rejected: dict[str, Status] | None = None,
    ) -> dict[str, FoundVictims]:
        """:meth:`select_victims_on_node` for a batch of nodes by resource arithmetic
        (:mod:`.resource_reprieve`, valid when :func:`.resource_fit_request` gave ``fit``), in
        ``node_names`` order: the nodes where the pod fits with some victims off. Nothing here is trusted
        before :meth:`_confirm`; every other node is left to the generic search, except that the nodes
        where the pod does not fit even with every preemptible pod off go into ``rejected`` with
        NodeResourcesFit's status (what :meth:`_screen` would report: the other active filters ignore the
        pods on the node and already passed on every potential node, their failures being unresolvable)."""
        snapshot = self._handle.snapshot
        now = self._handle.clock()
        plans: list[tuple[NodeInfo, list[Pod], list[Pod], list[Pod]]] = []
        for name in node_names:
            info = snapshot.node_info(name)
            if info is None:
                continue
            potential = [p for p in info.pods.values() if p.priority < pod.priority and not policy.is_reserve_pod(p)]
            if not potential:
                continue
            potential.sort(key=lambda p: (-p.priority, policy.start_time(p, now)))  # policy.importance_key
            violating, non_violating = policy.split_by_pdb(potential, budgets)
            plans.append((info, violating, non_violating, self._counted_nominated(pod, info)))
        if not plans:
            return {}
        orders = [violating + non_violating for _, violating, non_violating, _ in plans]
        rows = node_rows(snapshot, [info.position for info, *_ in plans], orders, [nom for *_, nom in plans])
        fits, victim = reprieve_rows(fit, rows)
        if rejected is not None and not fits.all():
            rejected.update(rejection_statuses(fit, rows, fits, [info.name for info, *_ in plans]))
        found: dict[str, FoundVictims] = {}
        for i, (info, violating, non_violating, nominated) in enumerate(plans):
            if not fits[i]:
                continue
            flags = victim[i, : len(orders[i])].tolist()
            chosen = [p for p, off in zip(orders[i], flags, strict=True) if off]
            if not chosen:
                continue
            both = bool(violating) and bool(non_violating)
            victims = policy.order_victims(chosen, both_groups=both, now=now)
            found[info.name] = FoundVictims(info, victims, sum(flags[: len(violating)]), nominated)
        return found

    def _counted_nominated(self, pod: Pod, info: NodeInfo) -> list[Pod]:
        """The nominated pods ``RunFilterPluginsWithNominatedPods`` adds to ``info`` (not yet placed)."""
        return [
            other
            for other in self.nominated.nominated_pods_for_node(info.name)
            if other.priority >= pod.priority and other.key != pod.key and other.key not in info.pods
        ]

    def _confirm(self, state: CycleState, pod: Pod, batch: list[FoundVictims]) -> set[str]:
        """The nodes of ``batch`` where the full Filter chain passes the pod with the victims off, with the
        nominated pods and without them. Nodes are independent here, so all go in one Filter pass."""
        snapshot = self._handle.snapshot
        positions = np.asarray([f.info.position for f in batch], dtype=np.intp)
        removed: list[Pod] = []
        added: list[Pod] = []
        try:
            for f in batch:
                for victim in f.victims:
                    snapshot.remove_pod(victim)
                    removed.append(victim)
            passing = set(self.fwk.filter_nodes_uncached(state, pod, positions, Diagnosis()).tolist())
            for f in batch:
                for other in f.nominated:
                    placed = replace(other, node_name=f.info.name)
                    snapshot.add_pod(placed)
                    added.append(placed)
            if added:
                passing &= set(self.fwk.filter_nodes_uncached(state, pod, positions, Diagnosis()).tolist())
        except PluginCycleError:
            return set()  # the generic search reports the error, node by node
        finally:
            for placed in added:
                snapshot.remove_pod(placed)
            for victim in removed:
                snapshot.add_pod(victim)
        return {f.info.name for f in batch if f.info.position in passing}

    def potential_victims(self, info: NodeInfo, pod: Pod) -> list[Pod]:
        """The pods on the node that the victim rule lets ``pod`` preempt (a subclass may change the rule)."""
        return [p for p in info.pods.values() if policy.is_preemptible(p, pod)]

    def select_victims_on_node(
        self, state: CycleState, pod: Pod, info: NodeInfo, budgets: list[DisruptionBudget]
    ) -> tuple[list[Pod], int, Status]:
        """``SelectVictimsOnNode``: victims most important first, PDB violations, status."""
        potential = self.potential_victims(info, pod)
        if not potential:
            return [], 0, unresolvable(policy.NO_VICTIMS)
        nominated = self.nominated.nominated_pods_for_node(info.name)
        trial = NodeTrial(self.fwk, self._handle.snapshot, state.clone(), pod, info, nominated=nominated)
        now = self._handle.clock()
        try:
            for victim in potential:
                trial.remove(victim)
            status = trial.filter()
            if not status.is_success:
                return [], 0, status
            potential.sort(key=lambda p: policy.importance_key(p, now))
            violating, non_violating = policy.split_by_pdb(potential, budgets)
            victims, violations = policy.reprieve(violating, non_violating, trial.fits_with)
        except DryRunError as exc:
            return [], 0, exc.status
        finally:
            trial.restore()
        both = bool(violating) and bool(non_violating)
        return policy.order_victims(victims, both_groups=both, now=now), violations, Status()
