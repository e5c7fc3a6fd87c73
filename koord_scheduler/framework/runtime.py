"""The framework runtime: runs a profile's plugins at each extension point, in the configured order. The
:class:`Framework` is also the :class:`~koord_scheduler.framework.handle.Handle` its plugins receive.

What each plugin implements is found once, when the profile is built
(:func:`~koord_scheduler.framework.capabilities.find_capabilities`). Filter and Score are phases of
their own (:mod:`.filter_phase`, :mod:`.score_phase`); this module runs the points in order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from apis.core.types import Pod
from koord_scheduler.framework import interfaces as ep
from koord_scheduler.framework.capabilities import find_capabilities
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.errors import PluginCycleError, log_failure
from koord_scheduler.framework.filter_phase import FilterPhase
from koord_scheduler.framework.handle import Handle, NominatedPods, SchedulerServices, ServicesView
from koord_scheduler.framework.interfaces import Plugin, PreFilterPlugin
from koord_scheduler.framework.koordinator_stages import NUMAHintProvider, ReservationFilterPlugin
from koord_scheduler.framework.node_cache import NodeResultCache
from koord_scheduler.framework.pod_patch import POD_PATCH, PodPatch
from koord_scheduler.framework.score_phase import ScorePhase
from koord_scheduler.framework.snapshot import IntArray, NodeInfo, Positions
from koord_scheduler.framework.status import SUCCESS, Code, Status, error, unresolvable
from koord_scheduler.framework.types import (
    ClusterEventWithHint,
    DebugOptions,
    PointObserver,
    PostFilterResult,
    PreFilterResult,
    QueuedPodInfo,
)

log = logging.getLogger(__name__)

__all__ = ["Framework", "PluginCycleError"]


class Framework(ServicesView):
    """One profile's plugins, found by extension point once, when the profile is built; and the
    :class:`~koord_scheduler.framework.handle.Handle` those plugins received from their factories.

    Built in two steps, as kube-scheduler's ``NewFramework`` builds ``frameworkImpl`` and then calls each
    factory with it: ``Framework(profile_name, services)`` is the handle, and :meth:`install` takes the
    plugins built with it. ``points`` maps each extension point (``"filter"``...) to the ordered plugin
    names; ``plugins`` maps names to instances; ``weights`` holds Score weights.
    """

    def __init__(
        self,
        profile_name: str,
        services: SchedulerServices,
        *,
        percentage_of_nodes_to_score: int | None = None,
        observer: PointObserver | None = None,
        node_cache: bool = True,
    ) -> None:
        super().__init__(services)
        self.profile_name = profile_name
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._observer = observer
        self.node_cache = NodeResultCache() if node_cache else None
        self.debug = DebugOptions()
        self.install({}, {}, {})

    def install(
        self, plugins: Mapping[str, Plugin], points: Mapping[str, Sequence[str]], weights: Mapping[str, int]
    ) -> None:
        """Take the profile's plugins (built with this framework as their handle) and find, once, what
        each implements. Raises :class:`~.errors.ProfileError` for a plugin configured at a point it does
        not implement."""
        self.plugins: dict[str, Plugin] = dict(plugins)
        self.points = {k: tuple(v) for k, v in points.items()}
        caps = self.capabilities = find_capabilities(self.plugins, points, weights)
        self.queue_sort_plugin = caps.queue_sort
        self.pre_filter_plugins: list[PreFilterPlugin] = caps.pre_filter
        self.post_filter_plugins = caps.post_filter
        self.score_plugins = caps.scores
        self.reservation_filter_plugins: list[ReservationFilterPlugin] = caps.reservation_filters
        self.numa_hint_providers: list[NUMAHintProvider] = caps.numa_hint_providers
        self.filter_phase = FilterPhase(
            caps.filters,
            caps.pre_filter,
            added_pods_filters=caps.added_pods_filters,
            node_cache=self.node_cache,
            observer=self._observer,
            debug=self.debug,
        )
        self.score_phase = ScorePhase(caps.pre_score, caps.scores, self.node_cache, self._observer)

    @property
    def filter_plugin_names(self) -> list[str]:
        return [e.name for e in self.filter_phase.entries]

    # ----- queue -----

    def run_pre_enqueue(self, pod: Pod) -> Status:
        for p in self.capabilities.pre_enqueue:
            try:
                status = p.pre_enqueue(pod)
            except Exception as exc:
                return _raised("pre_enqueue", p, exc)
            if not status.is_success:
                return status.with_plugin(p.name)
        return Status()

    def queue_less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if self.queue_sort_plugin is None:
            return a.timestamp < b.timestamp
        return bool(self.queue_sort_plugin.less(a, b))

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Plugin name -> events; plugins without EnqueueExtensions are absent (they get every event)."""
        return {name: list(p.events_to_register()) for name, p in self.capabilities.enqueue_extensions.items()}

    # ----- scheduling cycle -----

    def run_pre_filter(self, state: CycleState, pod: Pod) -> tuple[Pod, PreFilterResult | None, Status]:
        """The cycle's start: every :class:`~.interfaces.CyclePreparer` with the cycle's snapshot, then
        BeforePreFilter transformers, PreFilter, AfterPreFilter transformers.

        Returns the (possibly transformed) pod, the merged PreFilterResult, and a non-success Status
        when the pod is rejected. A preparer's or transformer's failure raises :class:`PluginCycleError`.
        """
        snapshot = self.snapshot
        for preparer in self.capabilities.cycle_preparers:
            try:
                preparer.prepare_cycle(snapshot)
            except Exception as exc:
                raise _transformer_error("prepare_cycle", preparer, exc) from exc
        transformers = self.capabilities.pre_filter_transformers
        for t in transformers:
            try:
                replaced, status = t.before_pre_filter(state, pod)
            except Exception as exc:
                raise _transformer_error("before_pre_filter", t, exc) from exc
            _check_transform(t, status)
            pod = replaced or pod
        result, status = self._run_pre_filter_plugins(state, pod)
        if status.is_success:
            for t in transformers:
                _check_transform(t, t.after_pre_filter(state, pod, result))
            result, status = self._run_job_node_finder(state, pod, result)
        return pod, result, status

    def _run_job_node_finder(
        self, state: CycleState, pod: Pod, result: PreFilterResult | None
    ) -> tuple[PreFilterResult | None, Status]:
        """Koordinator's FindOneNode step: the finder's node becomes the cycle's only candidate."""
        finder = self.capabilities.job_node_finder
        if finder is None:
            return result, Status()
        try:
            node, status = finder.find_one_node(state, pod, result)
        except Exception as exc:
            raise _transformer_error("find_one_node", finder, exc) from exc
        if status.code == Code.SKIP:
            return result, Status()
        if status.code == Code.ERROR:
            raise PluginCycleError(status.with_plugin(finder.name))
        if not status.is_success:
            return result, status.with_plugin(finder.name)
        return PreFilterResult(frozenset({node}), frozenset({finder.name})), Status()

    def run_prefer_nodes(self, state: CycleState, pod: Pod, result: PreFilterResult | None) -> Sequence[str]:
        """The profile's :class:`~.interfaces.NodePreferrer` nodes to try first (none without one).
        A status other than Success or Skip aborts the cycle, naming the plugin."""
        preferrer = self.capabilities.node_preferrer
        if preferrer is None:
            return ()
        try:
            nodes, status = preferrer.prefer_nodes(state, pod, result)
        except Exception as exc:
            raise _transformer_error("prefer_nodes", preferrer, exc) from exc
        if status.code == Code.SKIP:
            return ()
        _check_transform(preferrer, status)
        return nodes

    def run_before_filter(self, state: CycleState, pod: Pod, positions: Positions) -> Pod:
        for t in self.capabilities.filter_transformers:
            try:
                replaced, status = t.before_filter(state, pod, self.snapshot, positions)
            except Exception as exc:
                raise _transformer_error("before_filter", t, exc) from exc
            _check_transform(t, status)
            pod = replaced or pod
        return pod

    def run_before_score(self, state: CycleState, pod: Pod, positions: Positions) -> tuple[Pod, Positions]:
        for t in self.capabilities.score_transformers:
            try:
                replaced, nodes, status = t.before_score(state, pod, self.snapshot, positions)
            except Exception as exc:
                log_failure(log, f"BeforeScore transformer {t.name} raised", exc)
                raise PluginCycleError(error(f"running BeforeScore of {t.name!r}: {exc}").with_plugin(t.name)) from exc
            _check_transform(t, status)
            pod = replaced or pod
            if nodes is not None:
                positions = nodes
        return pod, positions

    def _run_pre_filter_plugins(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        started = time.perf_counter()
        result: PreFilterResult | None = None
        rejected: Status | None = None
        narrowing: list[str] = []
        snapshot = self.snapshot
        for p in self.pre_filter_plugins:
            try:
                r, status = p.pre_filter(state, pod, snapshot)
            except Exception as exc:  # a plugin bug must not kill the scheduler
                log_failure(log, f"PreFilter plugin {p.name} raised", exc)
                status = error(f"running PreFilter plugin {p.name!r}: {exc}").with_plugin(p.name)
                raise PluginCycleError(status) from exc
            code = status.code
            if code != Code.SUCCESS:
                if code == Code.SKIP:  # the common case for a plugin with nothing to check: no stamped copy
                    state.skip_filter.add(p.name)
                    continue
                status = status.with_plugin(p.name)
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
        self,
        state: CycleState,
        pod: Pod,
        positions: Positions,
        diagnosis: Diagnosis,
        *,
        nominated: NominatedPods | None = None,
    ) -> Positions:
        """Filter ``positions`` (:class:`~.filter_phase.FilterPhase`), then, with ``nominated``, again on
        the feasible nodes that carry nominated pods the pod must leave room for. Returns the feasible
        positions in input order; failures go into ``diagnosis``."""
        snapshot = self.snapshot
        feasible = self.filter_phase.run(state, pod, snapshot, positions, diagnosis)
        if nominated:
            feasible = self.filter_phase.filter_with_nominated_pods(
                state, pod, snapshot, feasible, diagnosis=diagnosis, nominated=nominated
            )
        return feasible

    def filter_nodes_uncached(
        self, state: CycleState, pod: Pod, positions: Positions, diagnosis: Diagnosis
    ) -> Positions:
        """:meth:`run_filter_plugins` without the per-node result cache: for answers that depend on
        more than the node's row and the pod's signature (preemption dry runs, nominated pods added to
        a node). Records failures in ``diagnosis``; returns the feasible positions in input order."""
        return self.filter_phase.uncached(state, pod, self.snapshot, positions, diagnosis)

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
                log_failure(log, f"PostFilter plugin {p.name} raised", exc)
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
        return self.score_phase.run(state, pod, self.snapshot, positions)

    def plugin_scores(self, state: CycleState, pod: Pod, positions: Positions) -> dict[str, IntArray]:
        """Per-plugin weighted scores (for ``--debug-scores``); re-runs Score, not on the hot path."""
        return self.score_phase.plugin_scores(state, pod, self.snapshot, positions)

    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for p in self.capabilities.reserve:
            try:
                status = p.reserve(state, pod, node_name)
            except Exception as exc:
                log_failure(log, f"reserve plugin {p.name} raised", exc)
                return error(f"running reserve of plugin {p.name!r}: {exc}").with_plugin(p.name)
            if status.code != Code.SUCCESS:  # (a success needs no plugin stamp: nobody reads it)
                return status.with_plugin(p.name)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in reversed(self.capabilities.reserve):
            try:
                p.unreserve(state, pod, node_name)
            except Exception as exc:
                log_failure(log, f"Unreserve plugin {p.name} raised", exc)

    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, dict[str, float]]:
        """Success, a rejection, or Wait with the plugins and timeouts to wait for."""
        waits: dict[str, float] = {}
        for p in self.capabilities.permit:
            try:
                status, timeout = p.permit(state, pod, node_name)
            except Exception as exc:
                log_failure(log, f"Permit plugin {p.name} raised", exc)
                return error(f"running Permit plugin {p.name!r}: {exc}").with_plugin(p.name), {}
            status = status.with_plugin(p.name)
            if status.is_wait:
                waits[p.name] = max(0.0, float(timeout))
            elif not status.is_success:
                return status, {}
        return (Status(Code.WAIT) if waits else Status()), waits

    def preemption_refusal(self, state: CycleState, pod: Pod) -> Status | None:
        for p in self.capabilities.preemption_gates:
            try:
                reason = p.refuse_preemption(state, pod)
            except Exception as exc:
                return _raised("refuse_preemption", p, exc)
            if reason is not None:
                return Status(Code.UNSCHEDULABLE, (reason,)).with_plugin(p.name)
        return None

    # ----- reservation stages (driven by the Reservation plugin) -----

    def run_reservation_filter_plugins(
        self, state: CycleState, pod: Pod, reservation: object, node_info: NodeInfo
    ) -> Status:
        for p in self.reservation_filter_plugins:
            try:
                status = p.filter_reservation(state, pod, reservation, node_info).with_plugin(p.name)
            except Exception as exc:
                status = _raised("filter_reservation", p, exc)
            if not status.is_success:
                if self.debug.filters:
                    log.warning(
                        "reservation filter %s rejected %s for pod %s: %s", p.name, reservation, pod.key, status
                    )
                return status
        return Status()

    def run_reservation_nominate(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        p = self.capabilities.reservation_nominator
        if p is None:
            return Status()
        try:
            return p.nominate_reservation(state, pod, node_name).with_plugin(p.name)
        except Exception as exc:
            return _raised("nominate_reservation", p, exc)

    async def run_pre_bind_reservation(self, state: CycleState, reservation: object, node_name: str) -> Status:
        for p in self.capabilities.reservation_pre_binds:
            try:
                status = (await p.pre_bind_reservation(state, reservation, node_name)).with_plugin(p.name)
            except Exception as exc:
                status = _failed("pre_bind_reservation", p, exc)
            if not status.is_success:
                return status
        return Status()

    # ----- binding cycle -----

    def run_pre_bind_pre_flights(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """``RunPreBindPreFlights``: Success when some PreBind plugin will work for the pod, Skip when none
        will (plugins without a pre-flight count as having nothing long to do), else the first plugin's
        failure."""
        result = Status(Code.SKIP)
        for p in self.capabilities.pre_bind_pre_flights:
            try:
                status = p.pre_bind_pre_flight(state, pod, node_name)
            except Exception as exc:
                return _failed("pre_bind_pre_flight", p, exc)
            if status.code == Code.SUCCESS:
                result = status
            elif status.code != Code.SKIP:
                return status.with_plugin(p.name)
        return result

    async def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """PreBind plugins in order; with a :class:`~.interfaces.PodPatchApplier` (DefaultPreBind), the
        metadata changes they record in :data:`~.pod_patch.POD_PATCH` then go out as one request."""
        applier = self.capabilities.pod_patch_applier
        if applier is not None:
            state.write(POD_PATCH, PodPatch())
        for p in self.capabilities.pre_bind:
            try:
                status = await p.pre_bind(state, pod, node_name)
            except Exception as exc:
                status = _failed("pre_bind", p, exc)
            if status.code != Code.SUCCESS:  # (a success needs no plugin stamp: nobody reads it)
                return status.with_plugin(p.name)
        patch = state.get(POD_PATCH) if applier is not None else None
        if applier is not None and patch:
            try:
                status = (await applier.apply_pod_patch(state, pod, patch)).with_plugin(applier.name)
            except Exception as exc:
                status = _failed("apply_pod_patch", applier, exc)
            if not status.is_success:
                return status
        return Status()

    async def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for p in self.capabilities.bind:
            try:
                status = (await p.bind(state, pod, node_name)).with_plugin(p.name)
            except Exception as exc:
                status = _failed("bind", p, exc)
            if status.is_skip:
                continue
            return status
        return error("no bind plugin bound the pod")

    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in self.capabilities.post_bind:
            try:
                p.post_bind(state, pod, node_name)
            except Exception as exc:
                log_failure(log, f"PostBind plugin {p.name} raised", exc)

    def run_warm_up(self) -> None:
        """Every plugin's optional ``warm_up`` (:class:`~koord_scheduler.framework.interfaces.WarmUpPlugin`),
        in profile order."""
        for p in self.capabilities.warm_ups:
            try:
                p.warm_up()
            except Exception as exc:
                log_failure(log, f"warm_up of plugin {p.name} raised", exc)

    # ----- helpers -----

    def log_score_table(self, state: CycleState, pod: Pod, positions: Positions, totals: IntArray) -> None:
        """``--debug-scores N``: the top-N nodes with each plugin's weighted score."""
        self.score_phase.log_table(state, pod, self.snapshot, positions, totals=totals, top=self.debug.scores)

    def _observe(self, point: str, code: Code, started: float) -> None:
        if self._observer is not None:
            self._observer(point, code, time.perf_counter() - started)


def _raised(method: str, plugin: Plugin, exc: Exception) -> Status:
    log_failure(log, f"{method} plugin {plugin.name} raised", exc)
    return error(f"running {method} of plugin {plugin.name!r}: {exc}").with_plugin(plugin.name)


def _failed(method: str, plugin: Plugin, exc: Exception) -> Status:
    """As :func:`_raised`, for the binding cycle: I/O failures are expected there, logged without a trace."""
    log.warning("%s plugin %s failed: %s", method, plugin.name, exc)
    return error(f"running {method} of plugin {plugin.name!r}: {exc}").with_plugin(plugin.name)


def _transformer_error(method: str, t: Plugin, exc: Exception) -> PluginCycleError:
    log_failure(log, f"{method} of {t.name} raised", exc)
    return PluginCycleError(error(f"running {method} of {t.name!r}: {exc}").with_plugin(t.name))


def _check_transform(t: Plugin, status: Status) -> None:
    if not status.is_success:
        stamped = status.with_plugin(t.name)
        if stamped.code == Code.SUCCESS:
            return
        raise PluginCycleError(stamped)


if TYPE_CHECKING:
    _handle: type[Handle] = Framework
