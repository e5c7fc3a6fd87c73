"""The filter phase of one profile: the Filter chain, its per-node cache, and filtering with nominated pods.

One chain runs the Filter plugins in order over the nodes still alive; what it records is a parameter
(:class:`_ChainRecord`): failure chunks into a :class:`Diagnosis` for an ordinary pass, or status ids
over the changed nodes for the node cache (:mod:`~koord_scheduler.framework.node_cache`). The active
chain is cut into runs of consecutive plugins that sign the pod, each answered by one node-cache entry
keyed by those plugins' signatures only, and the plugins that do not sign it (PodTopologySpread with
constraints, InterPodAffinity with terms), run on the nodes still alive at their turn: a pod with a
spread constraint shares the resource-fit answers of every pod with its requests. A plugin with
both forms is asked through its per-node form when at most ``FEW_NODES`` nodes are left (the node or two
a cached pass recomputes, a preemption dry run on one node): the runtime decides this here, once, for
every plugin, and no plugin counts nodes itself.

Filtering with nominated pods is kube-scheduler's ``RunFilterPluginsWithNominatedPods``
(``framework/runtime/framework.go``). A pod must leave room for the pods nominated to a node with a
priority greater than or equal to its own, so on such a node Filter runs once as if those pods were
running there (accounted in the snapshot, and added to every PreFilter state through
``PreFilterExtensions.add_pod``) and once without them (filters such as pod affinity may pass only with
them absent). The node is feasible only if both passes succeed. The pass without them is the ordinary
Filter run over all nodes; :meth:`FilterPhase.filter_with_nominated_pods` runs the other pass, on the
feasible nodes that carry such pods only, so a cluster with no nominations pays nothing. When both passes
fail upstream reports the first one's reasons and we report the ordinary pass's; only the message can
differ. When one active Filter plugin offers an exact batch recheck (:class:`AddedPodsFilter`, e.g.
NodeResourcesFit when the other active filters read only the Node object), the second pass is that
recheck on all those nodes at once; otherwise it runs the whole chain node by node.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis, FailureChunk
from koord_scheduler.framework.errors import PluginCycleError, log_failure
from koord_scheduler.framework.fast_paths import AddedPodsFilter
from koord_scheduler.framework.handle import NominatedPods
from koord_scheduler.framework.interfaces import FILTER, BatchFilterPlugin, PreFilterPlugin
from koord_scheduler.framework.node_cache import FEW_NODES, FilterAnswer, NodeResultCache, cacheable_signature
from koord_scheduler.framework.restored import RESTORED_CAPACITY
from koord_scheduler.framework.snapshot import BoolArray, ClusterSnapshot, NodeInfo, Positions
from koord_scheduler.framework.status import Code, Status, error
from koord_scheduler.framework.types import DebugOptions, NodeFilterResult, PointObserver

log = logging.getLogger(__name__)

PodSigner = Callable[[Pod], Hashable | None]


@dataclass(frozen=True, slots=True)
class FilterEntry:
    """One Filter plugin as the chain runs it."""

    name: str
    batch: BatchFilterPlugin
    """The plugin itself, or :class:`~.per_node_filter.PerNodeFilter` over its per-node form."""
    few: BatchFilterPlugin | None
    """The per-node form, when the plugin has both: asked when at most ``FEW_NODES`` nodes are left."""
    sign: PodSigner | None


class _ChainRecord(Protocol):
    def rejected(
        self, alive: Positions, passed: BoolArray, reason_ids: np.ndarray | None, statuses: tuple[Status, ...]
    ) -> None:
        """One plugin rejected ``alive[~passed]``; ``reason_ids`` (aligned with ``alive``) index ``statuses``."""
        ...


class _IntoDiagnosis:
    """An ordinary pass: each plugin's rejections become a failure chunk of the diagnosis."""

    __slots__ = ("_diagnosis", "_log")

    def __init__(self, diagnosis: Diagnosis, log_failures: Callable[[FailureChunk], None] | None) -> None:
        self._diagnosis = diagnosis
        self._log = log_failures

    def rejected(
        self, alive: Positions, passed: BoolArray, reason_ids: np.ndarray | None, statuses: tuple[Status, ...]
    ) -> None:
        failed = ~passed
        self.add(FailureChunk(alive[failed], None if reason_ids is None else reason_ids[failed], statuses))

    def add(self, chunk: FailureChunk) -> None:
        self._diagnosis.add_chunk(chunk)
        if self._log is not None:
            self._log(chunk)


