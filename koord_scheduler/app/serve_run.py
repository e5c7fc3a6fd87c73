"""Cluster mode once the flags are parsed (:mod:`.serve`): the scheduler, the controllers, the HTTP
endpoints and leader election, run until SIGTERM.

A module of its own so that ``koord-scheduler --help`` and a refused flag load none of it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, Gauge, ProcessCollector, generate_latest

from koord_scheduler.app.controllers import (
    Colocation,
    ControllerClient,
    Hosted,
    build_colocation,
    build_colocationprofile,
    build_deviceresource,
    build_podgroup,
    build_quota_status,
    build_quotaprofile,
    build_reservation,
    hold_controllers,
)
from koord_scheduler.app.debug_server import LOOPBACK, start_debug_server
from koord_scheduler.app.logs import loop_exception_handler
from koord_scheduler.app.serve import (
    EVENT_LOOP_ENV,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    SHUTDOWN_GRACE_SECONDS,
    ServeOptions,
    _with_cpu_profile,
    event_loop_factory,
)
from koord_scheduler.app.services_http import service_routes
from koord_scheduler.controllers.fanout import ControllerSink, FanoutSink
from koord_scheduler.controllers.selection import DESCHEDULER, MIGRATION
from koord_scheduler.framework.errors import ClusterError, log_failure
from koord_scheduler.framework.registry import Registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.heap import STARTUP_PAUSE_LIMIT, HeapSettler, resume_collector
from koord_scheduler.scheduler.kube_source import KubeClusterSource, KubeSourceOptions
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koord_scheduler.scheduler.plugin_services import ServiceTable, scheduler_services
from koord_scheduler.scheduler.scheduler import Scheduler, SchedulerOptions
from koord_scheduler.scheduler.source import EventSink
from koord_scheduler.scheduler.task_restarts import supervise
from kubeapi import ApiHttp, HttpOptions, TokenBucket, load_connection
from kubeapi.leaderelection import LeaderElector
from kubeapi.protowire import wants_protobuf
from kubeapi.reflector import ReflectorOptions
from kubeapi.serving import Handler, HardenedServer, Request, Response, Route, new_app
from kubeapi.serving_limits import ServingLimits

if TYPE_CHECKING:
    from koord_scheduler.webhook.thread import AdmissionThread
    from kubeapi.prefetch import Prefetch

log = logging.getLogger("koord-scheduler")
startup_log = logging.getLogger("koord_scheduler.startup")


def run_cluster(options: ServeOptions, registry: Callable[[], Registry], *, prefetch: Prefetch | None = None) -> int:
    """Build the scheduler and the controllers for ``options`` and run until SIGTERM; the exit code.
    ``prefetch``: the first lists of Nodes and Pods, started earlier (its connection is the one used)."""
    startup_log.info("start-up: modules loaded (%.2f CPU-s since start)", time.process_time())
    connection = prefetch.connection() if prefetch is not None else load_connection(options.kubeconfig)
    metrics = SchedulerMetrics()
    source = KubeClusterSource(
        connection,
        options=KubeSourceOptions(
            qps=options.config.client_connection.qps,
            burst=options.config.client_connection.burst,
            scheduler_names=tuple(p.scheduler_name for p in options.config.profiles),
            reflector=ReflectorOptions(
                protobuf=wants_protobuf(
                    options.config.client_connection.accept_content_types,
                    options.config.client_connection.content_type,
                )
            ),
        ),
        prefetch=prefetch,
        restarts=metrics.task_restarts,
    )
    # The collector's thresholds are raised before the caches load; the heap is settled when the
    # scheduler is first idle, and again when idle later (scheduler.heap). Without scheduling nothing
    # would settle it, so the collector keeps its defaults.
    heap = HeapSettler()
    if options.controllers.scheduling:
        heap.loading()
    scheduler = (
        build_scheduler(
            options.config,
            registry(),
            source,
            metrics=metrics,
            options=SchedulerOptions(heap=heap, feature_gates=options.feature_gates, monitor=options.monitor),
        )
        if options.controllers.scheduling
        else None
    )
    connection_options = options.config.client_connection
    # Binds first: with scheduling on, the controllers' writes share a small budget while the scheduler
    # has requests in flight (a new leader's controllers may have one write per node to make).
    client = (
        ControllerClient(connection_options.qps, connection_options.burst)
        if scheduler is None
        else ControllerClient.yielding_to(
            connection_options.qps, connection_options.burst, lambda: source.http.in_flight > 0
        )
    )
    colocation = build_colocation(
        options.controllers,
        source,
        metrics,
        client=client,
        scheduler_kinds=scheduler.watched_kinds if scheduler is not None else (),
    )
    kinds = scheduler.watched_kinds if scheduler is not None else {}
    # The Reservation controller runs when selected and some profile enables the Reservation plugin (with
    # scheduling off: when selected).
    reservation_plugin = scheduler is None or any("Reservation" in fwk.plugins for fwk in scheduler.profiles.values())
    errors = metrics.object_errors
    hosted: list[Hosted] = [
        h
        for h in (
            build_reservation(
                options.controllers,
                source,
                options.config,
                client=client,
                scheduler_kinds=kinds,
                plugin_enabled=reservation_plugin,
                object_errors=errors,
            ),
            build_quota_status(
                options.controllers, source, options.config, client=client, scheduler_kinds=kinds, object_errors=errors
            ),
            build_podgroup(
                options.controllers, source, options.config, client=client, scheduler_kinds=kinds, object_errors=errors
            ),
            build_deviceresource(
                options.controllers, source, client=client, scheduler_kinds=kinds, object_errors=errors
            ),
            build_quotaprofile(options.controllers, source, client=client, scheduler_kinds=kinds, object_errors=errors),
            build_colocationprofile(options.controllers, source, client=client, object_errors=errors),
        )
        if h is not None
    ]
    if options.controllers.enabled & {MIGRATION, DESCHEDULER}:
        # Off by default: the descheduler's modules load only when one of its controllers runs.
        from koord_scheduler.app.descheduling import build_descheduling

        hosted += build_descheduling(
            options.controllers, source, client=client, scheduler_kinds=kinds, object_errors=errors
        )
    startup_log.info("start-up: profiles and controllers built (%.2f CPU-s since start)", time.process_time())
    log.info(
        "koord-scheduler: profiles %s, controllers %s, API server %s (%s)",
        ", ".join(scheduler.profiles) if scheduler else "none (scheduling off)",
        ", ".join(sorted(options.controllers.enabled)) or "none",
        connection.server,
        connection.description,
    )
    loop_factory = event_loop_factory(os.environ.get(EVENT_LOOP_ENV, ""))

    def run() -> int:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(_run(options, scheduler, source, metrics, colocation, hosted=hosted))

    return _with_cpu_profile(run)


# ----- running -----


@dataclass(slots=True)
class _State:
    source: KubeClusterSource
    elector: LeaderElector | None
    scheduler: Scheduler | None = None
    stopping: bool = False
    admission_only: bool = False
    """Scheduling and every controller off, the webhook on: ready once the webhook serves (no informers)."""
    services: ServiceTable | None = None
    """``/apis/v1`` (:mod:`koord_scheduler.scheduler.plugin_services`); None with scheduling off."""

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def set_debug(self, *, scores: int | None = None, filters: bool | None = None) -> None:
        """``--debug-scores`` / ``--debug-filters`` for every profile (also switched over HTTP)."""
        if self.scheduler is None:
            return
        for fwk in self.scheduler.profiles.values():
            if scores is not None:
                fwk.debug.scores = scores
            if filters is not None:
                fwk.debug.filters = filters

    def healthz(self) -> tuple[bool, str]:
        if self.elector is not None and not self.elector.healthy():
            return False, "leaderElection: lease renewal is overdue"
        return True, "ok"

    def readyz(self) -> tuple[bool, str]:
        if self.stopping:
            return False, "shutting down"
        if self.admission_only:
            return True, "ok"
        if not self.source.synced:
            return False, "informers not synced"
        return self.healthz()


async def _run(
    options: ServeOptions,
    scheduler: Scheduler | None,
    source: KubeClusterSource,
    metrics: SchedulerMetrics,
    colocation: Colocation | None = None,
    *,
    hosted: Sequence[Hosted] = (),
) -> int:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(loop_exception_handler)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ProcessCollector(registry=metrics.registry)
    elector = _elector(options, source, metrics) if options.leader_elect else None
    state = _State(source, elector, scheduler)
    if scheduler is not None and options.plugin_services:
        state.services = scheduler_services(scheduler)
    state.set_debug(scores=options.debug_scores, filters=options.debug_filters)
    starter: asyncio.Future[None] | None = None
    releasing: asyncio.Future[None] | None = None
    runner: HardenedServer | None = None
    colocation_task: asyncio.Future[None] | None = None
    debug_runner: HardenedServer | None = None
    webhook: AdmissionThread | None = None
    if options.webhook.enabled:  # TLS, certificates and the admission code load only when it is on
        from koord_scheduler.webhook.options import WebhookRuntime
        from koord_scheduler.webhook.thread import AdmissionThread

        # Its own thread and event loop: reviews never wait for, nor delay, a scheduling cycle.
        webhook = AdmissionThread(
            lambda: WebhookRuntime(options.webhook, source.connection, metrics.registry),
            loop_factory=event_loop_factory(os.environ.get(EVENT_LOOP_ENV, "")),
        )
    try:
        if webhook is not None:
            # Every replica serves admission, leader or not; a webhook that cannot start is fatal.
            try:
                await webhook.start()
            except (OSError, ClusterError) as exc:
                print(f"koord-scheduler: the admission webhook cannot start: {exc}", file=sys.stderr)
                return EXIT_FAILED
        if options.metrics_port:
            try:
                services = (lambda: state.services, state.is_leader) if options.plugin_services else None
                runner = await _start_http(options, state, metrics, services=services)
            except OSError as exc:
                print(
                    f"koord-scheduler: cannot listen on {options.bind_address}:{options.metrics_port}: "
                    f"{exc.strerror or exc}",
                    file=sys.stderr,
                )
                return EXIT_USAGE
        if options.debug_flags_port:
            try:
                debug_runner = await start_debug_server(options.debug_flags_port, state.set_debug)
            except OSError as exc:
                print(
                    f"koord-scheduler: cannot listen on {LOOPBACK}:{options.debug_flags_port}: {exc.strerror or exc}",
                    file=sys.stderr,
                )
                return EXIT_USAGE
        kinds = list(scheduler.watched_kinds.values()) if scheduler is not None else []
        controllers: list[ControllerSink] = []
        if colocation is not None:
            controllers.append(colocation.controllers)
        controllers.extend(h.controller for h in hosted)
        sink: EventSink | None = scheduler
        fanout: FanoutSink | None = None
        if controllers:
            # With scheduling on, the controllers get the first lists after the first pass (see
            # controllers.fanout): the bound pods reach the scheduler's cache without waiting for them.
            fanout = FanoutSink(
                scheduler, *controllers, object_errors=metrics.object_errors, hold_controllers=scheduler is not None
            )
            sink = fanout
        if sink is None:
            if webhook is None:
                log.error("nothing to do: scheduling is off and no controller is enabled")
                return EXIT_USAGE
            # An admission-only replica (the webhook in a process, or Deployment, of its own): no informers,
            # no Lease; it serves until stopped.
            state.admission_only = True
            resume_collector()  # paused for the first lists, which this process does not take
            log.info("scheduling and controllers off: serving the admission webhooks only")
            await stop.wait()
            return EXIT_OK
        # The collector, paused since the flags were read (scheduler.heap.pause_collector), comes back
        # once the first lists are delivered, or after STARTUP_PAUSE_LIMIT if they do not come.
        resume = loop.call_later(STARTUP_PAUSE_LIMIT, resume_collector)
        try:
            if not await _until_stopped(source.start(sink, kinds), stop):
                return EXIT_OK
        finally:
            resume.cancel()
            resume_collector(freeze=scheduler is not None)  # the scheduler's HeapSettler settles it later
        if fanout is not None and elector is not None:
            # A standby may wait for the Lease for hours: its controllers catch up now, not at takeover.
            releasing = asyncio.ensure_future(fanout.release())
        if elector is not None and not await _until_stopped(elector.acquire(), stop):
            return EXIT_OK

        def start_controllers() -> None:
            """The leader-only controllers' tasks. With scheduling on they start after the first pass
            (``first_pass_done``), so their first reconcile does not delay the first binds."""
            nonlocal colocation_task
            # A controller loop that raises is started again (and counted), never lost silently.
            restarts = metrics.task_restarts
            runs = [
                *(
                    [supervise("controller-colocation", partial(colocation.controllers.run, stop), restarts=restarts)]
                    if colocation
                    else []
                ),
                *(
                    supervise(f"controller-{h.name}", partial(h.controller.run, stop), restarts=restarts)
                    for h in hosted
                ),
            ]
            if runs:
                colocation_task = asyncio.ensure_future(_gather_controllers(runs))

        if scheduler is None:
            start_controllers()
            return await hold_controllers(elector, stop, colocation_task)
        starter = asyncio.ensure_future(_start_after_first_pass(scheduler, fanout, releasing, start_controllers))
        return await _schedule(scheduler, elector, stop, state)
    finally:
        state.stopping = True
        for task in (starter, releasing):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if colocation_task is not None:
            colocation_task.cancel()
            await asyncio.gather(colocation_task, return_exceptions=True)
        if colocation is not None:
            await colocation.http.close()
        for h in hosted:
            await h.http.close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if elector is not None:
            await elector.release()
            await elector.http.close()
        await source.stop()
        if webhook is not None:
            await webhook.stop()
        if runner is not None:
            await runner.stop()
        if debug_runner is not None:
            await debug_runner.stop()


async def _start_after_first_pass(
    scheduler: Scheduler,
    fanout: FanoutSink | None,
    releasing: asyncio.Future[None] | None,
    start: Callable[[], None],
) -> None:
    """``start`` (the controllers' loops) once the scheduler's first pass is done and the controllers
    have been given the events held for them (:meth:`FanoutSink.release`, already under way on a replica
    with leader election), so no controller reconciles a partial view."""
    await scheduler.first_pass_done.wait()
    if releasing is not None:
        await releasing
    elif fanout is not None:
        await fanout.release()
    start()


async def _gather_controllers(runs: list[Coroutine[Any, Any, None]]) -> None:
    """The leader-only controllers together: the first failure cancels the others and is raised."""
    await asyncio.gather(*runs)


async def _schedule(scheduler: Scheduler, elector: LeaderElector | None, stop: asyncio.Event, state: _State) -> int:
    run = asyncio.ensure_future(scheduler.run(stop))
    monitor = asyncio.ensure_future(scheduler.monitor.run(stop))
    run.add_done_callback(lambda _: monitor.cancel())
    hold = asyncio.ensure_future(elector.hold()) if elector is not None else None
    waiting: set[asyncio.Future[None]] = {run} | ({hold} if hold is not None else set())
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if hold is not None and hold.done() and not run.done():
        log.error("leader election lost; exiting")
        stop.set()
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        return EXIT_FAILED
    if hold is not None:
        hold.cancel()
        await asyncio.gather(hold, return_exceptions=True)
    if (error := run.exception()) is not None:
        log_failure(log, "scheduling loop failed", error)
        return EXIT_FAILED
    state.stopping = True
    log.info("stopping: waiting up to %.0fs for bindings in flight", SHUTDOWN_GRACE_SECONDS)
    try:
        await asyncio.wait_for(scheduler.drain(), SHUTDOWN_GRACE_SECONDS)
    except TimeoutError:
        log.warning("bindings still in flight at shutdown; their pods stay pending for the next leader")
    return EXIT_OK


async def _until_stopped(coro: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run ``coro`` until it finishes (True) or ``stop`` is set first (False, ``coro`` cancelled)."""
    task = asyncio.ensure_future(coro)
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        stopper.cancel()
        await asyncio.gather(stopper, return_exceptions=True)
        task.result()
        return True
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return False


def _elector(options: ServeOptions, source: KubeClusterSource, metrics: SchedulerMetrics) -> LeaderElector:
    status = Gauge(
        "leader_election_master_status",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
        "1 indicates master. 'name' is the string used to identify the lease.",
        ["name"],
        registry=metrics.registry,
    )
    name = options.leader_election.name
    status.labels(name).set(0)
    http = ApiHttp(source.connection, TokenBucket(0, 1), options=HttpOptions(pool_size=4, request_timeout=5.0))
    return LeaderElector(http, options.leader_election, on_change=lambda leader: status.labels(name).set(int(leader)))


METRICS_LIMITS = ServingLimits(max_body_bytes=64 * 1024, max_connections=64)
"""The probes and /metrics are GETs: a small body limit; header and connection bounds as every server's."""


ServicesSource = tuple[Callable[[], ServiceTable | None], Callable[[], bool]]
"""(the ``/apis/v1`` table, or None with scheduling off; whether this replica leads)."""


async def _start_http(
    options: ServeOptions,
    state: _State,
    metrics: SchedulerMetrics,
    *,
    limits: ServingLimits = METRICS_LIMITS,
    services: ServicesSource | None = None,
) -> HardenedServer:
    def check(probe: Callable[[], tuple[bool, str]]) -> Handler:
        async def handler(_: Request) -> Response:
            ok, text = probe()
            return Response(status=200 if ok else 503, text=text)

        return handler

    async def metrics_handler(_: Request) -> Response:
        body = generate_latest(metrics.registry)
        return Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    routes: list[Route] = [
        ("GET", "/healthz", check(state.healthz)),
        ("GET", "/livez", check(state.healthz)),
        ("GET", "/readyz", check(state.readyz)),
        ("GET", "/metrics", metrics_handler),
    ]
    if services is not None:
        routes += service_routes(services[0], is_leader=services[1])
    server = HardenedServer(
        new_app(routes, max_body_bytes=limits.max_body_bytes),
        address=options.bind_address,
        port=options.metrics_port,
        ssl_context=None,
        limits=limits,
    )
    await server.start()
    log.info(
        "serving /healthz, /readyz, /metrics%s on http://%s:%d",
        ", /apis/v1/..." if services else "",
        options.bind_address,
        options.metrics_port,
    )
    return server
