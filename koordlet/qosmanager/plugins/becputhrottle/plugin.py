"""``BECPUThrottleReporter``: every interval, set ``koordlet_be_cpu_throttled_ratio`` from the cache."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from koordlet.metriccache import MetricKind
from koordlet.qosmanager.featuregates import FeatureSpec, Maturity
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.becputhrottle.policy import be_throttled_ratio

NAME = "BECPUThrottleReporter"
METRIC = "koordlet_be_cpu_throttled_ratio"


class BECPUThrottleReporter:
    def __init__(self) -> None:
        self.interval = 1.0
        self.ctx: PluginContext | None = None
        self.gauge: object = None
        self.last_ratio: float | None = None

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--be-cpu-throttle-report-interval",
            type=positive_seconds,
            default=1.0,
            help="seconds between BE throttle ratio updates (BECPUThrottleReporter)",
        )

    def setup(self, ctx: PluginContext) -> None:
        from prometheus_client import Gauge

        self.ctx = ctx
        self.interval = float(getattr(ctx.args, "be_cpu_throttle_report_interval", 1.0))
        if self.interval <= 0:
            raise ValueError("--be-cpu-throttle-report-interval must be > 0")
        self.gauge = Gauge(
            METRIC,
            "Mean CPU throttled ratio (nr_throttled/nr_periods) of BE pods on the node",
            ["node"],
            registry=ctx.metrics_registry,
        )

    def decide(self) -> float | None:
        assert self.ctx is not None
        cache, informer = self.ctx.metric_cache, self.ctx.states_informer
        max_age = 2 * self.interval
        return be_throttled_ratio(
            cache.last(MetricKind.POD_CPU_THROTTLED, pod.uid, max_age) for pod in informer.get_all_pods() if pod.is_be
        )

    def tick(self) -> None:
        assert self.ctx is not None
        self.last_ratio = self.decide()
        self.gauge.labels(node=self.ctx.node_name).set(self.last_ratio or 0.0)  # type: ignore[attr-defined]

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.tick()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)


ENTRY = PluginEntry(NAME, BECPUThrottleReporter, FeatureSpec(True, Maturity.BETA))
