"""DefaultPreemption (PostFilter), kube-scheduler v1.35 semantics.

When no node fits, find the node where preempting the fewest, least important lower-priority pods makes
room, nominate it, and delete those pods:

1. **Eligibility.** ``preemptionPolicy: Never`` -> Unschedulable ``"preemption: not eligible due to
   preemptionPolicy=Never."``. A pod whose nominated node still holds a victim being deleted waits
   (``"... a terminating pod on the nominated node."``) instead of preempting again, unless Filter
   called that node UnschedulableAndUnresolvable.
2. **Candidates.** Only nodes Filter rejected as Unschedulable (UnschedulableAndUnresolvable means
   removing pods cannot help). The dry run starts at a random offset into them and stops once it has at
   least one candidate that violates no PodDisruptionBudget and ``num_candidates`` in all (see
   :func:`.policy.num_candidates`; ``minCandidateNodesPercentage`` / ``minCandidateNodesAbsolute``).
3. **Victims per node** (:mod:`.dryrun`, :func:`.policy.reprieve`): all pods of lower priority come off;
   if the pod still does not fit, the node fails with Filter's status (none to remove: Unresolvable
   ``"No preemption victims found for incoming pod"``); otherwise pods go back, most important first and
   PDB-violating ones first, and those the pod still fits with are spared. Reserve pods (Koordinator
   Reservations) are never victims. When NodeResourcesFit is the only active Filter plugin that looks at
   the pods on a node (:func:`.resource_reprieve.resource_fit_request`), the same search runs for a batch
   of nodes at once as arithmetic on their requested rows (:mod:`.resource_reprieve`), and each node it
   proposes is confirmed by one full Filter pass (with and without nominated pods) before it becomes a
   candidate; any node it cannot settle goes through the generic per-node search.
4. **Node choice**: :func:`.policy.pick_one_node`.
5. **Execution**, after the cycle (the PostFilter result nominates the node at once): lower-priority
   pods nominated to that node lose their nomination, the preemptor's ``status.nominatedNodeName`` is
   written, and each victim first gets a ``DisruptionTarget`` condition (status True, reason
   ``PreemptionByScheduler``, message ``"<schedulerName>: preempting to accommodate a higher priority pod"``,
   :func:`.policy.disruption_target_patch`) through a pods/status patch, then is deleted through the API (a
   victim waiting at Permit is rejected instead), with a ``Preempted`` event ``"Preempted by pod <uid> on
   node <node>"``. Unlike upstream, a failed condition patch is logged and the deletion goes ahead: the
   in-memory cluster cannot patch pods.

No candidate: Unschedulable with ``"preemption: 0/N nodes are available: ..."`` over the dry run's node
statuses, nodes never examined counting as ``"Preemption is not helpful for scheduling"``, and a result
that clears the nomination.

Metrics: ``scheduler_preemption_attempts_total`` (every PostFilter call) and ``scheduler_preemption_victims``
(victims per successful preemption).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram

from apis.config.plugin_args import DefaultPreemptionArgs
from apis.core.parse import parse_pod
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.errors import PluginCycleError
from koord_scheduler.framework.handle import ExtendedHandle
from koord_scheduler.framework.interfaces import FrameworkAware, FrameworkRunner, NominatorAware, PostFilterPlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Code, Status, error, unresolvable, unschedulable
from koord_scheduler.framework.types import ObjectKind, PostFilterResult
from koord_scheduler.plugins import names
from koord_scheduler.plugins.defaultpreemption import policy
from koord_scheduler.plugins.defaultpreemption.dryrun import DryRunError, NodeTrial, NominatedPods
from koord_scheduler.plugins.defaultpreemption.pdb import PDB_KIND, BudgetStore
from koord_scheduler.plugins.defaultpreemption.policy import Candidate, DisruptionBudget
from koord_scheduler.plugins.defaultpreemption.resource_reprieve import (
    node_rows,
    rejection_statuses,
    reprieve_rows,
    resource_fit_request,
)
from koord_scheduler.plugins.resource_fit import FitRequest

NAME = names.DEFAULT_PREEMPTION
ARGS = DefaultPreemptionArgs

log = logging.getLogger(__name__)

DISRUPTION_TARGET = policy.DISRUPTION_TARGET

POD_KIND = ObjectKind(kind="Pod", group="", version="v1", plural="pods", namespaced=True, parse=parse_pod)
"""Pods as ``ClusterClient.patch_object_status`` addresses them (the pods/status subresource)."""


@dataclass(frozen=True, slots=True)
class _Found:
    """A node where resource arithmetic found victims (:meth:`DefaultPreemption._fast_chunk`), not yet
    confirmed by the Filter chain."""

    info: NodeInfo
    victims: list[Pod]
    violations: int
    nominated: list[Pod]


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    """One successful preemption, for ``simulate`` output."""

    preemptor: str
    node: str
    victims: tuple[str, ...]


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = _register(
            registry,
            "scheduler_preemption_attempts",
            lambda: Counter(
                "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=registry
            ),
        )
        self.victims = _register(
            registry,
            "scheduler_preemption_victims",
            lambda: Histogram(
                "scheduler_preemption_victims",
                "Number of selected preemption victims",
                buckets=[1, 2, 4, 8, 16, 32, 64],
                registry=registry,
            ),
        )


def _register(registry: CollectorRegistry, name: str, make: Callable[[], Any]) -> Any:
    """Profiles share the scheduler's registry: the second DefaultPreemption reuses the first's metric."""
    try:
        return make()
    except ValueError:
        existing = getattr(registry, "_names_to_collectors", {}).get(name)
        if existing is None:
            raise
        return existing


class DefaultPreemption:
    name = NAME

    def __init__(
        self,
        args: DefaultPreemptionArgs,
        handle: ExtendedHandle,
        *,
        offset: Callable[[int], int] | None = None,
    ) -> None:
        """``offset(n)`` picks where the dry run starts among ``n`` potential nodes (upstream:
        ``rand.Int31n``); tests pass ``lambda n: 0``."""
        self.args = args
        self._handle = handle
        self._offset = offset or random.Random().randrange
        self._fwk: Any = None
        self._nominated: NominatedPods | None = None
        self.budgets = BudgetStore()
        self._in_flight: dict[str, str] = {}
        """Victim key -> node, from the decision until the victim is gone from the snapshot."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.history: list[PreemptionRecord] = []
        self._order_names: tuple[Positions, list[str]] | None = None
        self.fast_reprieve = True
        """Search victims by resource arithmetic where that is exact (:mod:`.resource_reprieve`); False
        forces the generic per-node Filter search (tests and benchmarks compare the two)."""
        self._condition_failures = 0
        self._metrics = _Metrics(handle.metrics_registry)
        handle.watch(PDB_KIND, self.budgets.on_event)
        handle.add_simulation_report(self._simulation_report)

    # ----- wiring -----

    def bind_framework(self, fwk: FrameworkRunner) -> None:
        """The profile's framework: the dry run runs its Filter and PreFilter extensions."""
        self._fwk = fwk

    def bind_nominator(self, nominator: NominatedPods) -> None:
        self._nominated = nominator

    # ----- PostFilter -----

    def post_filter(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        self._metrics.attempts.inc()
        result, status = self.preempt(state, pod, diagnosis)
        if status.message:
            status = Status(status.code, (policy.MESSAGE_PREFIX + status.message,))
        return result, status

    def preempt(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """The decision and, on success, the start of its execution. Messages are unprefixed."""
        snapshot = self._handle.snapshot
        node_statuses = diagnosis.node_statuses(snapshot)
        self._forget_gone_victims()
        eligible, reason = self.eligible(pod, node_statuses)
        if not eligible:
            return None, unschedulable(reason)
        order = self._node_names(snapshot)
        potential = policy.potential_nodes(node_statuses, order)
        candidates: list[Candidate] = []
        dry_statuses: dict[str, Status] = {}
        if potential:
            wanted = policy.num_candidates(
                len(potential), self.args.min_candidate_nodes_percentage, self.args.min_candidate_nodes_absolute
            )
            candidates, dry_statuses = self.dry_run(state, pod, potential, self._offset(len(potential)), wanted)
        if not candidates:
            errors = [s for s in dry_statuses.values() if s.code == Code.ERROR]
            if errors:
                return None, errors[0]
            message = policy.fit_error_message(snapshot.num_nodes, dry_statuses.values(), policy.NOT_HELPFUL)
            return PostFilterResult(""), unschedulable(message)
        best = policy.pick_one_node(candidates, self._handle.clock())
        if best is None:
            return None, unschedulable(policy.NO_CANDIDATE)
        self._execute(pod, best)
        return PostFilterResult(best.node_name), Status()

    def _node_names(self, snapshot: ClusterSnapshot) -> list[str]:
        """Node names in node-tree order, rebuilt only when the order changes."""
        positions = snapshot.node_order()
        if self._order_names is None or self._order_names[0] is not positions:
            self._order_names = (positions, [snapshot.info(int(pos)).name for pos in positions])
        return self._order_names[1]

    def eligible(self, pod: Pod, node_statuses: dict[str, Status]) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        if pod.preemption_policy == policy.PREEMPT_NEVER:
            return False, policy.NOT_ELIGIBLE_NEVER
        nominated = pod.nominated_node_name
        if not nominated:
            return True, ""
        status = node_statuses.get(nominated)
        if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        info = self._handle.snapshot.node_info(nominated)
        if info is not None:
            for other in info.pods.values():
                if policy.is_preemptible(other, pod) and self._terminating_by_preemption(other):
                    return False, policy.NOT_ELIGIBLE_TERMINATING
        return True, ""

    def dry_run(
        self, state: CycleState, pod: Pod, potential: list[str], offset: int, wanted: int
    ) -> tuple[list[Candidate], dict[str, Status]]:
        """``DryRunPreemption``, sequentially from ``offset``: candidates (non-violating first) and the
        statuses of the nodes that are not candidates."""
        budgets = self.budgets.list()
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        snapshot = self._handle.snapshot
        bulk = self._nodes_independent(state)
        fit = resource_fit_request(self._fwk, state) if bulk and self.fast_reprieve else None
        screened: dict[str, Status] = {}
        found: dict[str, _Found] = {}
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

    def _nodes_independent(self, state: CycleState) -> bool:
        """No active PreFilter plugin keeps cross-node state (none has PreFilterExtensions): then one
        node's answer does not depend on what was taken off the others, and nodes can be screened in bulk."""
        return all(
            p.name in state.skip_filter or p.pre_filter_extensions() is None for p in self._fwk.pre_filter_plugins
        )

    def _screen(self, state: CycleState, pod: Pod, potential: list[str]) -> dict[str, Status]:
        """The first step of :meth:`select_victims_on_node` for every potential node in one batch Filter
        call: the nodes without preemptible pods, and those where the pod does not fit even with all of
        them gone (nominated pods counted), get their final status here. Only valid when
        :meth:`_nodes_independent`; the per-node search then runs on the rest only."""
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
                if self._nominated is not None:
                    for other in self._nominated.nominated_pods_for_node(name):
                        if other.priority >= pod.priority and other.key != pod.key and other.key not in info.pods:
                            placed = replace(other, node_name=name)
                            snapshot.add_pod(placed)
                            added.append(placed)
                positions.append(info.position)
            if positions:
                probe = Diagnosis(num_all_nodes=len(positions))
                self._fwk.filter_nodes_uncached(state, pod, np.asarray(positions, dtype=np.intp), probe)
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
    ) -> dict[str, _Found]:
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
        found: dict[str, _Found] = {}
        for i, (info, violating, non_violating, nominated) in enumerate(plans):
            if not fits[i]:
                continue
            flags = victim[i, : len(orders[i])].tolist()
            chosen = [p for p, off in zip(orders[i], flags, strict=True) if off]
            if not chosen:
                continue
            both = bool(violating) and bool(non_violating)
            victims = policy.order_victims(chosen, both_groups=both, now=now)
            found[info.name] = _Found(info, victims, sum(flags[: len(violating)]), nominated)
        return found

    def _counted_nominated(self, pod: Pod, info: NodeInfo) -> list[Pod]:
        """The nominated pods ``RunFilterPluginsWithNominatedPods`` adds to ``info`` (not yet placed)."""
        if self._nominated is None:
            return []
        return [
            other
            for other in self._nominated.nominated_pods_for_node(info.name)
            if other.priority >= pod.priority and other.key != pod.key and other.key not in info.pods
        ]

    def _confirm(self, state: CycleState, pod: Pod, batch: list[_Found]) -> set[str]:
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
            passing = set(self._fwk.filter_nodes_uncached(state, pod, positions, Diagnosis()).tolist())
            for f in batch:
                for other in f.nominated:
                    placed = replace(other, node_name=f.info.name)
                    snapshot.add_pod(placed)
                    added.append(placed)
            if added:
                passing &= set(self._fwk.filter_nodes_uncached(state, pod, positions, Diagnosis()).tolist())
        except PluginCycleError:
            return set()  # the generic search reports the error, node by node
        finally:
            for placed in added:
                snapshot.remove_pod(placed)
            for victim in removed:
                snapshot.add_pod(victim)
        return {f.info.name for f in batch if f.info.position in passing}

    def select_victims_on_node(
        self, state: CycleState, pod: Pod, info: NodeInfo, budgets: list[DisruptionBudget]
    ) -> tuple[list[Pod], int, Status]:
        """``SelectVictimsOnNode``: victims most important first, PDB violations, status."""
        potential = [p for p in info.pods.values() if policy.is_preemptible(p, pod)]
        if not potential:
            return [], 0, unresolvable(policy.NO_VICTIMS)
        nominated = self._nominated.nominated_pods_for_node(info.name) if self._nominated is not None else []
        trial = NodeTrial(self._fwk, self._handle.snapshot, state.clone(), pod, info, nominated=nominated)
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

    # ----- execution -----

    def _execute(self, pod: Pod, candidate: Candidate) -> None:
        self._metrics.victims.observe(len(candidate.victims))
        for victim in candidate.victims:
            self._in_flight[victim.key] = candidate.node_name
        lower: list[Pod] = []
        if self._nominated is not None:
            lower = [
                p for p in self._nominated.nominated_pods_for_node(candidate.node_name)
                if p.priority < pod.priority and p.key != pod.key
            ]
        self.history.append(
            PreemptionRecord(pod.key, candidate.node_name, tuple(v.key for v in candidate.victims))
        )
        log.info(
            "pod %s preempts %s on node %s", pod.key, ", ".join(v.key for v in candidate.victims), candidate.node_name
        )
        self._spawn(self._prepare_candidate(pod, candidate, lower))

    async def _prepare_candidate(self, pod: Pod, candidate: Candidate, lower: list[Pod]) -> None:
        cluster = self._handle.cluster
        node = candidate.node_name
        for other in lower:
            what = f"clearing the nomination of {other.key}"
            await _logged(cluster, "set_nominated_node_name", (other, ""), what=what)
        await _logged(cluster, "set_nominated_node_name", (pod, node), what=f"nominating {pod.key} to {node}")
        for victim in candidate.victims:
            waiting = self._handle.waiting_pod(victim.key)
            if waiting is not None:
                waiting.reject(NAME, "preempted")
                continue
            patch = policy.disruption_target_patch(victim, pod, self._handle.clock())
            if patch is not None:
                await self._mark_disruption_target(victim, patch)
            reason = f"Preempted by pod {pod.uid or pod.key} on node {node}"
            ok = await _logged(cluster, "delete_pod", (victim,), {"reason": reason}, what=f"preempting {victim.key}")
            if not ok:
                self._in_flight.pop(victim.key, None)

    async def _mark_disruption_target(self, victim: Pod, patch: dict[str, Any]) -> None:
        """Best effort, unlike upstream (which leaves the victim alone when this patch fails): the in-memory
        cluster cannot patch pods yet, and the deletion must still happen there. The first failure is a
        warning, later ones are debug messages."""
        try:
            await self._handle.cluster.patch_object_status(POD_KIND, victim.name, patch, namespace=victim.namespace)
        except Exception as exc:
            level = logging.DEBUG if self._condition_failures else logging.WARNING
            self._condition_failures += 1
            what = "preemption: marking %s as a DisruptionTarget failed (it is deleted anyway): %s"
            log.log(level, what, victim.key, exc)

    def _terminating_by_preemption(self, pod: Pod) -> bool:
        if pod.key in self._in_flight:
            return True
        return pod.meta.deletion_timestamp is not None and pod.conditions.get(DISRUPTION_TARGET) == "True"

    def _forget_gone_victims(self) -> None:
        snapshot = self._handle.snapshot
        for key, node in list(self._in_flight.items()):
            info = snapshot.node_info(node)
            if info is None or key not in info.pods:
                del self._in_flight[key]

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            return
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the API calls of preemptions already decided (tests, simulate)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        rows = [
            {"preemptor": r.preemptor, "node": r.node, "victims": list(r.victims)} for r in self.history
        ]
        return "Preemptions", rows


async def _logged(
    client: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None, *, what: str
) -> bool:
    """Call ``client.method``; a failure (including a client that lacks the method) is logged, not raised."""
    try:
        await getattr(client, method)(*args, **(kwargs or {}))
    except Exception as exc:
        log.warning("preemption: %s failed: %s", what, exc)
        return False
    return True


def new(args: DefaultPreemptionArgs | None, handle: ExtendedHandle) -> DefaultPreemption:
    return DefaultPreemption(args or DefaultPreemptionArgs(), handle)


if TYPE_CHECKING:
    _post_filter: type[PostFilterPlugin] = DefaultPreemption
    _framework_aware: type[FrameworkAware] = DefaultPreemption
    _nominator_aware: type[NominatorAware] = DefaultPreemption
