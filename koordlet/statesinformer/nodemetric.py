"""The NodeMetric reporter loop: every ``reportIntervalSeconds``, decide the status, hand it to a writer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from apis.slo import NodeMetricStatus, resolve_collect_policy
from koordlet.statesinformer.informer import StatesInformer
from koordlet.statesinformer.reporter import (
    HostAppUsageSource,
    ProdPrediction,
    UsageSource,
    build_node_metric_status,
)
from koordlet.system.clock import Clock, wall_clock
from koordlet.system.errorlog import FailureLog

log = logging.getLogger(__name__)


class StatusWriter(Protocol):
    def write_status(self, status: NodeMetricStatus) -> None:
        """Blocking; called in a worker thread."""


class NodeMetricReporter:
    def __init__(
        self,
        informer: StatesInformer,
        source: UsageSource,
        writer: StatusWriter | None,
        *,
        clock: Clock = wall_clock,
    ) -> None:
        self.informer = informer
        self.source = source
        self.writer = writer
        self.clock = clock
        self.reports = 0
        self.failures = 0
        self.failure_log = FailureLog(log)
        self.prediction: ProdPrediction | None = None
        """The peak predictor (``prodReclaimableMetric``, ``prodPeakMetric``); None: not reported."""

    def report_interval(self) -> float:
        return float(resolve_collect_policy(self.informer.node_metric_spec).report_interval_seconds)

    def decide(self) -> NodeMetricStatus:
        policy = resolve_collect_policy(self.informer.node_metric_spec)
        host_usage = self.source if isinstance(self.source, HostAppUsageSource) else None
        return build_node_metric_status(
            self.source,
            self.informer.get_all_pods(),
            policy,
            self.clock(),
            prediction=self.prediction,
            host_apps=self.informer.node_slo.host_applications or (),
            host_usage=host_usage,
        )

    async def report_once(self) -> NodeMetricStatus:
        status = self.decide()
        if self.writer is not None:
            try:
                await asyncio.to_thread(self.writer.write_status, status)
            except Exception as err:
                self.failures += 1
                self.failure_log.failed("NodeMetric status write", err)
            else:
                self.reports += 1
                self.failure_log.succeeded("NodeMetric status write")
        return status

    async def run(self, stop: asyncio.Event, *, interval: float | None = None) -> None:
        """Report every interval (re-read from the NodeMetric spec after each tick) until ``stop``."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval or self.report_interval())
            if not stop.is_set():
                await self.report_once()
