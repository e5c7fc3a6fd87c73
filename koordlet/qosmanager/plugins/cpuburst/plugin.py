"""``CPUBurst``: every ``--reconcile-interval-seconds`` (1 s), static cfs burst and dynamic quota for LS pods.

The NodeSLO ``cpuBurstStrategy`` is read every tick; policy ``none`` (the default) resets what was changed:
burst back to 0 and scaled quotas back to the limit's quota. Exports
``koordlet_container_scaled_cfs_quota_us`` and ``koordlet_container_scaled_cfs_burst_us``.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from functools import partial

from apis.extension import LABEL_POD_QOS
from apis.slo.nodeslo import CPUBurstStrategy
from koordlet.metriccache import MetricKind
from koordlet.qosmanager.executor import ResourceUpdate
from koordlet.qosmanager.featuregates import KOORDLET_FEATURES
from koordlet.qosmanager.flagtypes import positive_seconds
from koordlet.qosmanager.framework import PluginContext, PluginEntry
from koordlet.qosmanager.plugins.cpuburst.policy import (
    ANNOTATION_CPU_BURST,
    BurstConfig,
    Operation,
    PoolState,
    TokenBucket,
    burstable_by_label,
    container_cfs_burst_us,
    container_operation,
    pod_burst_config,
    policy_switches,
    quota_write_plan,
    scaled_quota,
    share_pool_state,
)
from koordlet.qosmanager.plugins.strategy import Strategy, add_flag
from koordlet.statesinformer import PodMeta
from koordlet.system.resources import DEFAULT_CFS_PERIOD_US

NAME = "CPUBurst"


def _raise(problem: str) -> None:
    raise ValueError(problem)


POOL_WINDOW_MAX_SECONDS = 10.0


def burstable(pod: PodMeta) -> bool:
    """Pods whose raw ``koordinator.sh/qosClass`` label is not LSE, LSR or BE (unlabelled pods too, a
    Guaranteed one included), running or about to."""
    return burstable_by_label(pod.labels) and pod.phase in ("Running", "Pending", "")


@dataclass(frozen=True, slots=True)
class BurstParams:
    static_on: bool
    quota_on: bool
    burst_percent: int
    quota_percent: int
    period_seconds: int
    pool: PoolState


def node_burst_config(cfg: CPUBurstStrategy | None) -> BurstConfig:
    """The node's ``cpuBurstStrategy`` (already merged over the defaults) as a :class:`BurstConfig`."""
    defaults = BurstConfig()
    if cfg is None:
        return defaults
    return BurstConfig(
        policy=cfg.policy or defaults.policy,
        cpu_burst_percent=defaults.cpu_burst_percent if cfg.cpu_burst_percent is None else cfg.cpu_burst_percent,
        cfs_quota_burst_percent=cfg.cfs_quota_burst_percent or defaults.cfs_quota_burst_percent,
        cfs_quota_burst_period_seconds=defaults.cfs_quota_burst_period_seconds
        if cfg.cfs_quota_burst_period_seconds is None
        else cfg.cfs_quota_burst_period_seconds,
    )


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
        # raw labels, as Koordinator: LSE/LSR requests leave the pool; LSE/LSR/BE usage is not the pool's
        exclusive = [p for p in pods if p.labels.get(LABEL_POD_QOS) in ("LSE", "LSR", "BE")]
        used = 0.0
        for p in exclusive:
            pod_stats = cache.query(MetricKind.POD_CPU_USAGE, p.uid, now - window, now)
            used += pod_stats.avg * 1000 if pod_stats else 0.0
        requests = sum(p.total_request("cpu") for p in exclusive if p.labels.get(LABEL_POD_QOS) != "BE")
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
        """Each burstable pod with its own config (the node's ``cpuBurstStrategy``, the pod's
        ``koordinator.sh/cpuBurst`` annotation over it); policy ``none`` resets what an earlier tick changed."""
        strategy = self.ctx.states_informer.node_slo.cpu_burst_strategy
        node_cfg = node_burst_config(strategy)
        pods = self.ctx.states_informer.get_all_pods()
        threshold = (strategy.share_pool_threshold_percent if strategy else None) or 50
        pool: PoolState | None = None  # computed once, when some pod needs it
        for pod in pods:
            if not burstable(pod):
                continue
            cfg, problem = pod_burst_config(node_cfg, pod.annotations.get(ANNOTATION_CPU_BURST))
            name = f"pod {pod.namespace}/{pod.name}"
            if problem is not None:
                # logged once (its own key, so the pod's reconcile below does not reset it); node config applies
                self.contain(f"{name} {ANNOTATION_CPU_BURST}", partial(_raise, problem))
            static_on, quota_on = policy_switches(cfg.policy)
            if not (static_on or quota_on or pod.uid in self.touched):
                continue
            if quota_on and pool is None:
                pool = self.pool_state(pods, threshold)
            params = BurstParams(
                static_on,
                quota_on,
                cfg.cpu_burst_percent,
                cfg.cfs_quota_burst_percent,
                cfg.cfs_quota_burst_period_seconds,
                pool or PoolState.UNKNOWN,
            )
            self.contain(name, partial(self.reconcile_pod, pod, params))
        self.last_pool_state = pool or PoolState.UNKNOWN
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
