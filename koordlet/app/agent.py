"""Wiring: build the agent's parts from options and run them as tasks of one ``TaskGroup``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from apis.core.paths import dns1123_subdomain_problem, shown
from apis.slo import NodeMetricStatus, resolve_collect_policy
from koordlet.app.collectors import CollectorDeps, device_reporter, gated_collectors
from koordlet.app.gates import log_report, node_probes, report_gates
from koordlet.app.http import MetricsServer
from koordlet.app.metrics import KoordletMetrics
from koordlet.metriccache import MetricCache, MetricCacheOptions
from koordlet.metricsadvisor import AdvisorOptions, CacheUsageSource, MetricsAdvisor
from koordlet.prediction import PeakPredictServer, PredictionConfig, ProdPeakReport, UsageTraining
from koordlet.qosmanager import FeatureGates, PluginContext, QOSManager, ResourceExecutor
from koordlet.qosmanager.evictor import KubeEvictionAPI, PodEvictor
from koordlet.runtimehooks.hooks import DEFAULT_HAMI_CORE_LIBRARY
from koordlet.runtimehooks.service import announce, build_plugin, nri_options, run_plugin
from koordlet.statesinformer import NodeMetricReporter, StatesInformer, discover_pods
from koordlet.statesinformer.apiloop import ApiLoop
from koordlet.statesinformer.device_writer import KubeDeviceWriter
from koordlet.statesinformer.kube import KubeNodeMetricWriter, KubeSource
from koordlet.statesinformer.kubelet import KubeletOptions, KubeletPodSource
from koordlet.statesinformer.reporter import USAGE_WITH_PAGE_CACHE
from koordlet.system import CgroupDriver, CgroupFS, ProcFS
from koordlet.system.cgroupfs import detect_cgroup_driver, detect_cgroup_version
from koordlet.system.clock import wall_clock
from kubeapi.connection import KubeConfigError, load_connection

log = logging.getLogger("koordlet")

DISCOVERY_INTERVAL_SECONDS = 10.0


class StartupError(RuntimeError):
    """The agent cannot start (no usable kubeconfig, the metrics port is taken); the message is one line."""


@dataclass(frozen=True, slots=True)
class AgentOptions:
    node_name: str
    cgroup_root: Path = Path("/sys/fs/cgroup")
    cgroup_driver: str = "auto"
    kubepods_dir: str | None = None
    proc_root: Path = Path("/proc")
    kubeconfig: str | None = None
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 9316
    collect_interval: float = 1.0
    report_interval: float | None = None
    standalone: bool = False
    pods_source: str = "apiserver"
    kubelet: KubeletOptions = field(default_factory=KubeletOptions)
    duration: float | None = None
    args: argparse.Namespace = field(default_factory=argparse.Namespace)


def build_cgroupfs(options: AgentOptions) -> CgroupFS:
    version = detect_cgroup_version(options.cgroup_root)
    if options.cgroup_driver == "auto":
        driver = detect_cgroup_driver(options.cgroup_root, version, options.kubepods_dir) or CgroupDriver.SYSTEMD
    else:
        driver = CgroupDriver(options.cgroup_driver)
    return CgroupFS(options.cgroup_root, version, driver, options.kubepods_dir)


def prediction_config(args: argparse.Namespace) -> PredictionConfig:
    """The ``--prediction-*`` flags (Koordinator's defaults where the namespace lacks one)."""
    defaults = PredictionConfig()
    return PredictionConfig(
        checkpoint_dir=Path(getattr(args, "prediction_checkpoint_filepath", defaults.checkpoint_dir)),
        cold_start_duration=getattr(args, "prediction_cold_start_duration", defaults.cold_start_duration),
        safety_margin_percent=getattr(args, "prediction_safety_margin_percent", defaults.safety_margin_percent),
        memory_half_life=getattr(args, "prediction_memory_histogram_decay_halflife", defaults.memory_half_life),
        cpu_half_life=getattr(args, "prediction_cpu_histogram_decay_halflife", defaults.cpu_half_life),
        training_interval=getattr(args, "prediction_training_interval", defaults.training_interval),
        model_expiration=getattr(args, "prediction_model_expiration_duration", defaults.model_expiration),
        checkpoint_interval=getattr(args, "prediction_model_checkpoint_interval", defaults.checkpoint_interval),
        checkpoint_max_per_step=getattr(
            args, "prediction_model_checkpoint_max_per_step", defaults.checkpoint_max_per_step
        ),
    )


class Agent:
    def __init__(self, options: AgentOptions, gates: FeatureGates, qos_manager: QOSManager) -> None:
        self.options = options
        self.qos_manager = qos_manager
        self.clock = wall_clock
        self.cgroupfs = build_cgroupfs(options)
        self.procfs = ProcFS(options.proc_root)
        self.registry = CollectorRegistry()
        self.gates, self.gate_report = report_gates(
            gates,
            node_probes(self.cgroupfs, options.args, proc_root=options.proc_root),
            registry=self.registry,
            node=options.node_name,
        )
        """The gates the agent runs with: those on but not acting on this node (see the report) are off."""
        gates = self.gates
        self.cache = MetricCache(
            MetricCacheOptions(collect_interval_seconds=options.collect_interval), clock=self.clock
        )
        self.informer = StatesInformer(options.node_name, self.cgroupfs.layout)
        self.advisor = MetricsAdvisor(
            self.cgroupfs,
            self.procfs,
            self.cache,
            self.informer.get_all_pods,
            options=AdvisorOptions(
                collect_interval_seconds=options.collect_interval,
                enable_psi=gates.enabled("PSICollector"),
                page_cache=self.page_cache_wanted,
                host_applications=lambda: self.informer.node_slo.host_applications or (),
            ),
            clock=self.clock,
        )
        self.executor = ResourceExecutor(self.cgroupfs, clock=self.clock)
        self.metrics = KoordletMetrics(self.registry, options.node_name)
        self.metrics.register_usage(self.cache, self.informer.get_all_pods, max_age=2 * options.collect_interval)
        self.api_loop: ApiLoop | None = None
        """koordlet's one connection to the API server through kubeapi: the states informer's watches, the
        NodeMetric, Device and NodeResourceTopology writes, the evictions and their Events."""
        self.evictor = PodEvictor(
            None,
            node_name=options.node_name,
            metrics_registry=self.registry,
            clock=self.clock,
            dry_run=bool(getattr(options.args, "qos_dry_run", False)),
        )
        self.usage = CacheUsageSource(self.cache)
        self.reporter = NodeMetricReporter(self.informer, self.usage, None, clock=self.clock)
        self.predictor = PeakPredictServer(prediction_config(options.args), clock=self.clock)
        self.reporter.prediction = ProdPeakReport(self.predictor, self.informer)
        self.gpu_reporter = device_reporter(options.node_name, self.registry, gates, options.args, clock=self.clock)
        self.gated_collectors = gated_collectors(
            gates,
            options.args,
            CollectorDeps(self.cgroupfs, self.procfs, self.cache, self.registry, self.informer),
            node=options.node_name,
            clock=self.clock,
        )
        self.stop = asyncio.Event()

    def page_cache_wanted(self) -> bool:
        """``--enable-pagecache-collector``, or this node's NodeMetric asks for ``usageWithPageCache``."""
        if getattr(self.options.args, "enable_pagecache_collector", False):
            return True
        policy = resolve_collect_policy(self.informer.node_metric_spec).node_memory_collect_policy
        return policy == USAGE_WITH_PAGE_CACHE

    def healthy(self) -> bool:
        return self.advisor.ticks >= 1

    def _connect(self) -> None:
        """Build the API connection from the kubeconfig (or the in-cluster ServiceAccount). No request is
        made here; a file that cannot be used is a :class:`StartupError`."""
        problem = dns1123_subdomain_problem(self.options.node_name)
        if problem:  # it goes into field selectors and paths: refuse it before any request
            raise StartupError(f"node name {shown(self.options.node_name)} is not a Kubernetes node name: {problem}")
        try:
            connection = load_connection(self.options.kubeconfig or "")
        except KubeConfigError as err:
            source = f"--kubeconfig {self.options.kubeconfig}" if self.options.kubeconfig else "in-cluster config"
            raise StartupError(f"{source}: {err.reason}") from None
        self.api_loop = ApiLoop(connection)
        self.reporter.writer = KubeNodeMetricWriter(self.api_loop, self.options.node_name)
        self.evictor.api = KubeEvictionAPI(self.api_loop, self.options.node_name, clock=self.clock)
        if self.gpu_reporter is not None:
            self.gpu_reporter.writer = KubeDeviceWriter(self.api_loop)

    def refresh_standalone_pods(self) -> None:
        self.informer.replace_pod_metas(discover_pods(self.cgroupfs.layout, self.cgroupfs.list_children))

    async def _discover_loop(self) -> None:
        while not self.stop.is_set():
            self.refresh_standalone_pods()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=DISCOVERY_INTERVAL_SECONDS)

    async def _metrics_loop(self) -> None:
        interval = self.options.collect_interval
        reported_errors = 0
        reported_rejections = 0
        while not self.stop.is_set():
            if self.advisor.errors > reported_errors:
                self.metrics.collect_errors.labels(node=self.options.node_name).inc(
                    self.advisor.errors - reported_errors
                )
                reported_errors = self.advisor.errors
            if self.informer.rejected > reported_rejections:
                self.metrics.informer_rejections.labels(node=self.options.node_name).inc(
                    self.informer.rejected - reported_rejections
                )
                reported_rejections = self.informer.rejected
            for state in self.qos_manager.plugins:
                self.metrics.plugin_failures.labels(node=self.options.node_name, plugin=state.name).set(state.failures)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=interval)

    async def _stop_after(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
        self.stop.set()

    async def run(self) -> NodeMetricStatus | None:
        """Run until ``stop`` (or ``duration``). In standalone mode returns the final status."""
        opts = self.options
        self.metrics.start_time.labels(node=opts.node_name).set(time.time())
        log.info("koordlet on node %s, %r, standalone=%s", opts.node_name, self.cgroupfs, opts.standalone)
        source: KubeSource | None = None
        kubelet_source: KubeletPodSource | None = None
        if not opts.standalone:
            self._connect()
            if opts.pods_source == "kubelet":
                kubelet_source = KubeletPodSource(opts.kubelet, self.informer)
                log.info("pods from the kubelet at %s", opts.kubelet.url)
            source = KubeSource(self.api_loop, self.informer, watch_pods=kubelet_source is None)
            source.start()
        server = MetricsServer(self.registry, self.healthy, host=opts.metrics_host, port=opts.metrics_port)
        if opts.metrics_port >= 0:
            try:
                await server.start()
            except (OSError, OverflowError) as err:
                if source is not None:
                    source.stop()
                raise StartupError(f"cannot serve metrics on {opts.metrics_host}:{opts.metrics_port}: {err}") from None
            log.info("serving /metrics and /healthz on %s:%d", opts.metrics_host, server.port)
        log_report(self.gate_report)
        ctx = PluginContext(
            node_name=opts.node_name,
            metric_cache=self.cache,
            states_informer=self.informer,
            executor=self.executor,
            metrics_registry=self.registry,
            args=opts.args,
            clock=self.clock,
            kube_api=self.api_loop,
            evictor=self.evictor,
            object_errors=self.metrics.qos_object_errors,
            gates=self.gates,
        )
        nri = None if opts.standalone else nri_options(opts.args)
        if not opts.standalone:
            announce(nri, float(getattr(opts.args, "runtime_hooks_reconcile_interval", None) or 10.0))
        try:
            async with asyncio.TaskGroup() as group:
                if nri is not None:
                    plugin = build_plugin(
                        nri,
                        informer=self.informer,
                        gates=self.gates,
                        strategies=[state.plugin for state in self.qos_manager.plugins],
                        executor=ResourceExecutor(self.cgroupfs, clock=self.clock),
                        registry=self.registry,
                        node=opts.node_name,
                        hami_core_library=getattr(opts.args, "hami_core_library_directory_path", None)
                        or DEFAULT_HAMI_CORE_LIBRARY,
                    )
                    group.create_task(run_plugin(plugin, self.stop), name="nri-runtime-hooks")
                if opts.standalone:
                    group.create_task(self._discover_loop(), name="pod-discovery")
                if kubelet_source is not None:
                    group.create_task(kubelet_source.run(self.stop), name="kubelet-pods")
                group.create_task(self.advisor.run(self.stop), name="metrics-advisor")
                group.create_task(self._metrics_loop(), name="prometheus-metrics")
                if not opts.standalone:
                    group.create_task(
                        self.reporter.run(self.stop, interval=opts.report_interval),
                        name="node-metric-reporter",
                    )
                    group.create_task(
                        self.predictor.run(
                            self.stop,
                            self.informer.get_all_pods,
                            UsageTraining(self.usage),
                            synced=lambda: self.informer.node is not None,
                        ),
                        name="peak-predictor",
                    )
                group.create_task(self.qos_manager.run(self.gates, ctx, self.stop), name="qos-manager")
                if self.gpu_reporter is not None:
                    group.create_task(
                        self.gpu_reporter.run(self.stop, interval=opts.report_interval or 60.0), name="gpu-reporter"
                    )
                for gated in self.gated_collectors:
                    group.create_task(gated.run(self.stop), name=gated.name)
                if opts.metrics_port >= 0:
                    group.create_task(server.serve(self.stop), name="http")
                if opts.duration is not None:
                    group.create_task(self._stop_after(opts.duration), name="duration")
        finally:
            if source is not None:
                source.stop()
        return self.reporter.decide() if opts.standalone else None
