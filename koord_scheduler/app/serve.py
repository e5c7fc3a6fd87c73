"""``koord-scheduler [--config FILE] ...``: schedule pods of a real cluster.

Flags follow kube-scheduler's names::

    --config FILE             KubeSchedulerConfiguration (default: kube-scheduler's defaults)
    --kubeconfig FILE         overrides clientConnection.kubeconfig; neither: in-cluster service account
    --leader-elect[=BOOL]     overrides leaderElection.leaderElect (default true, as kube-scheduler)
    --leader-elect-lease-duration / -renew-deadline / -retry-period DURATION
    --leader-elect-resource-name / -resource-namespace NAME
    --metrics-port PORT       plain-HTTP /healthz, /readyz, /metrics (default 10259; 0: off)
    --secure-port PORT        accepted for kube-scheduler compatibility; same as --metrics-port, and the
                              endpoints are still plain HTTP (no TLS, no delegated authn/z)
    --controllers LIST        cluster controllers (reservation, nodeslo, noderesource, nodemetric,
                              elasticquota, podgroup, deviceresource; "*" = all, the default; "-name"
                              turns one off)
    --scheduling[=BOOL]       false: run only the controllers (a cluster keeping kube-scheduler)
    --config-namespace NS     where slo-controller-config lives (default koordinator-system)
    --bind-address ADDR       where /healthz, /readyz, /metrics listen (default 0.0.0.0: kubelet probes and
                              Prometheus reach the pod IP; they read state, they change nothing)
    --debug-flags-port PORT   serve PUT /debug/flags/s and /debug/flags/f on 127.0.0.1:PORT (default 0: off;
                              see :mod:`.debug_server`)
    -v N, --v N               log verbosity (0: warnings plus lifecycle; 2: per-pod; 4+: debug)

Lifecycle: the configuration is validated and every profile built before any network I/O, so a bad
config is refused at once (exit 2, one message, no traceback). Then the HTTP endpoints come up, the
cluster is listed (``/readyz`` turns ok once synced) and watched; a replica schedules only while it
holds the leader Lease; the controllers, too, act only on the leader. SIGTERM / SIGINT stop
scheduling, wait up to 10 s for bindings in flight, release the Lease and exit 0. Losing the Lease
exits 1 at once, as kube-scheduler does, so the Deployment restarts the replica as a clean candidate.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, ProcessCollector, generate_latest

from apis.config import KubeSchedulerConfiguration, load_scheduler_config
from apis.config.duration import parse_go_duration
from koord_scheduler.app.controllers import (
    Colocation,
    ControllerFlags,
    Hosted,
    add_controller_flags,
    build_colocation,
    build_deviceresource,
    build_podgroup,
    build_quota_status,
    controller_flags,
    hold_controllers,
)
from koord_scheduler.app.debug_server import (
    LOOPBACK,
    MAX_DEBUG_SCORES,
    DebugValueError,
    parse_debug_scores,
    start_debug_server,
)
from koord_scheduler.framework.errors import ClusterError, SchedulerError
from koord_scheduler.framework.registry import Registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.controllers.runner import ControllerSink, FanoutSink
from koord_scheduler.scheduler.controllers.selection import RESERVATION
from koord_scheduler.scheduler.heap import HeapSettler
from koord_scheduler.scheduler.kube import (
    ApiHttp,
    HttpOptions,
    KubeClusterSource,
    KubeSourceOptions,
    TokenBucket,
    load_connection,
)
from koord_scheduler.scheduler.leaderelection import LeaderElectionOptions, LeaderElector
from koord_scheduler.scheduler.metrics import SchedulerMetrics
from koord_scheduler.scheduler.reservation_controller.decide import controller_options
from koord_scheduler.scheduler.reservation_controller.operator import ApiSettings, ReservationControllerThread
from koord_scheduler.scheduler.scheduler import Scheduler, SchedulerOptions
from koord_scheduler.scheduler.source import EventSink
from koord_scheduler.webhook.options import WebhookOptions, WebhookRuntime, add_webhook_flags, webhook_options

log = logging.getLogger("koord-scheduler")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

DEFAULT_METRICS_PORT = 10259
SHUTDOWN_GRACE_SECONDS = 10.0


class ServeError(SchedulerError):
    """A command-line or configuration problem found before starting."""


@dataclass(frozen=True, slots=True)
class ServeOptions:
    config: KubeSchedulerConfiguration
    kubeconfig: str
    leader_elect: bool
    leader_election: LeaderElectionOptions
    bind_address: str
    metrics_port: int
    debug_scores: int = 0
    debug_filters: bool = False
    controllers: ControllerFlags = field(
        default_factory=lambda: ControllerFlags(frozenset({RESERVATION}), True, "", "")
    )

    @property
    def reservation_controller(self) -> bool:
        return RESERVATION in self.controllers.enabled

    debug_flags_port: int = 0
    """0: the runtime debug switches are not served at all."""
    webhook: WebhookOptions = field(default_factory=WebhookOptions)


def serve_main(argv: Sequence[str], registry: Callable[[], Registry]) -> int:
    """Run cluster mode until SIGTERM; the process exit code. ``ConfigError`` / ``SchedulerError`` raised
    here are reported by the CLI as one line and exit 2."""
    ns = _parser().parse_args(list(argv))
    _setup_logging(ns.v)
    options = _options(ns)
    connection = load_connection(options.kubeconfig)
    metrics = SchedulerMetrics()
    source = KubeClusterSource(
        connection,
        options=KubeSourceOptions(
            qps=options.config.client_connection.qps,
            burst=options.config.client_connection.burst,
            scheduler_names=tuple(p.scheduler_name for p in options.config.profiles),
        ),
    )
    # The collector is settled once the caches are listed, and again when idle (scheduler.heap).
    scheduler = build_scheduler(
        options.config, registry(), source, metrics=metrics, options=SchedulerOptions(heap=HeapSettler())
    ) if options.controllers.scheduling else None
    client = options.config.client_connection
    colocation = build_colocation(
        options.controllers, source, metrics, client=(client.qps, client.burst),
        scheduler_kinds=scheduler.watched_kinds if scheduler is not None else (),
    )
    kinds = scheduler.watched_kinds if scheduler is not None else {}
    hosted = [h for h in (
        build_quota_status(options.controllers, source, options.config, client=(client.qps, client.burst),
                           scheduler_kinds=kinds),
        build_podgroup(options.controllers, source, client=(client.qps, client.burst), scheduler_kinds=kinds),
        build_deviceresource(options.controllers, source, client=(client.qps, client.burst), scheduler_kinds=kinds),
    ) if h is not None]
    log.info("koord-scheduler: profiles %s, controllers %s, API server %s (%s)",
             ", ".join(scheduler.profiles) if scheduler else "none (scheduling off)",
             ", ".join(sorted(options.controllers.enabled)) or "none", connection.server, connection.description)
    loop_factory = event_loop_factory(os.environ.get(EVENT_LOOP_ENV, ""))

    def run() -> int:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(
                _run(options, scheduler, source, metrics, colocation, hosted=hosted)
            )

    return _with_cpu_profile(run)


EVENT_LOOP_ENV = "PYKOORD_EVENT_LOOP"
"""``uvloop`` (the default when it is installed) or ``asyncio`` (the standard library's loop)."""


def event_loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop cluster mode runs on; None is asyncio's default.

    uvloop when available: every bind, Event and watch event goes through the loop's transports,
    and uvloop's (TLS included) cost about a fifth less CPU per API request than asyncio's, which on a
    busy node is scheduling throughput. ``choice`` is :data:`EVENT_LOOP_ENV`'s value: empty picks
    uvloop if it can be imported, ``asyncio`` forces the default loop; anything else is refused."""
    if choice not in ("", "uvloop", "asyncio"):
        raise ServeError(f"{EVENT_LOOP_ENV}: {choice!r} is not an event loop (use uvloop or asyncio)")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ServeError(f"{EVENT_LOOP_ENV}=uvloop, but uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


CPU_PROFILE_ENV = "PYKOORD_CPU_PROFILE"
"""When set, cluster mode runs under cProfile timed by CPU time (``time.process_time``) and writes the
stats to this path at exit. CPU time, not wall time, because on a shared machine wall time mostly
measures when the process was runnable but not running (e.g. right after a loopback send)."""


def _with_cpu_profile(run: Callable[[], int]) -> int:
    path = os.environ.get(CPU_PROFILE_ENV)
    if not path:
        return run()
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    try:
        return run()
    finally:
        profiler.disable()
        profiler.dump_stats(path)


# ----- flags -----


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="koord-scheduler",
        description="Schedule the pods of a Kubernetes cluster (run 'koord-scheduler simulate -h' for the "
        "simulator).",
    )
    parser.add_argument("--config", help="KubeSchedulerConfiguration file")
    parser.add_argument("--kubeconfig", default="", help="kubeconfig file (overrides clientConnection.kubeconfig)")
    parser.add_argument("--leader-elect", nargs="?", const=True, default=None, type=_parse_bool,
                        metavar="BOOL", help="use a Lease so only one replica schedules (default: from config)")
    for flag in ("lease-duration", "renew-deadline", "retry-period"):
        parser.add_argument(f"--leader-elect-{flag}", type=_parse_duration, metavar="DURATION")
    parser.add_argument("--leader-elect-resource-name", metavar="NAME")
    parser.add_argument("--leader-elect-resource-namespace", metavar="NAMESPACE")
    port = parser.add_mutually_exclusive_group()
    port.add_argument("--metrics-port", type=int, default=None,
                      help=f"plain-HTTP port for /healthz, /readyz, /metrics (default {DEFAULT_METRICS_PORT}; 0: off)")
    port.add_argument("--secure-port", type=int, default=None, dest="secure_port",
                      help="kube-scheduler's flag name; an alias of --metrics-port (still plain HTTP)")
    parser.add_argument("--bind-address", default="0.0.0.0", help="address the HTTP endpoints listen on")
    parser.add_argument("-v", "--v", type=int, default=0, metavar="N", help="log verbosity")
    parser.add_argument("-s", "--debug-scores", type=_debug_scores, default=0, metavar="N",
                        help=f"log the top N nodes with per-plugin scores for every pod (0: off, at most "
                        f"{MAX_DEBUG_SCORES}); switch at runtime with PUT /debug/flags/s on --debug-flags-port")
    parser.add_argument("-f", "--debug-filters", nargs="?", const=True, default=False, type=_parse_bool,
                        help="log every filter failure; switch at runtime with PUT /debug/flags/f")
    parser.add_argument("--debug-flags-port", type=int, default=0, metavar="PORT",
                        help="serve PUT /debug/flags/{s,f} on 127.0.0.1:PORT only (default 0: off)")
    parser.add_argument("--reservation-controller", nargs="?", const=True, default=True, type=_parse_bool,
                        help="run the Reservation lifecycle controller (expiry, owners, GC) when the "
                        "Reservation plugin is enabled (default true; only the leader acts); false is "
                        "--controllers=...,-reservation")
    add_controller_flags(parser, _parse_bool)
    add_webhook_flags(parser)
    return parser


def _debug_scores(text: str) -> int:
    try:
        return parse_debug_scores(text)
    except DebugValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "t", "yes"):
        return True
    if lowered in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a boolean (true or false)")


def _parse_duration(text: str) -> float:
    try:
        return parse_go_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _options(ns: argparse.Namespace) -> ServeOptions:
    config = load_scheduler_config(ns.config) if ns.config else KubeSchedulerConfiguration()
    le = config.leader_election
    election = LeaderElectionOptions(
        lease_duration=ns.leader_elect_lease_duration or le.lease_duration,
        renew_deadline=ns.leader_elect_renew_deadline or le.renew_deadline,
        retry_period=ns.leader_elect_retry_period or le.retry_period,
        namespace=ns.leader_elect_resource_namespace or le.resource_namespace,
        name=ns.leader_elect_resource_name or le.resource_name,
    )
    leader_elect = le.leader_elect if ns.leader_elect is None else bool(ns.leader_elect)
    if leader_elect:
        if le.resource_lock not in ("leases", ""):
            raise ServeError(f"leaderElection.resourceLock: {le.resource_lock!r} is not supported (use leases)")
        try:
            election.validate()
        except ValueError as exc:
            raise ServeError(f"leaderElection: {exc}") from None
    port = ns.metrics_port if ns.metrics_port is not None else ns.secure_port
    if port is None:
        port = DEFAULT_METRICS_PORT
    port = _port("--metrics-port", port)
    return ServeOptions(
        config=config,
        kubeconfig=ns.kubeconfig or config.client_connection.kubeconfig,
        leader_elect=leader_elect,
        leader_election=election,
        bind_address=ns.bind_address,
        metrics_port=port,
        debug_scores=ns.debug_scores,
        debug_filters=bool(ns.debug_filters),
        controllers=controller_flags(ns),
        debug_flags_port=_port("--debug-flags-port", ns.debug_flags_port),
        webhook=_webhook_options(ns),
    )


def _port(flag: str, port: int) -> int:
    if not 0 <= port <= 65535:
        raise ServeError(f"{flag}: {port} is not a port number")
    return port


def _webhook_options(ns: argparse.Namespace) -> WebhookOptions:
    try:
        return webhook_options(ns)
    except ValueError as exc:
        raise ServeError(str(exc)) from None


def _setup_logging(verbosity: int) -> None:
    root = logging.DEBUG if verbosity >= 4 else logging.INFO if verbosity >= 2 else logging.WARNING
    logging.basicConfig(level=root, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    lifecycle = logging.DEBUG if verbosity >= 4 else logging.INFO
    for name in ("koord-scheduler", "koord_scheduler.scheduler.kube", "koord_scheduler.scheduler.leaderelection"):
        logging.getLogger(name).setLevel(lifecycle)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


# ----- running -----


@dataclass(slots=True)
class _State:
    source: KubeClusterSource
    elector: LeaderElector | None
    scheduler: Scheduler | None = None
    stopping: bool = False

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
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ProcessCollector(registry=metrics.registry)
    elector = _elector(options, source, metrics) if options.leader_elect else None
    state = _State(source, elector, scheduler)
    state.set_debug(scores=options.debug_scores, filters=options.debug_filters)
    controller = _reservation_controller(options, scheduler, elector, metrics)
    runner: web.AppRunner | None = None
    colocation_task: asyncio.Future[None] | None = None
    debug_runner: web.AppRunner | None = None
    webhook = WebhookRuntime(options.webhook, source.connection, metrics.registry) if options.webhook.enabled else None
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
                runner = await _start_http(options, state, metrics)
            except OSError as exc:
                print(f"koord-scheduler: cannot listen on {options.bind_address}:{options.metrics_port}: "
                      f"{exc.strerror or exc}", file=sys.stderr)
                return EXIT_USAGE
        if options.debug_flags_port:
            try:
                debug_runner = await start_debug_server(options.debug_flags_port, state.set_debug)
            except OSError as exc:
                print(f"koord-scheduler: cannot listen on {LOOPBACK}:{options.debug_flags_port}: "
                      f"{exc.strerror or exc}", file=sys.stderr)
                return EXIT_USAGE
        kinds = list(scheduler.watched_kinds.values()) if scheduler is not None else []
        controllers: list[ControllerSink] = []
        if colocation is not None:
            controllers.append(colocation.controllers)
        controllers.extend(h.controller for h in hosted)
        sink: EventSink | None = scheduler
        if controllers:
            sink = FanoutSink(scheduler, *controllers, object_errors=metrics.object_errors)
        if sink is None:
            log.error("nothing to do: scheduling is off and no controller is enabled")
            return EXIT_USAGE
        if not await _until_stopped(source.start(sink, kinds), stop):
            return EXIT_OK
        if controller is not None:
            controller.start()
        if elector is not None and not await _until_stopped(elector.acquire(), stop):
            return EXIT_OK
        runs = [*([colocation.controllers.run(stop)] if colocation else []), *(h.controller.run(stop) for h in hosted)]
        if runs:
            colocation_task = asyncio.ensure_future(_gather_controllers(runs))
        if scheduler is None:
            return await hold_controllers(elector, stop, colocation_task)
        return await _schedule(scheduler, elector, stop, state)
    finally:
        state.stopping = True
        if colocation_task is not None:
            colocation_task.cancel()
            await asyncio.gather(colocation_task, return_exceptions=True)
        if colocation is not None:
            await colocation.http.close()
        for h in hosted:
            await h.http.close()
        if controller is not None and controller.alive:
            await asyncio.to_thread(controller.stop, 15.0)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if elector is not None:
            await elector.release()
            await elector.http.close()
        await source.stop()
        if webhook is not None:
            await webhook.stop()
        if runner is not None:
            await runner.cleanup()
        if debug_runner is not None:
            await debug_runner.cleanup()


async def _gather_controllers(runs: list[Coroutine[Any, Any, None]]) -> None:
    """The leader-only controllers together: the first failure cancels the others and is raised."""
    await asyncio.gather(*runs)


async def _schedule(scheduler: Scheduler, elector: LeaderElector | None, stop: asyncio.Event, state: _State) -> int:
    run = asyncio.ensure_future(scheduler.run(stop))
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
    if run.exception() is not None:
        log.error("scheduling loop failed", exc_info=run.exception())
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


def _reservation_controller(
    options: ServeOptions, scheduler: Scheduler | None, elector: LeaderElector | None, metrics: SchedulerMetrics
) -> ReservationControllerThread | None:
    """The Reservation lifecycle controller, when selected and some profile enables the Reservation
    plugin (with scheduling off: when selected)."""
    if RESERVATION not in options.controllers.enabled:
        return None
    if scheduler is not None and not any("Reservation" in fwk.plugins for fwk in scheduler.profiles.values()):
        return None
    api = ApiSettings(kubeconfig=options.kubeconfig or None)
    is_leader: Callable[[], bool] = (lambda: elector.is_leader) if elector is not None else (lambda: True)
    return ReservationControllerThread(
        api, controller_options(options.config), is_leader=is_leader, object_errors=metrics.object_errors
    )


def _elector(options: ServeOptions, source: KubeClusterSource, metrics: SchedulerMetrics) -> LeaderElector:
    status = Gauge("leader_election_master_status",
                   "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
                   "1 indicates master. 'name' is the string used to identify the lease.",
                   ["name"], registry=metrics.registry)
    name = options.leader_election.name
    status.labels(name).set(0)
    http = ApiHttp(source.connection, TokenBucket(0, 1), options=HttpOptions(pool_size=4, request_timeout=5.0))
    return LeaderElector(http, options.leader_election, on_change=lambda leader: status.labels(name).set(int(leader)))


async def _start_http(options: ServeOptions, state: _State, metrics: SchedulerMetrics) -> web.AppRunner:
    def check(probe: Callable[[], tuple[bool, str]]) -> Callable[[web.Request], asyncio.Future[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            ok, text = probe()
            return web.Response(status=200 if ok else 503, text=text)

        return handler  # type: ignore[return-value]

    async def metrics_handler(_: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", check(state.healthz))
    app.router.add_get("/livez", check(state.healthz))
    app.router.add_get("/readyz", check(state.readyz))
    app.router.add_get("/metrics", metrics_handler)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, options.bind_address, options.metrics_port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    log.info("serving /healthz, /readyz, /metrics on http://%s:%d", options.bind_address, options.metrics_port)
    return runner