class _IntoCacheIds:
    """A node-cache pass over the changed nodes: -1 for a node that passed, else an index into ``statuses``."""

    __slots__ = ("_alive_index", "ids", "statuses")

    def __init__(self, n: int) -> None:
        self.ids = np.full(n, -1, dtype=np.int32)
        self.statuses: list[Status] = []
        self._alive_index: np.ndarray | None = None
        """Where the chain's alive nodes sit among the changed ones; None while that is all of them."""

    def rejected(
        self, alive: Positions, passed: BoolArray, reason_ids: np.ndarray | None, statuses: tuple[Status, ...]
    ) -> None:
        failed = ~passed
        index = self._alive_index
        where = np.flatnonzero(failed) if index is None else index[failed]
        self.ids[where] = len(self.statuses) if reason_ids is None else len(self.statuses) + reason_ids[failed]
        self.statuses.extend(statuses)
        self._alive_index = np.flatnonzero(passed) if index is None else index[passed]


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


MAX_REJECTIONS = 16
"""Repeated read-only rejections kept by :class:`FilterPhase` (a few spread patterns per burst)."""


class _Rejection(NamedTuple):
    result: NodeFilterResult
    alive: Positions
    """The nodes ``result`` answered for (held with it, so their ids stay theirs)."""
    chunk: FailureChunk
    left: Positions


def _read_only_result(result: NodeFilterResult, alive: Positions) -> bool:
    """Whether ``result`` and the nodes it answered for cannot change: the same objects then mean the
    same failure chunk and the same nodes left."""
    reasons = result.reason_ids
    return (
        not alive.flags.writeable
        and not result.passed.flags.writeable
        and (reasons is None or not reasons.flags.writeable)
    )


