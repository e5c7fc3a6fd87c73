"""``CPUBurst``: every ``--reconcile-interval-seconds`` (1 s), static cfs burst and dynamic quota for LS pods.

The NodeSLO ``cpuBurstStrategy`` is read every tick; policy ``none`` (the default) resets what was changed:
burst back to 0 and scaled quotas back to the limit's quota. Exports
``koordlet_container_scaled_cfs_quota_us`` and ``koordlet_container_scaled_cfs_burst_us``.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

from apis.extension import QoSClass
from koordlet.metriccache import MetricKind
from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.cpuburst.policy import (
    Operation,
    PoolState,
    TokenBucket,
    container_cfs_burst_us,
    container_operation,
    policy_switches,
    quota_write_plan,
    scaled_quota,
    share_pool_state,
)
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag
from koordlet.statesinformer import PodMeta
from koordlet.system.resources import DEFAULT_CFS_PERIOD_US

NAME = "CPUBurst"
POOL_WINDOW_MAX_SECONDS = 10.0


def burstable(pod: PodMeta) -> bool:
    """LS pods (and unlabelled ones) that are running or about to; LSE, LSR and BE keep their quotas."""
    return (
        pod.qos not in (QoSClass.LSE, QoSClass.LSR, QoSClass.BE)
        and not pod.is_be
        and pod.phase
        in (
            "Running",
            "Pending",
            "",
        )
    )


@dataclass(frozen=True, slots=True)
class BurstParams:
    static_on: bool
    quota_on: bool
    burst_percent: int
    quota_percent: int
    period_seconds: int
    pool: PoolState


class CPUBurst(Strategy):
    NAME = NAME
    INTERVAL_FLAG = "reconcile_interval_seconds"

    def __init__(self) -> None:
        super().__init__()
        self.buckets: dict[str, TokenBucket] = {}
        self.touched: set[str] = set()
        self.random = random.Random()
        self.quota_gauge: object = None
        self.burst_gauge: object = None
        self.last_pool_state = PoolState.UNKNOWN

    def init_flags(self, parser: argparse.ArgumentParser) -> None:
        super().init_flags(parser)
        add_flag(
            parser,
            "--reconcile-interval-seconds",
            type=positive_seconds,
            default=1.0,
            help="CPUBurst/CgroupReconcile tick",
        )

    def configure(self, ctx: PluginContext) -> None:
        from prometheus_client import Gauge

        labels = ["node", "pod_namespace", "pod_name", "container_id", "container_name"]
        self.quota_gauge = Gauge(
            "koordlet_container_scaled_cfs_quota_us",
            "cfs quota after burst scaling",
            labels,
            registry=ctx.metrics_registry,
        )
        self.burst_gauge = Gauge(
            "koordlet_container_scaled_cfs_burst_us", "cfs burst written", labels, registry=ctx.metrics_registry
        )

    def pool_state(self, pods: tuple[PodMeta, ...], threshold_percent: int) -> PoolState:
        cache, now = self.ctx.metric_cache, self.ctx.clock()
        node = self.ctx.states_informer.node
        window = min(5 * self.interval, POOL_WINDOW_MAX_SECONDS)
        stats = cache.query(MetricKind.NODE_CPU_USAGE, "", now - window, now)
        if node is None or stats is None:
            return PoolState.UNKNOWN
        exclusive = [p for p in pods if p.qos in (QoSClass.LSE, QoSClass.LSR) or p.is_be]
        used = 0.0
        for p in exclusive:
            pod_stats = cache.query(MetricKind.POD_CPU_USAGE, p.uid, now - window, now)
            used += pod_stats.avg * 1000 if pod_stats else 0.0
        requests = sum(p.total_request("cpu") for p in exclusive if not p.is_be)
        return share_pool_state(stats.avg * 1000, used, float(node.capacity.get("cpu", 0)), requests, threshold_percent)

    def limiter_allows(self, key: str, usage_percent: float, period_seconds: int, burst_percent: int) -> bool:
        if period_seconds < 0:
            return True
        now = self.ctx.clock()
        bucket = self.buckets.get(key)
        if bucket is None:
            capacity = period_seconds * (burst_percent - 100)
            bucket = TokenBucket(capacity, self.random.uniform(0, 0.5 * capacity), now)
        bucket, allowed = bucket.step(usage_percent, now)
        self.buckets[key] = bucket
        return allowed

    def tick(self) -> None:
        cfg = self.ctx.states_informer.node_slo.cpu_burst_strategy
        static_on, quota_on = policy_switches(cfg.policy if cfg else None)
        pods = self.ctx.states_informer.get_all_pods()
        burst_percent = (cfg.cpu_burst_percent if cfg else None) or 1000
        quota_percent = (cfg.cfs_quota_burst_percent if cfg else None) or 300
        period_seconds = (
            cfg.cfs_quota_burst_period_seconds if cfg and cfg.cfs_quota_burst_period_seconds is not None else -1
        )
        pool = PoolState.UNKNOWN
        if quota_on:
            pool = self.pool_state(pods, (cfg.share_pool_threshold_percent if cfg else None) or 50)
        self.last_pool_state = pool
        params = BurstParams(static_on, quota_on, burst_percent, quota_percent, period_seconds, pool)
        for pod in pods:
            if not burstable(pod) or not (static_on or quota_on or pod.uid in self.touched):
                continue
            self.reconcile_pod(pod, params)
        live = {p.uid for p in pods}
        self.touched &= live

    def reconcile_pod(self, pod: PodMeta, p: BurstParams) -> None:
        fs, cache = self.ctx.executor.cgroupfs, self.ctx.metric_cache
        limited = [
            (c, d)
            for c in pod.containers
            if c.limits.get("cpu", 0) > 0 and (d := pod.container_dir(fs.layout, c)) is not None
        ]
        if not limited:
            return
        self.touched.add(pod.uid)
        bursts = [
            (d, container_cfs_burst_us(c.limits["cpu"], p.burst_percent, DEFAULT_CFS_PERIOD_US) if p.static_on else 0)
            for c, d in limited
        ]
        self.apply(
            [ResourceUpdate("cpu.cfs_burst_us", d, str(b), NAME) for d, b in bursts]
            + [ResourceUpdate("cpu.cfs_burst_us", pod.cgroup_dir, str(sum(b for _, b in bursts)), NAME)]
        )
        new_quotas: list[tuple[str, int]] = []
        for c, d in limited:
            current = fs.cfs_quota(d)
            if current is None:
                return
            quota, period = current
            base = int(c.limits["cpu"] * period / 1000)
            key = c.container_id.id if c.container_id else d
            throttled = cache.last(MetricKind.CONTAINER_CPU_THROTTLED, key, 2 * self.collect_interval)
            used = cache.last(MetricKind.CONTAINER_CPU_USAGE, key, 2 * self.collect_interval)
            usage_percent = 0.0 if used is None else used * 1000 * 100 / c.limits["cpu"]
            allows = self.limiter_allows(key, usage_percent, p.period_seconds, p.quota_percent)
            op = container_operation(throttled, allows, p.pool, p.quota_on)
            new = scaled_quota(quota, base, p.quota_percent, op if quota > 0 else Operation.RESET)
            new_quotas.append((d, new))
            self.quota_gauge.labels(  # type: ignore[attr-defined]
                self.ctx.node_name, pod.namespace, pod.name, key, c.name
            ).set(new)
        if len(limited) == len(pod.containers):
            pod_current = fs.cfs_quota(pod.cgroup_dir)
            pod_old = pod_current[0] if pod_current else -1
            self.apply(quota_write_plan(pod.cgroup_dir, pod_old, sum(q for _, q in new_quotas), new_quotas, NAME))
        else:
            self.apply([ResourceUpdate("cpu.cfs_quota_us", d, str(q), NAME) for d, q in new_quotas])

    def recover(self) -> None:
        """Nothing to do on stop: a restarted agent (or policy ``none``) resets the pods it finds."""


ENTRY = PluginEntry(NAME, CPUBurst, KOORDLET_FEATURES[NAME])
