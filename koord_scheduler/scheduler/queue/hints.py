"""Queueing hints: what a cluster event means for a pod waiting in the scheduling queue (kube-scheduler's
``isPodWorthRequeuing`` and ``determineSchedulingHintForInFlightPod``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from enum import IntEnum

from apis.core.types import Pod
from koord_scheduler.framework.errors import log_failure
from koord_scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueuedPodInfo,
    QueueingHint,
    QueueingHintFn,
)

logger = logging.getLogger(__name__)

_HINT_CACHE_LIMIT = 256
_QUEUE_ON_EVERYTHING: tuple[QueueingHintFn | None, ...] = (None,)


def event_label(event: ClusterEvent) -> str:
    """kube's ``ClusterEvent.Label()``: the custom label, else resource and action, e.g. ``NodeAdd``."""
    if event.label:
        return event.label
    if event.action == ActionType.ALL:
        return f"{event.resource.value}All"
    names = [
        "".join(part.capitalize() for part in (member.name or "").split("_"))
        for member in ActionType
        if member != ActionType.ALL and member in event.action
    ]
    return event.resource.value + "|".join(names)


class Strategy(IntEnum):
    """What a cluster event means for a waiting pod (kube's ``queueingStrategy``), weakest first."""

    SKIP = 0
    AFTER_BACKOFF = 1
    IMMEDIATELY = 2
    """A Pending plugin said Queue: straight to activeQ, no backoff."""


class QueueingHints:
    """The hints of the plugins' registered events (``EventsToRegister``), asked on behalf of a waiting pod.

    A plugin absent from ``plugin_events``, or registered with no events, is requeued by every event."""

    def __init__(self, plugin_events: Mapping[str, Sequence[ClusterEventWithHint]]) -> None:
        self._plugin_events = {name: tuple(events) for name, events in plugin_events.items()}
        self._plugin_rank = {name: rank for rank, name in enumerate(self._plugin_events)}
        self._hint_cache: dict[ClusterEvent, dict[str, tuple[QueueingHintFn | None, ...]]] = {}

    def strategy(self, qpi: QueuedPodInfo, event: ClusterEvent, old: object | None, new: object | None) -> Strategy:
        """kube's ``isPodWorthRequeuing``: ask the hints of the plugins that rejected ``qpi``."""
        unschedulable, pending = qpi.unschedulable_plugins, qpi.pending_plugins
        if not unschedulable and not pending:
            return Strategy.AFTER_BACKOFF
        if event.resource is EventResource.WILDCARD and event.action == ActionType.ALL:
            return Strategy.AFTER_BACKOFF
        matching = self._hints_for(event)
        strategy = Strategy.SKIP
        for plugin in self._ordered(unschedulable | pending if pending else unschedulable):
            hints = matching.get(plugin)
            if hints is None:
                if self._plugin_events.get(plugin):
                    continue
                hints = _QUEUE_ON_EVERYTHING
            for hint in hints:
                if hint is not None and self._run_hint(plugin, hint, qpi.pod, old, new) is QueueingHint.SKIP:
                    continue
                if plugin in pending:
                    return Strategy.IMMEDIATELY
                if not pending:
                    return Strategy.AFTER_BACKOFF
                strategy = Strategy.AFTER_BACKOFF
                break
        return strategy

    def strategy_for_events(
        self, qpi: QueuedPodInfo, events: Iterable[tuple[ClusterEvent, object | None, object | None]]
    ) -> Strategy:
        """The strongest strategy ``events`` give (kube's ``determineSchedulingHintForInFlightPod``)."""
        strategy = Strategy.SKIP
        for event, old, new in events:
            strategy = max(strategy, self.strategy(qpi, event, old, new))
            if strategy is Strategy.IMMEDIATELY or (strategy is Strategy.AFTER_BACKOFF and not qpi.pending_plugins):
                break
        return strategy

    def _hints_for(self, event: ClusterEvent) -> dict[str, tuple[QueueingHintFn | None, ...]]:
        """Per plugin, the hints of its registrations matching ``event``; plugins with none are absent."""
        cached = self._hint_cache.get(event)
        if cached is None:
            if len(self._hint_cache) >= _HINT_CACHE_LIMIT:
                self._hint_cache.clear()
            cached = {}
            for plugin, registrations in self._plugin_events.items():
                hints = tuple(r.hint for r in registrations if r.event.matches(event))
                if hints:
                    cached[plugin] = hints
            self._hint_cache[event] = cached
        return cached

    def _ordered(self, plugins: frozenset[str]) -> Iterable[str]:
        """Plugins in configured order, so hints run in a stable order."""
        if len(plugins) <= 1:
            return plugins
        last = len(self._plugin_rank)
        return sorted(plugins, key=lambda name: (self._plugin_rank.get(name, last), name))

    @staticmethod
    def _run_hint(plugin: str, hint: QueueingHintFn, pod: Pod, old: object | None, new: object | None) -> QueueingHint:
        try:
            return hint(pod, old, new)
        except Exception as exc:
            # kube treats a failing hint as Queue so the pod cannot get stuck.
            log_failure(logger, f"queueing hint of {plugin} failed for pod {pod.key}; requeueing", exc)
            return QueueingHint.QUEUE