class FilterPhase:
    """Runs Filter for one profile; see the module docstring."""

    __slots__ = (
        "_added_pods_filters",
        "_debug",
        "_last_gather",
        "_node_cache",
        "_observer",
        "_rejections",
        "entries",
        "pre_filter_plugins",
    )

    def __init__(
        self,
        entries: Sequence[FilterEntry],
        pre_filter_plugins: Sequence[PreFilterPlugin],
        *,
        added_pods_filters: Sequence[AddedPodsFilter],
        node_cache: NodeResultCache | None,
        observer: PointObserver | None,
        debug: DebugOptions,
    ) -> None:
        self.entries = list(entries)
        self.pre_filter_plugins = list(pre_filter_plugins)
        self._added_pods_filters = list(added_pods_filters)
        self._node_cache = node_cache
        self._observer = observer
        self._debug = debug
        self._last_gather: tuple[tuple[int, int], Positions, Positions, FailureChunk] | None = None
        """(answer stamp, positions asked, feasible positions, failure chunk) of the last cached pass with
        failures: the next pass reuses them while neither the answer nor the positions changed (a cluster
        with full nodes otherwise pays a gather and a ``np.unique`` over every node each cycle)."""
        self._rejections: OrderedDict[tuple[str, int, int], _Rejection] = OrderedDict()
        """Per (plugin, id of its read-only result, id of the read-only nodes it answered for): the failure
        chunk and the nodes left, recorded into a diagnosis. A plugin that answers the same nodes with the
        same result object (PodTopologySpread for the pods of one spread pattern) costs no gathers. At
        most ``MAX_REJECTIONS``, least recently used dropped."""

    # ----- the chain -----

    def _chain(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: ClusterSnapshot,
        positions: Positions,
        record: _ChainRecord,
        *,
        entries: Sequence[FilterEntry] | None = None,
    ) -> Positions:
        """Every active Filter plugin of ``entries`` (default: all) in order over the nodes still alive;
        returns those left."""
        alive = positions
        skip = state.skip_filter
        for entry in self.entries if entries is None else entries:
            if entry.name in skip or len(alive) == 0:
                continue
            plugin = entry.few if entry.few is not None and len(alive) <= FEW_NODES else entry.batch
            try:
                result = plugin.filter_nodes(state, pod, snapshot, alive)
            except Exception as exc:
                log_failure(log, f"Filter plugin {entry.name} raised", exc)
                raise PluginCycleError(
                    error(f"running Filter plugin {entry.name!r}: {exc}").with_plugin(entry.name)
                ) from exc
            passed = result.passed
            if result.every_node_passed or passed.all():
                continue
            stamped = tuple(s.with_plugin(entry.name) for s in result.statuses)
            for s in stamped:
                if s.code == Code.ERROR:
                    raise PluginCycleError(s)
            if isinstance(record, _IntoDiagnosis) and _read_only_result(result, alive):
                key = (entry.name, id(result), id(alive))
                known = self._rejections.get(key)
                if known is None or known.result is not result or known.alive is not alive:
                    failed = ~passed
                    reasons = result.reason_ids
                    chunk = FailureChunk(
                        _read_only(alive[failed]), None if reasons is None else _read_only(reasons[failed]), stamped
                    )
                    known = self._rejections[key] = _Rejection(result, alive, chunk, _read_only(alive[passed]))
                    if len(self._rejections) > MAX_REJECTIONS:
                        self._rejections.popitem(last=False)
                else:
                    self._rejections.move_to_end(key)
                record.add(known.chunk)
                alive = known.left
                continue
            record.rejected(alive, passed, result.reason_ids, stamped)
            alive = alive[passed]
        return alive

    # ----- entry points -----

    def run(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions, diagnosis: Diagnosis
    ) -> Positions:
        """Filter ``positions``; each node keeps the status of the first plugin that rejected it. Returns
        the feasible positions in input order. Cached per node when every active plugin signs the pod."""
        started = time.perf_counter()
        plan = self._plan(state, pod)
        if plan is None:
            log_failures = self._log_failures(pod, snapshot) if self._debug.filters else None
            feasible = self._chain(state, pod, snapshot, positions, _IntoDiagnosis(diagnosis, log_failures))
        elif len(plan) == 1 and isinstance(plan[0], _Segment):
            segment = plan[0]
            feasible = self._run_cached(
                segment.key,
                state,
                pod,
                snapshot=snapshot,
                positions=positions,
                diagnosis=diagnosis,
                entries=segment.entries,
            )
        else:
            feasible = self._run_plan(plan, state, pod, snapshot=snapshot, positions=positions, diagnosis=diagnosis)
        if self._observer is not None:
            self._observer(FILTER, Code.SUCCESS, time.perf_counter() - started)
        return feasible

    def uncached(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions, diagnosis: Diagnosis
    ) -> Positions:
        """:meth:`run` without the per-node cache, for answers that depend on more than the node's row and
        the pod's signature (preemption dry runs, nominated pods added to a node)."""
        started = time.perf_counter()
        feasible = self._chain(state, pod, snapshot, positions, _IntoDiagnosis(diagnosis, None))
        if self._observer is not None:
            self._observer(FILTER, Code.SUCCESS, time.perf_counter() - started)
        return feasible

    def _run_cached(
        self,
        key: Hashable,
        state: CycleState,
        pod: Pod,
        *,
        snapshot: ClusterSnapshot,
        positions: Positions,
        diagnosis: Diagnosis,
        entries: Sequence[FilterEntry],
    ) -> Positions:
        answer = self._segment_answer(key, entries, state, pod, snapshot)
        if answer.failing == 0:
            return positions  # no node the entry knows fails (unknown positions pass, as below)
        last = self._last_gather
        if last is not None and last[0] == answer.stamp and last[1] is positions:
            feasible, chunk = last[2], last[3]
        else:
            selected = answer.ids[positions]
            passed = selected < 0
            if passed.all():
                return positions
            failed = ~passed
            used, compact = np.unique(selected[failed], return_inverse=True)
            statuses = answer.statuses
            chunk = FailureChunk(
                _read_only(positions[failed]), _read_only(compact), tuple(statuses[i] for i in used.tolist())
            )
            feasible = _read_only(positions[passed])
            if not positions.flags.writeable:  # the snapshot's node order: the same object next cycle
                self._last_gather = (answer.stamp, positions, feasible, chunk)
        diagnosis.add_chunk(chunk)
        if self._debug.filters:
            self._log_failures(pod, snapshot)(chunk)
        return feasible

    def _segment_answer(
        self, key: Hashable, entries: Sequence[FilterEntry], state: CycleState, pod: Pod, snapshot: ClusterSnapshot
    ) -> FilterAnswer:
        """The node cache's answer for one signed segment: the chain of ``entries`` over every node."""
        assert self._node_cache is not None

        def compute(dirty: Positions) -> tuple[np.ndarray, list[Status]]:
            record = _IntoCacheIds(len(dirty))
            self._chain(state, pod, snapshot, dirty, record, entries=entries)
            return record.ids, record.statuses

        return self._node_cache.filter_ids(key, snapshot, compute)

    def _run_plan(
        self,
        plan: list[_Segment | FilterEntry],
        state: CycleState,
        pod: Pod,
        *,
        snapshot: ClusterSnapshot,
        positions: Positions,
        diagnosis: Diagnosis,
    ) -> Positions:
        """The chain with its signed runs answered by the node cache and the other plugins run on the
        nodes still alive when their turn comes: each node keeps the status of the first plugin in chain
        order that rejected it, exactly as the uncached chain does."""
        log_failures = self._log_failures(pod, snapshot) if self._debug.filters else None
        into = _IntoDiagnosis(diagnosis, log_failures)
        alive = positions
        for step in plan:
            if len(alive) == 0:
                break
            if not isinstance(step, _Segment):
                alive = self._chain(state, pod, snapshot, alive, into, entries=(step,))
                continue
            answer = self._segment_answer(step.key, step.entries, state, pod, snapshot)
            if answer.failing == 0:
                continue
            selected = answer.ids[alive]
            passed = selected < 0
            if passed.all():
                continue
            failed = ~passed
            used, compact = np.unique(selected[failed], return_inverse=True)
            statuses = answer.statuses
            chunk = FailureChunk(alive[failed], compact, tuple(statuses[i] for i in used.tolist()))
            diagnosis.add_chunk(chunk)
            if log_failures is not None:
                log_failures(chunk)
            alive = alive[passed]
        return alive

    def _plan(self, state: CycleState, pod: Pod) -> list[_Segment | FilterEntry] | None:
        """The active chain cut into runs of consecutive plugins that sign the pod (answered from the node
        cache, keyed by their signatures only, so pods that differ in another plugin share them) and the
        plugins that do not (run directly). None when nothing can be cached."""
        if self._node_cache is None or state.get(RESTORED_CAPACITY) is not None:
            return None
        plan: list[_Segment | FilterEntry] = []
        run: list[FilterEntry] = []
        parts: list[tuple[str, Hashable]] = []
        cached_any = False
        skip = state.skip_filter
        for entry in self.entries:
            if entry.name in skip:
                continue
            value = entry.sign(pod) if entry.sign is not None else None
            if value is not None and cacheable_signature(value):
                run.append(entry)
                parts.append((entry.name, value))
                continue
            if run:
                plan.append(_Segment(tuple(parts), tuple(run)))
                cached_any = True
                run, parts = [], []
            plan.append(entry)
        if run:
            plan.append(_Segment(tuple(parts), tuple(run)))
            cached_any = True
        return plan if cached_any else None

    @staticmethod
    def _log_failures(pod: Pod, snapshot: ClusterSnapshot) -> Callable[[FailureChunk], None]:
        def log_chunk(chunk: FailureChunk) -> None:
            for i, pos in enumerate(chunk.positions.tolist()):
                info = snapshot.infos[pos]
                name = info.name if info else pos
                log.warning("filter failed: pod %s node %s: %s", pod.key, name, chunk.status_at(i))

        return log_chunk

    # ----- nominated pods -----

    def filter_with_nominated_pods(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: ClusterSnapshot,
        feasible: Positions,
        *,
        diagnosis: Diagnosis,
        nominated: NominatedPods | None,
    ) -> Positions:
        """Drop the feasible positions where ``pod`` does not fit once the nominated pods it yields to are
        counted; their statuses go into ``diagnosis``. Order is kept."""
        if not nominated or len(feasible) == 0:
            return feasible
        is_feasible = np.zeros(snapshot.capacity, dtype=np.bool_)
        is_feasible[feasible] = True
        feasible_at = is_feasible.tolist()
        positions = snapshot.positions
        to_check: list[tuple[int, list[Pod]]] = []
        for node_name, pods in nominated.by_node():
            pos = positions.get(node_name)
            if pos is None or not feasible_at[pos]:
                continue  # only the nodes that passed the ordinary pass are filtered again
            ahead = yielded_to(pods, pod)
            if ahead:
                to_check.append((pos, ahead))
        if not to_check:
            return feasible
        chunk = self._nominated_rejections(state, pod, snapshot, to_check)
        if chunk is None:
            return feasible
        diagnosis.add_chunk(chunk)
        drop = np.zeros(snapshot.capacity, dtype=np.bool_)
        drop[chunk.positions] = True
        return feasible[~drop[feasible]]

    def _nominated_rejections(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, to_check: list[tuple[int, list[Pod]]]
    ) -> FailureChunk | None:
        skip = state.skip_filter
        if self._added_pods_filters and not any(
            p.name not in skip and p.pre_filter_extensions() is not None for p in self.pre_filter_plugins
        ):
            active = [e.name for e in self.entries if e.name not in skip]
            for plugin in self._added_pods_filters:
                if plugin.name in skip:
                    continue
                check = plugin.added_pods_check(state, active)
                if check is not None:
                    return check.rejections(snapshot, to_check)
        rejected: list[int] = []
        statuses: list[Status] = []
        for pos, ahead in to_check:
            status = self.filter_one_with_pods(state, pod, snapshot=snapshot, position=pos, extra=ahead)
            if status.code == Code.ERROR:
                raise PluginCycleError(status)
            if not status.is_success:
                rejected.append(pos)
                statuses.append(status)
        if not rejected:
            return None
        return FailureChunk(
            np.asarray(rejected, dtype=np.intp), np.arange(len(rejected), dtype=np.int32), tuple(statuses)
        )

    def filter_one_with_pods(
        self, state: CycleState, pod: Pod, *, snapshot: ClusterSnapshot, position: int, extra: list[Pod]
    ) -> Status:
        """Filter ``pod`` on one node as if the pods in ``extra`` ran there. The snapshot is restored
        before returning; ``state`` is not modified (a clone gets the AddPod updates)."""
        info = snapshot.info(position)
        node_name = info.name
        added: list[Pod] = []
        trial = state.clone()
        try:
            for other in extra:
                if other.key in info.pods:
                    continue  # already accounted (assumed): counting it twice would be wrong
                placed = replace(other, node_name=node_name)
                snapshot.add_pod(placed)
                added.append(placed)
                status = self._run_add_pod(trial, pod, added=placed, info=info)
                if not status.is_success:
                    return status
            probe = Diagnosis(num_all_nodes=1)
            passed = self.uncached(trial, pod, snapshot, np.array([position], dtype=np.intp), probe)
        except PluginCycleError as exc:
            return exc.status
        finally:
            for placed in added:
                snapshot.remove_pod(placed)
        if len(passed):
            return Status()
        return probe.chunks[0].status_at(0) if probe.chunks else Status(Code.UNSCHEDULABLE)

    def _run_add_pod(self, state: CycleState, pod: Pod, *, added: Pod, info: NodeInfo) -> Status:
        for plugin in self.pre_filter_plugins:
            if plugin.name in state.skip_filter:
                continue
            extensions = plugin.pre_filter_extensions()
            if extensions is None:
                continue
            try:
                status = extensions.add_pod(state, pod, added, info)
            except Exception as exc:
                log_failure(log, f"AddPod of {plugin.name} raised", exc)
                return error(f"running AddPod on PreFilter plugin {plugin.name!r}: {exc}").with_plugin(plugin.name)
            if not status.is_success:
                return error(f"running AddPod on PreFilter plugin {plugin.name!r}: {status.message}").with_plugin(
                    plugin.name
                )
        return Status()


def yielded_to(nominated: Iterable[Pod], pod: Pod) -> list[Pod]:
    """The nominated pods ``pod`` must leave room for: priority >= its own, other than itself."""
    return [p for p in nominated if p.priority >= pod.priority and p.key != pod.key]


@dataclass(frozen=True, slots=True)
class _Segment:
    """Consecutive active Filter plugins that all sign the pod: one node-cache entry."""

    key: tuple[tuple[str, Hashable], ...]
    entries: tuple[FilterEntry, ...]
