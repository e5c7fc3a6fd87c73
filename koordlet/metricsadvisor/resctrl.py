"""``ResctrlCollector``: LLC occupancy and memory-bandwidth counters of the resctrl groups LSR, LS and BE
(Koordinator ``metricsadvisor/collectors/resctrl``), every ``--resctrl-collector-interval`` (10 s).

Each ``mon_data/mon_L3_<cache id>`` of a group gives ``llc_occupancy`` (bytes) and ``mbm_local_bytes`` /
``mbm_total_bytes`` (the kernel's running byte counters, exported as read, as Koordinator does). They go to
the metric cache (``resctrl_resource_llc`` / ``resctrl_resource_mb``) and to the gauges
``koordlet_resctrl_llc_occupancy{node,cache_id,qos}`` and
``koordlet_resctrl_memory_bandwidth{node,cache_id,qos,mb_type}``. A group without ``mon_data`` (no
monitoring on this CPU, or the group is not made yet) is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CollectorRegistry, Gauge

from koordlet.metriccache import MetricCache, MetricKind
from koordlet.system.clock import Clock
from koordlet.system.resctrl import ResctrlFS

log = logging.getLogger(__name__)

QOS_GROUPS = ("LSR", "LS", "BE")
MB_FILES = ("mbm_local_bytes", "mbm_total_bytes")
DEFAULT_INTERVAL_SECONDS = 10.0


class ResctrlCollector:
    def __init__(
        self,
        resctrl: ResctrlFS,
        cache: MetricCache,
        registry: CollectorRegistry,
        *,
        node: str,
        clock: Clock,
    ) -> None:
        self.resctrl = resctrl
        self.cache = cache
        self.node = node
        self.clock = clock
        self.llc = Gauge(
            "koordlet_resctrl_llc_occupancy",
            "LLC occupancy of a resctrl QoS group (LSR, LS, BE) per L3 cache, bytes",
            ["node", "cache_id", "qos"],
            registry=registry,
        )
        self.mb = Gauge(
            "koordlet_resctrl_memory_bandwidth",
            "Memory-bandwidth byte counter of a resctrl QoS group per L3 cache (mbm_local_bytes, mbm_total_bytes)",
            ["node", "cache_id", "qos", "mb_type"],
            registry=registry,
        )

    def collect_once(self) -> int:
        """One pass; returns how many samples were stored."""
        now = self.clock()
        stored = 0
        self.llc.clear()
        self.mb.clear()
        for group in QOS_GROUPS:
            for cache_id, values in self.resctrl.mon_data(group).items():
                if "llc_occupancy" in values:
                    value = float(values["llc_occupancy"])
                    self.cache.append(MetricKind.RESCTRL_LLC, f"{group}/{cache_id}", now, value)
                    self.llc.labels(node=self.node, cache_id=str(cache_id), qos=group).set(value)
                    stored += 1
                for name in MB_FILES:
                    if name in values:
                        value = float(values[name])
                        self.cache.append(MetricKind.RESCTRL_MB, f"{group}/{cache_id}/{name}", now, value)
                        self.mb.labels(node=self.node, cache_id=str(cache_id), qos=group, mb_type=name).set(value)
                        stored += 1
        return stored

    async def run(self, stop: asyncio.Event, *, interval: float = DEFAULT_INTERVAL_SECONDS) -> None:
        while not stop.is_set():
            try:
                self.collect_once()
            except Exception as err:  # a collector never stops the agent
                log.warning("ResctrlCollector: %s", err)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
