"""Wiring a Scheduler from configuration, a registry and a cluster source."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from apis.config import KubeSchedulerConfiguration
from apis.core.types import Pod
from koord_scheduler.extenders.build import build_extenders, with_ignored_extender_resources
from koord_scheduler.extenders.preemption import PreemptionCaller
from koord_scheduler.framework.builder import build_profiles
from koord_scheduler.framework.fast_paths import QueueSortKey
from koord_scheduler.framework.registry import Registry
from koord_scheduler.framework.status import Status
from koord_scheduler.framework.types import ClusterEventWithHint, QueuedPodInfo
from koord_scheduler.scheduler.cache import SchedulerCache
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koord_scheduler.scheduler.queue import QueueOptions, SchedulingQueue
from koord_scheduler.scheduler.scheduler import Scheduler, SchedulerOptions
from koord_scheduler.scheduler.services import SchedulerServices
from koord_scheduler.scheduler.source import ClusterSource


def build_scheduler(
    config: KubeSchedulerConfiguration,
    registry: Registry,
    source: ClusterSource,
    *,
    clock: Callable[[], float] = time.time,
    metrics: SchedulerMetrics | None = None,
    options: SchedulerOptions | None = None,
    node_cache: bool = True,
) -> Scheduler:
    """Build every profile's framework, one queue shared by the profiles, and the scheduler (with the
    configured extenders unless ``options`` already carries some)."""
    metrics = metrics or SchedulerMetrics()
    config = with_ignored_extender_resources(config)
    options = options or SchedulerOptions()
    if options.extenders is None:
        options.extenders = build_extenders(config)
    cache = SchedulerCache()
    extenders = options.extenders
    preemption = PreemptionCaller(extenders.all if extenders else (), lambda: cache.snapshot)
    services = SchedulerServices(
        cache,
        source.client,
        clock,
        metrics.registry,
        feature_gates=options.feature_gates,
        preemption_extenders=preemption if preemption else None,
    )
    profiles = build_profiles(config, registry, services, observer=metrics.observer, node_cache=node_cache)
    first = next(iter(profiles.values()))

    gated_messages: dict[str, str] = {}

    def pre_enqueue(pod: Pod) -> Status:
        fwk = profiles.get(pod.scheduler_name)
        status = fwk.run_pre_enqueue(pod) if fwk is not None else Status()
        if status.is_success:
            gated_messages.pop(pod.key, None)
        else:
            gated_messages[pod.key] = status.message
        return status

    plugin_events: dict[str, Sequence[ClusterEventWithHint]] = {}
    for fwk in profiles.values():
        plugin_events.update(fwk.events_to_register())

    sort_key: Callable[[QueuedPodInfo], object] | None = None
    queue_sort = first.queue_sort_plugin
    if isinstance(queue_sort, QueueSortKey):
        sort_key = queue_sort.sort_key
    queue = SchedulingQueue(
        less=first.queue_less,
        pre_enqueue=pre_enqueue,
        plugin_events=plugin_events,
        clock=clock,
        options=QueueOptions(
            initial_backoff_seconds=float(config.pod_initial_backoff_seconds),
            max_backoff_seconds=float(config.pod_max_backoff_seconds),
            sort_key=sort_key,
        ),
    )
    scheduler = Scheduler(profiles, services, queue, source, metrics=metrics, options=options)
    scheduler.gated_messages = gated_messages
    return scheduler
