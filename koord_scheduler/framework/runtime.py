"""The framework runtime: runs a profile's plugins at each extension point, in the configured order."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from apis.core.types import Pod
from koord_scheduler.framework import interfaces as ep
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis, FailureChunk
from koord_scheduler.framework.errors import PluginCycleError
from koord_scheduler.framework.extender import RESTORED_CAPACITY
from koord_scheduler.framework.handle import FrameworkHandle
from koord_scheduler.framework.node_cache import FEW_NODES, NodeResultCache, cacheable_signature
from koord_scheduler.framework.score_phase import PointObserver, ScorePhase, ScorePluginEntry
from koord_scheduler.framework.snapshot import ClusterSnapshot, IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import SUCCESS, Code, Status, error, unresolvable
from koord_scheduler.framework.types import (
    ClusterEventWithHint,
    NodeFilterResult,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)

log = logging.getLogger(__name__)

__all__ = [
    "DebugOptions",
    "Framework",
    "PluginCycleError",
    "PointObserver",
    "ScorePluginEntry",
]


@dataclass(slots=True)
class DebugOptions:
    """``--debug-scores N`` and ``--debug-filters``; switchable at runtime."""

    scores: int = 0
    filters: bool = False


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class _PerNodeFilter:
    """Runs a per-node Filter plugin over many nodes."""

    def __init__(self, plugin: Any) -> None:
        self.name: str = plugin.name
        self._plugin = plugin

    def filter_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> NodeFilterResult:
        passed = np.ones(len(positions), dtype=np.bool_)
        ids = np.zeros(len(positions), dtype=np.int32)
        table: dict[Status, int] = {}
        for i, pos in enumerate(positions.tolist()):
            status: Status = self._plugin.filter(state, pod, snapshot.info(pos))
            if not status.is_success:
                passed[i] = False
                ids[i] = table.setdefault(status, len(table))
        return NodeFilterResult(passed, ids, tuple(table), every_node_passed=not table)


class _PerNodeScore:
    def __init__(self, plugin: Any) -> None:
        self.name: str = plugin.name
        self._plugin = plugin

    def score_nodes(
        self, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, positions: Positions
    ) -> IntArray:
        return np.fromiter(
            (int(self._plugin.score(state, pod, snapshot.info(p))) for p in positions.tolist()),
            dtype=np.int64,
            count=len(positions),
        )

    def score_extensions(self) -> Any:
        return self._plugin.score_extensions()


class Framework:
    """One profile's plugins, found by extension point once, when the profile is built.

    ``points`` maps each extension point (``"filter"``...) to the ordered plugin names; ``plugins`` maps
    names to instances; ``weights`` holds Score weights.
    """

    def __init__(
        self,
        profile_name: str,
        plugins: Mapping[str, Any],
        points: Mapping[str, Sequence[str]],
        weights: Mapping[str, int],
        handle: FrameworkHandle,
        *,
        percentage_of_nodes_to_score: int | None = None,
        observer: PointObserver | None = None,
        node_cache: bool = True,
    ) -> None:
        self.profile_name = profile_name
        self.handle = handle
        self.plugins = dict(plugins)
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._observer = observer
        self.node_cache = NodeResultCache() if node_cache else None
        self._last_gather: tuple[tuple[int, int], Positions, Positions, FailureChunk] | None = None
        """(answer stamp, positions asked, feasible positions, failure chunk) of the last cached Filter
        pass with failures: the next pass reuses them while neither the answer nor the positions changed
        (a cluster with full nodes otherwise pays a gather and a ``np.unique`` over every node each cycle)."""

        def at(point: str) -> list[Any]:
            return [self.plugins[n] for n in points.get(point, ())]

        self.pre_enqueue_plugins = at(ep.PRE_ENQUEUE)
        queue_sort = at(ep.QUEUE_SORT)
        self.queue_sort_plugin = queue_sort[0] if queue_sort else None
        self.pre_filter_plugins = at(ep.PRE_FILTER)
        self.filter_plugins = [
            p if callable(getattr(p, "filter_nodes", None)) else _PerNodeFilter(p) for p in at(ep.FILTER)
        ]
        # Plugins with both forms answer the few nodes a cached cycle recomputes through the per-node one.
        self._few_node_filters = {
            p.name: _PerNodeFilter(p)
            for p in at(ep.FILTER)
            if callable(getattr(p, "filter_nodes", None)) and callable(getattr(p, "filter", None))
        }
        self.post_filter_plugins = at(ep.POST_FILTER)
        self.pre_score_plugins = at(ep.PRE_SCORE)
        self.score_plugins = []
        for p in at(ep.SCORE):
            batch = callable(getattr(p, "score_nodes", None))
            runner = p if batch else _PerNodeScore(p)
            few = _PerNodeScore(p) if batch and callable(getattr(p, "score", None)) else None
            ext_fn = getattr(p, "score_extensions", None)
            ext = ext_fn() if callable(ext_fn) else None
            self.score_plugins.append(
                ScorePluginEntry(
                    p.name, runner, max(1, weights.get(p.name, 1)), ext, getattr(p, "sign_pod", None), few
                )
            )
        self.score_phase = ScorePhase(self.pre_score_plugins, self.score_plugins, self.node_cache, observer)
        self._filter_signers = [(p.name, getattr(p, "sign_pod", None)) for p in self.filter_plugins]
        self.reserve_plugins = at(ep.RESERVE)
        self.permit_plugins = at(ep.PERMIT)
        self.pre_bind_plugins = at(ep.PRE_BIND)
        self.bind_plugins = at(ep.BIND)
        self.post_bind_plugins = at(ep.POST_BIND)
        self.points = {k: tuple(v) for k, v in points.items()}

        def transformers(point: str, method: str) -> list[Any]:
            return [p for p in at(point) if callable(getattr(p, method, None))]

        self.before_pre_filter = transformers(ep.PRE_FILTER, "before_pre_filter")
        self.after_pre_filter = transformers(ep.PRE_FILTER, "after_pre_filter")
        self.before_filter = transformers(ep.FILTER, "before_filter")
        self.before_score = transformers(ep.SCORE, "before_score")
        enabled = list(dict.fromkeys(n for names in points.values() for n in names))
        with_method = [self.plugins[n] for n in enabled]

        def capable(method: str) -> list[Any]:
            return [p for p in with_method if callable(getattr(p, method, None))]

        self.reservation_filter_plugins = capable("filter_reservation")
        self.reservation_score_plugins = capable("score_reservation")
        self.reservation_restore_plugins = capable("restore_reservation")
        self.reservation_pre_bind_plugins = [
            p for p in self.pre_bind_plugins if callable(getattr(p, "pre_bind_reservation", None))
        ]
        nominators = capable("nominate_reservation")
        self.reservation_nominator = nominators[0] if nominators else None
        self.debug = DebugOptions()
        for plugin in with_method:
            bind = getattr(plugin, "bind_framework", None)
            if callable(bind):
                bind(self)

    # ----- queue -----

    def run_pre_enqueue(self, pod: Pod) -> Status:
        for p in self.pre_enqueue_plugins:
            status = self._call(p, "pre_enqueue", pod)
            if not status.is_success:
                return status
        return Status()

    def queue_less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if self.queue_sort_plugin is None:
            return a.timestamp < b.timestamp
        return bool(self.queue_sort_plugin.less(a, b))

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Plugin name -> events; plugins without EnqueueExtensions are absent (they get every event)."""
        out: dict[str, list[ClusterEventWithHint]] = {}
        for name, plugin in self.plugins.items():
            fn = getattr(plugin, "events_to_register", None)
            if callable(fn):
                out[name] = list(fn())
        return out

    # ----- scheduling cycle -----

    def run_pre_filter(self, state: CycleState, pod: Pod) -> tuple[Pod, PreFilterResult | None, Status]:
        """BeforePreFilter transformers, PreFilter, AfterPreFilter transformers.

        Returns the (possibly transformed) pod, the merged PreFilterResult, and a non-success Status
        when the pod is rejected. A transformer's failure raises :class:`PluginCycleError`.
        """
        for t in self.before_pre_filter:
            replaced, status = self._transform(t, "before_pre_filter", state, pod)
            pod = replaced or pod
        result, status = self._run_pre_filter_plugins(state, pod)
        if status.is_success:
            for t in self.after_pre_filter:
                self._check_transform(t, "after_pre_filter", t.after_pre_filter(state, pod, result))
        return pod, result, status

    def run_before_filter(self, state: CycleState, pod: Pod, positions: Positions) -> Pod:
        for t in self.before_filter:
            replaced, _ = self._transform(t, "before_filter", state, pod, self.handle.snapshot, positions)
            pod = replaced or pod
        return pod

    def run_before_score(self, state: CycleState, pod: Pod, positions: Positions) -> tuple[Pod, Positions]:
        for t in self.before_score:
            try:
                replaced, nodes, status = t.before_score(state, pod, self.handle.snapshot, positions)
            except Exception as exc:
                log.exception("BeforeScore transformer %s raised", t.name)
                raise PluginCycleError(error(f"running BeforeScore of {t.name!r}: {exc}").with_plugin(t.name)) from exc
            self._check_transform(t, "before_score", status)
            pod = replaced or pod
            if nodes is not None:
                positions = nodes
        return pod, positions

    def _transform(self, t: Any, method: str, *args: Any) -> tuple[Any, Status]:
        try:
            replaced, status = getattr(t, method)(*args)
        except Exception as exc:
            log.exception("%s transformer %s raised", method, t.name)
            raise PluginCycleError(error(f"running {method} of {t.name!r}: {exc}").with_plugin(t.name)) from exc
        self._check_transform(t, method, status)
        return replaced, status

    @staticmethod
    def _check_transform(t: Any, method: str, status: Status) -> None:
        if not status.is_success:
            stamped = status.with_plugin(t.name)
            if stamped.code == Code.SUCCESS:
                return
            raise PluginCycleError(stamped)

    # ----- reservation stages (driven by the Reservation plugin) -----

    def run_reservation_filter_plugins(
        self, state: CycleState, pod: Pod, reservation: Any, node_info: NodeInfo
    ) -> Status:
        for p in self.reservation_filter_plugins:
            status = self._call(p, "filter_reservation", state, pod, reservation, node_info)
            if not status.is_success:
                if self.debug.filters:
                    log.warning(
                        "reservation filter %s rejected %s for pod %s: %s", p.name, reservation, pod.key, status
                    )
                return status
        return Status()

    def run_nominate_reservation_filter_plugins(
        self, state: CycleState, pod: Pod, reservation: Any, node_name: str
    ) -> Status:
        for p in self.reservation_filter_plugins:
            status = self._call(p, "filter_nominate_reservation", state, pod, reservation, node_name)
            if not status.is_success:
                return status
        return Status()

    def run_reservation_score_plugins(
        self, state: CycleState, pod: Pod, reservations: Sequence[Any], node_name: str
    ) -> list[int]:
        """Sum of every reservation score plugin's score for each reservation (weight 1, as Koordinator)."""
        totals = [0] * len(reservations)
        for p in self.reservation_score_plugins:
            for i, r in enumerate(reservations):
                try:
                    totals[i] += int(p.score_reservation(state, pod, r, node_name))
                except Exception:
                    log.exception("ScoreReservation plugin %s raised", p.name)
        return totals

    def run_reservation_nominate(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if self.reservation_nominator is None:
            return Status()
        return self._call(self.reservation_nominator, "nominate_reservation", state, pod, node_name)

    async def run_pre_bind_reservation(self, state: CycleState, reservation: Any, node_name: str) -> Status:
        for p in self.reservation_pre_bind_plugins:
            status = await self._acall(p, "pre_bind_reservation", state, reservation, node_name)
            if not status.is_success:
                return status
        return Status()

    def _run_pre_filter_plugins(
        self, state: CycleState, pod: Pod
    ) -> tuple[PreFilterResult | None, Status]:
        started = time.perf_counter()
        result: PreFilterResult | None = None
        rejected: Status | None = None
        narrowing: list[str] = []
        snapshot = self.handle.snapshot
        for p in self.pre_filter_plugins:
            try:
                r, status = p.pre_filter(state, pod, snapshot)
            except Exception as exc:  # a plugin bug must not kill the scheduler
                log.exception("PreFilter plugin %s raised", p.name)
                status = error(f"running PreFilter plugin {p.name!r}: {exc}").with_plugin(p.name)
                raise PluginCycleError(status) from exc
            code = status.code
            if code != Code.SUCCESS:
                status = status.with_plugin(p.name)
                if code == Code.SKIP:
                    state.skip_filter.add(p.name)
                    continue
                if code == Code.ERROR:
                    raise PluginCycleError(status)
                if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    self._observe(ep.PRE_FILTER, code, started)
                    return result, status
                rejected = rejected or status
                continue
            if r is not None and r.node_names is not None:
                narrowing.append(p.name)
                r = PreFilterResult(r.node_names, frozenset({p.name}))
                result = r if result is None else result.merge(r)
                if not result.node_names:
                    names = sorted(narrowing)
                    msg = (
                        f"node(s) didn't satisfy plugin {names[0]}"
                        if len(names) == 1
                        else f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"
                    )
                    return result, unresolvable(msg).with_plugin(p.name)
        final = rejected or Status()
        self._observe(ep.PRE_FILTER, final.code, started)
        return result, final

    def run_filter_plugins(
        self, state: CycleState, pod: Pod, positions: Positions, diagnosis: Diagnosis
    ) -> Positions:
        """Filter ``positions`` through every plugin in order; each node keeps the status of the first
        plugin that rejected it. Returns the feasible positions in input order.

        When every active Filter plugin signs the pod, per-node answers come from the node cache and
        only changed nodes are recomputed (:mod:`~koord_scheduler.framework.node_cache`)."""
        key = self._filter_signature(state, pod)
        if key is None:
            return self._run_filter_chain(state, pod, positions, diagnosis)
        started = time.perf_counter()
        snapshot = self.handle.snapshot
        assert self.node_cache is not None
        answer = self.node_cache.filter_ids(key, snapshot, lambda dirty: self._filter_chain_ids(state, pod, dirty))
        if answer.failing == 0:
            # No node the entry knows fails (unknown positions pass, as below): nothing to gather.
            self._observe(ep.FILTER, Code.SUCCESS, started)
            return positions
        last = self._last_gather
        if last is not None and last[0] == answer.stamp and last[1] is positions:
            feasible, chunk = last[2], last[3]
        else:
            selected = answer.ids[positions]
            passed = selected < 0
            if passed.all():
                self._observe(ep.FILTER, Code.SUCCESS, started)
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
        if self.debug.filters:
            self._log_filter_failures(pod, chunk)
        self._observe(ep.FILTER, Code.SUCCESS, started)
        return feasible

    def filter_nodes_uncached(
        self, state: CycleState, pod: Pod, positions: Positions, diagnosis: Diagnosis
    ) -> Positions:
        """:meth:`run_filter_plugins` without the per-node result cache: for answers that depend on
        more than the node's row and the pod's signature (preemption dry runs, nominated pods added to
        a node). Records failures in ``diagnosis``; returns the feasible positions in input order."""
        return self._run_filter_chain(state, pod, positions, diagnosis, log_failures=False)

    def _filter_signature(self, state: CycleState, pod: Pod) -> tuple[Any, ...] | None:
        if self.node_cache is None or state.get(RESTORED_CAPACITY) is not None:
            return None
        parts: list[Any] = []
        skip = state.skip_filter
        for name, sign in self._filter_signers:
            if name in skip:
                continue
            if sign is None:
                return None
            value = sign(pod)
            if value is None:
                return None
            parts.append((name, value))
        key = (tuple(parts), frozenset(skip) if skip else _NO_SKIPS)
        return key if cacheable_signature(key) else None

    def _filter_chain_ids(self, state: CycleState, pod: Pod, dirty: Positions) -> tuple[np.ndarray, list[Status]]:
        """The Filter chain over ``dirty`` as node-cache ids: -1 passed, else an index into the statuses."""
        snapshot = self.handle.snapshot
        ids = np.full(len(dirty), -1, dtype=np.int32)
        statuses: list[Status] = []
        alive = dirty
        alive_index: np.ndarray | None = None
        """Where ``alive`` sits in ``dirty``; None while that is everything."""
        few = self._few_node_filters
        for p in self.filter_plugins:
            if p.name in state.skip_filter or len(alive) == 0:
                continue
            runner = few.get(p.name, p) if len(alive) <= FEW_NODES else p
            step = self._filter_step(runner, state, pod, snapshot, alive)
            if step is None:
                continue
            passed, reason_ids, stamped = step
            failed = ~passed
            where = np.flatnonzero(failed) if alive_index is None else alive_index[failed]
            ids[where] = len(statuses) if reason_ids is None else len(statuses) + reason_ids[failed]
            statuses.extend(stamped)
            alive_index = np.flatnonzero(passed) if alive_index is None else alive_index[passed]
            alive = alive[passed]
        return ids, statuses

    def _run_filter_chain(
        self, state: CycleState, pod: Pod, positions: Positions, diagnosis: Diagnosis, *, log_failures: bool = True
    ) -> Positions:
        started = time.perf_counter()
        snapshot = self.handle.snapshot
        alive = positions
        for p in self.filter_plugins:
            if p.name in state.skip_filter or len(alive) == 0:
                continue
            step = self._filter_step(p, state, pod, snapshot, alive)
            if step is None:
                continue
            passed, reason_ids, stamped = step
            failed = ~passed
            ids = None if reason_ids is None else reason_ids[failed]
            chunk = FailureChunk(alive[failed], ids, stamped)
            diagnosis.add_chunk(chunk)
            if self.debug.filters and log_failures:
                self._log_filter_failures(pod, chunk)
            alive = alive[passed]
        self._observe(ep.FILTER, Code.SUCCESS, started)
        return alive

    @staticmethod
    def _filter_step(
        p: Any, state: CycleState, pod: Pod, snapshot: ClusterSnapshot, alive: Positions
    ) -> tuple[np.ndarray, np.ndarray | None, tuple[Status, ...]] | None:
        """One Filter plugin over ``alive``: None when every node passes, else ``(passed, reason ids
        aligned with alive, statuses stamped with the plugin)``. Raises on an Error status."""
        try:
            result: NodeFilterResult = p.filter_nodes(state, pod, snapshot, alive)
        except Exception as exc:
            log.exception("Filter plugin %s raised", p.name)
            raise PluginCycleError(error(f"running Filter plugin {p.name!r}: {exc}").with_plugin(p.name)) from exc
        passed = result.passed
        if result.every_node_passed or passed.all():
            return None
        stamped = tuple(s.with_plugin(p.name) for s in result.statuses)
        for s in stamped:
            if s.code == Code.ERROR:
                raise PluginCycleError(s)
        return passed, result.reason_ids, stamped

    def run_post_filter(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """Runs PostFilter plugins until one succeeds. A rejecting plugin's result is kept (upstream does
        too): preemption returns an empty nomination that clears a stale ``nominatedNodeName``."""
        reasons: list[str] = []
        kept: PostFilterResult | None = None
        for p in self.post_filter_plugins:
            try:
                result, status = p.post_filter(state, pod, diagnosis)
            except Exception as exc:
                log.exception("PostFilter plugin %s raised", p.name)
                return None, error(f"running PostFilter plugin {p.name!r}: {exc}").with_plugin(p.name)
            status = status.with_plugin(p.name)
            if status.is_success:
                return result, status
            if status.code == Code.ERROR:
                return None, status
            if result is not None:
                kept = result
            reasons.extend(status.reasons)
        return kept, Status(Code.UNSCHEDULABLE, tuple(reasons))

    def run_score_plugins(self, state: CycleState, pod: Pod, positions: Positions) -> IntArray:
        """PreScore, Score, NormalizeScore and the weighted sum, for ``positions``
        (:class:`~koord_scheduler.framework.score_phase.ScorePhase`)."""
        return self.score_phase.run(state, pod, self.handle.snapshot, positions)

    def plugin_scores(self, state: CycleState, pod: Pod, positions: Positions) -> dict[str, IntArray]:
        """Per-plugin weighted scores (for ``--debug-scores``); re-runs Score, not on the hot path."""
        return self.score_phase.plugin_scores(state, pod, self.handle.snapshot, positions)

    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for p in self.reserve_plugins:
            try:
                status: Status = p.reserve(state, pod, node_name)
            except Exception as exc:
                log.exception("reserve plugin %s raised", p.name)
                return error(f"running reserve of plugin {p.name!r}: {exc}").with_plugin(p.name)
            if status.code != Code.SUCCESS:  # (a success needs no plugin stamp: nobody reads it)
                return status.with_plugin(p.name)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in reversed(self.reserve_plugins):
            try:
                p.unreserve(state, pod, node_name)
            except Exception:
                log.exception("Unreserve plugin %s raised", p.name)

    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, dict[str, float]]:
        """Success, a rejection, or Wait with the plugins and timeouts to wait for."""
        waits: dict[str, float] = {}
        for p in self.permit_plugins:
            try:
                status, timeout = p.permit(state, pod, node_name)
            except Exception as exc:
                log.exception("Permit plugin %s raised", p.name)
                return error(f"running Permit plugin {p.name!r}: {exc}").with_plugin(p.name), {}
            status = status.with_plugin(p.name)
            if status.is_wait:
                waits[p.name] = max(0.0, float(timeout))
            elif not status.is_success:
                return status, {}
        return (Status(Code.WAIT) if waits else Status()), waits

    # ----- binding cycle -----

    async def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for p in self.pre_bind_plugins:
            status = await self._acall(p, "pre_bind", state, pod, node_name)
            if not status.is_success:
                return status
        return Status()

    async def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for p in self.bind_plugins:
            status = await self._acall(p, "bind", state, pod, node_name)
            if status.is_skip:
                continue
            return status
        return error("no bind plugin bound the pod")

    def run_warm_up(self) -> None:
        """Every plugin's optional ``warm_up`` (:class:`~koord_scheduler.framework.interfaces.WarmUpPlugin`),
        in profile order."""
        for p in self.plugins.values():
            warm_up = getattr(p, "warm_up", None)
            if not callable(warm_up):
                continue
            try:
                warm_up()
            except Exception:
                log.exception("warm_up of plugin %s raised", p.name)

    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in self.post_bind_plugins:
            try:
                p.post_bind(state, pod, node_name)
            except Exception:
                log.exception("PostBind plugin %s raised", p.name)

    # ----- helpers -----

    def _log_filter_failures(self, pod: Pod, chunk: FailureChunk) -> None:
        snapshot = self.handle.snapshot
        for i, pos in enumerate(chunk.positions.tolist()):
            info = snapshot.infos[pos]
            log.warning("filter failed: pod %s node %s: %s", pod.key, info.name if info else pos, chunk.status_at(i))

    def log_score_table(self, state: CycleState, pod: Pod, positions: Positions, totals: IntArray) -> None:
        """``--debug-scores N``: the top-N nodes with each plugin's weighted score."""
        top = np.argsort(-totals, kind="stable")[: self.debug.scores]
        per_plugin = self.plugin_scores(state, pod, positions[top])
        names = list(per_plugin)
        header = "| # | Node | " + " | ".join(names) + " | Total |"
        lines = [f"scores for pod {pod.key}:", header, "|" + "---|" * (len(names) + 3)]
        snapshot = self.handle.snapshot
        for rank, i in enumerate(top.tolist()):
            cells = " | ".join(str(int(per_plugin[n][rank])) for n in names)
            lines.append(f"| {rank} | {snapshot.info(int(positions[i])).name} | {cells} | {int(totals[i])} |")
        log.warning("\n".join(lines))

    def _call(self, plugin: Any, method: str, *args: Any) -> Status:
        try:
            status: Status = getattr(plugin, method)(*args)
        except Exception as exc:
            log.exception("%s plugin %s raised", method, plugin.name)
            return error(f"running {method} of plugin {plugin.name!r}: {exc}").with_plugin(plugin.name)
        return status.with_plugin(plugin.name)

    async def _acall(self, plugin: Any, method: str, *args: Any) -> Status:
        try:
            result = getattr(plugin, method)(*args)
            status: Status = await result if asyncio.iscoroutine(result) else result
        except Exception as exc:
            log.warning("%s plugin %s failed: %s", method, plugin.name, exc)
            return error(f"running {method} of plugin {plugin.name!r}: {exc}").with_plugin(plugin.name)
        return status.with_plugin(plugin.name)

    def _observe(self, point: str, code: Code, started: float) -> None:
        if self._observer is not None:
            self._observer(point, code, time.perf_counter() - started)


_NO_SKIPS: frozenset[str] = frozenset()
