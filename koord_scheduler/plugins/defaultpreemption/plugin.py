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
3. **Victims per node**: :mod:`.victims` (``SelectVictimsOnNode``, with exact batch shortcuts).
4. **Preemption extenders** (configured ``extenders`` with a ``preemptVerb``), each interested one in turn:
   the candidates' victims are sent and the candidates it keeps come back (:meth:`DefaultPreemption.call_extenders`).
5. **Node choice**: :func:`.policy.pick_one_node`.
6. **Execution**, after the cycle: :mod:`.execution` (nominations, DisruptionTarget conditions,
   deletions, events).

No candidate: Unschedulable with ``"preemption: 0/N nodes are available: ..."`` over the dry run's node
statuses, nodes never examined counting as ``"Preemption is not helpful for scheduling"``, and a result
that clears the nomination.

Metrics: :mod:`.metrics`, created once per registry and passed in by :func:`new`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, NamedTuple

from apis.config.plugin_args import DefaultPreemptionArgs
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.handle import Handle
from koord_scheduler.framework.interfaces import PostFilterPlugin
from koord_scheduler.framework.snapshot import ClusterSnapshot, Positions
from koord_scheduler.framework.status import Code, Status, unschedulable
from koord_scheduler.framework.types import PostFilterResult
from koord_scheduler.plugins import names
from koord_scheduler.plugins.defaultpreemption import policy
from koord_scheduler.plugins.defaultpreemption.execution import PreemptionExecutor, PreemptionRecord
from koord_scheduler.plugins.defaultpreemption.metrics import PreemptionMetrics
from koord_scheduler.plugins.defaultpreemption.pdb import PDB_KIND, BudgetStore
from koord_scheduler.plugins.defaultpreemption.policy import Candidate
from koord_scheduler.plugins.defaultpreemption.victims import VictimSearch

NAME = names.DEFAULT_PREEMPTION
ARGS = DefaultPreemptionArgs


class NodeNames(NamedTuple):
    """Node names in node-tree order, for the snapshot's node order ``positions`` (the same array object
    while the order does not change)."""

    positions: Positions
    names: list[str]


class DefaultPreemption:
    name = NAME

    def __init__(
        self,
        args: DefaultPreemptionArgs,
        handle: Handle,
        *,
        metrics: PreemptionMetrics,
        offset: Callable[[int], int] | None = None,
    ) -> None:
        """``metrics``: :meth:`.PreemptionMetrics.of` the scheduler's registry. ``offset(n)`` picks where
        the dry run starts among ``n`` potential nodes (upstream: ``rand.Int31n``); tests pass
        ``lambda n: 0``."""
        self.args = args
        self._handle = handle
        self._offset = offset or random.Random().randrange
        self.budgets = BudgetStore()
        self._metrics = metrics
        self.search = VictimSearch(handle)
        self.executor = PreemptionExecutor(handle, metrics=metrics)
        self._order_names: NodeNames | None = None
        handle.watch(PDB_KIND, self.budgets.on_event)
        handle.add_simulation_report(self._simulation_report)

    @property
    def fast_reprieve(self) -> bool:
        """Search victims by resource arithmetic where that is exact; False forces the generic per-node
        Filter search (tests and benchmarks compare the two)."""
        return self.search.fast_reprieve

    @fast_reprieve.setter
    def fast_reprieve(self, value: bool) -> None:
        self.search.fast_reprieve = value

    @property
    def history(self) -> list[PreemptionRecord]:
        """The preemptions carried out, in order (``simulate`` output)."""
        return self.executor.history

    def call_extenders(self, pod: Pod, candidates: list[Candidate]) -> tuple[list[Candidate], Status]:
        """``callExtenders``: the candidates the preemption extenders keep, with the victims they return, in
        the dry run's order; an Error status when a non-ignorable extender failed."""
        extenders = self._handle.preemption_extenders
        if extenders is None or not candidates:
            return candidates, Status()
        given = {c.node_name: (list(c.victims), c.num_pdb_violations) for c in candidates}
        kept, status = extenders.process_preemption(pod, given)
        if not status.is_success:
            return [], status
        order = [c.node_name for c in candidates if c.node_name in kept]
        order += sorted(n for n in kept if n not in given)
        return [Candidate(n, tuple(kept[n][0]), kept[n][1]) for n in order], Status()

    # ----- PostFilter -----

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        self._metrics.attempts.inc()
        result, status = self.preempt(state, pod, diagnosis)
        if status.message:
            status = Status(status.code, (policy.MESSAGE_PREFIX + status.message,))
        return result, status

    def preempt(self, state: CycleState, pod: Pod, diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status]:
        """The decision and, on success, the start of its execution. Messages are unprefixed."""
        snapshot = self._handle.snapshot
        node_statuses = diagnosis.node_statuses(snapshot)
        self.executor.forget_gone_victims()
        eligible, reason = self.eligible(pod, node_statuses)
        if not eligible:
            return None, unschedulable(reason)
        refusal = self._handle.preemption_refusal(state, pod)
        if refusal is not None:
            return None, refusal
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
        candidates, status = self.call_extenders(pod, candidates)
        if not status.is_success:
            return None, status
        best = policy.pick_one_node(candidates, self._handle.clock())
        if best is None:
            return None, unschedulable(policy.NO_CANDIDATE)
        self._execute(pod, best)
        return PostFilterResult(best.node_name), Status()

    def _node_names(self, snapshot: ClusterSnapshot) -> list[str]:
        """Node names in node-tree order, rebuilt only when the order changes."""
        positions = snapshot.node_order()
        if self._order_names is None or self._order_names.positions is not positions:
            self._order_names = NodeNames(positions, [snapshot.info(int(pos)).name for pos in positions])
        return self._order_names.names

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
                if policy.is_preemptible(other, pod) and self.executor.terminating_by_preemption(other):
                    return False, policy.NOT_ELIGIBLE_TERMINATING
        return True, ""

    def dry_run(
        self, state: CycleState, pod: Pod, potential: list[str], offset: int, wanted: int
    ) -> tuple[list[Candidate], dict[str, Status]]:
        """``DryRunPreemption`` (:meth:`.VictimSearch.dry_run`) with the current PodDisruptionBudgets."""
        return self.search.dry_run(state, pod, potential, offset, wanted, budgets=self.budgets.list())

    # ----- execution -----

    def _execute(self, pod: Pod, candidate: Candidate) -> None:
        lower = [
            p
            for p in self._handle.nominator.nominated_pods_for_node(candidate.node_name)
            if p.priority < pod.priority and p.key != pod.key
        ]
        self.executor.execute(pod, candidate, lower)

    async def drain(self) -> None:
        """Wait for the API calls of preemptions already decided (tests, simulate)."""
        await self.executor.drain()

    def _simulation_report(self) -> tuple[str, list[dict[str, Any]]]:
        rows = [{"preemptor": r.preemptor, "node": r.node, "victims": list(r.victims)} for r in self.history]
        return "Preemptions", rows


def new(args: DefaultPreemptionArgs | None, handle: Handle) -> DefaultPreemption:
    """Factory: the metrics are those of the handle's registry (shared by every profile)."""
    metrics = PreemptionMetrics.of(handle.metrics_registry)
    return DefaultPreemption(args or DefaultPreemptionArgs(), handle, metrics=metrics)


def declared_capabilities(plugin: DefaultPreemption) -> tuple[PostFilterPlugin]:
    """Every extension point and capability this plugin implements: mypy checks the signatures, and a test
    holds the list equal to what the runtime finds."""
    return (plugin,)
