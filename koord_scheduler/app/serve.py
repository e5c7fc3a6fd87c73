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
                              elasticquota, podgroup, deviceresource, quotaprofile; "*" = all, the default;
                              "-name" turns one off; colocationprofile, and migration, the PodMigrationJob
                              controller, only when named)
    --scheduling[=BOOL]       false: run only the controllers (a cluster keeping kube-scheduler)
    --config-namespace NS     where slo-controller-config lives (default koordinator-system)
    --bind-address ADDR       where /healthz, /readyz, /metrics listen (default 0.0.0.0: kubelet probes and
                              Prometheus reach the pod IP; they read state, they change nothing)
    --debug-flags-port PORT   serve PUT /debug/flags/s and /debug/flags/f on 127.0.0.1:PORT (default 0: off;
                              see :mod:`.debug_server`)
    --scheduling-timeout DURATION        log a warning and count scheduler_scheduling_timeout_total when a
                              pod's attempt runs longer (default 30s; 0s: off; see scheduler/monitor.py)
    --scheduler-monitor-period DURATION  how often bindings in flight are checked (default 10s)
    --plugin-services[=BOOL]  serve Koordinator's read-only GET /apis/v1/... (plugin ledgers) on the metrics
                              port, leader only (default true; see app/services_http.py)
    -v N, --v N               log verbosity (0: warnings plus lifecycle; 2: per-pod; 4+: debug)

Lifecycle: the configuration is validated and every profile built before any network I/O, so a bad
config is refused at once (exit 2, one message, no traceback). Then the HTTP endpoints come up, the
cluster is listed (``/readyz`` turns ok once synced) and watched; a replica schedules only while it
holds the leader Lease; the controllers, too, act only on the leader. A standby lists and watches
like the leader, so its caches are warm and taking over costs only the Lease wait. The leader-only
controllers start once the first scheduling pass is done, so they do not delay the first binds.
SIGTERM / SIGINT stop scheduling, wait up to 10 s for bindings in flight, release the Lease and exit 0. Losing the Lease
exits 1 at once, as kube-scheduler does, so the Deployment restarts the replica as a clean candidate.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from apis.feature_gates import (
    DEFAULT_FEATURE_GATES,
    FeatureGateError,
    SchedulerFeatureGates,
    parse_feature_gates_flag,
)
from koord_scheduler.app.controller_flags import ControllerFlags, add_controller_flags, controller_flags
from koord_scheduler.app.debug_server import MAX_DEBUG_SCORES, DebugValueError, parse_debug_scores
from koord_scheduler.controllers.selection import COLOCATIONPROFILE, RESERVATION
from koord_scheduler.framework.errors import SchedulerError
from koord_scheduler.scheduler.monitor import DEFAULT_MONITOR_PERIOD, DEFAULT_SCHEDULING_TIMEOUT, MonitorOptions
from koord_scheduler.webhook.flags import WebhookOptions, add_webhook_flags, webhook_options

if TYPE_CHECKING:
    import asyncio

    from apis.config import KubeSchedulerConfiguration
    from koord_scheduler.framework.registry import Registry
    from kubeapi.leaderelection import LeaderElectionOptions

log = logging.getLogger("koord-scheduler")
startup_log = logging.getLogger("koord_scheduler.startup")
"""Start-up time-line lines (``-v 2``)."""

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
    feature_gates: SchedulerFeatureGates = DEFAULT_FEATURE_GATES
    monitor: MonitorOptions = field(default_factory=MonitorOptions)
    """``--scheduling-timeout`` and ``--scheduler-monitor-period``."""
    plugin_services: bool = True
    """``--plugin-services``: ``/apis/v1/...`` on the metrics port."""


def serve_main(argv: Sequence[str], registry: Callable[[], Registry]) -> int:
    """Run cluster mode until SIGTERM; the process exit code. ``ConfigError`` / ``SchedulerError`` raised
    here are reported by the CLI as one line and exit 2."""
    ns = _parser().parse_args(list(argv))
    _setup_logging(ns.v)
    from koord_scheduler.scheduler.heap import pause_collector, resume_collector

    pause_collector()  # until the first lists are delivered (serve_run resumes it), or a failure here
    try:
        # The first lists of Nodes and Pods start now, on a thread, while the rest loads (the configuration's
        # validation, imports, profiles); with what the file says, checked against the validated result.
        from kubeapi.prefetch import Prefetch, from_kubeconfig
        from kubeapi.protowire import wants_protobuf
        from kubeapi.reflector import ReflectorOptions

        stated = _stated_client(ns)
        prefetch = None
        if stated is not None and not _admission_only(ns):
            prefetch = Prefetch(
                from_kubeconfig(stated[0]),
                qps=stated[1],
                burst=stated[2],
                reflector=ReflectorOptions(protobuf=stated[3]),
            ).start()
        options = _options(ns)
        startup_log.info("start-up: configuration read (%.2f CPU-s since start)", time.process_time())
        client = options.config.client_connection
        admission_only = not options.controllers.scheduling and not options.controllers.enabled
        protobuf = wants_protobuf(client.accept_content_types, client.content_type)
        if not admission_only and (
            prefetch is None or stated != (options.kubeconfig, client.qps, client.burst, protobuf)
        ):
            prefetch = Prefetch(
                from_kubeconfig(options.kubeconfig),
                qps=client.qps,
                burst=client.burst,
                reflector=ReflectorOptions(protobuf=protobuf),
            ).start()
        from koord_scheduler.app.serve_run import run_cluster

        return run_cluster(options, registry, prefetch=prefetch)
    finally:
        resume_collector()


def _admission_only(ns: argparse.Namespace) -> bool:
    """Scheduling and every controller off: nothing needs the early lists of Nodes and Pods (the process
    serves only the admission webhooks, or refuses to start)."""
    from koord_scheduler.controllers.selection import ControllerSelectionError, parse_controllers

    try:
        return not ns.scheduling and not parse_controllers(ns.controllers)
    except ControllerSelectionError:
        return False  # reported by _options


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
    import cProfile
    import time

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
        description="Schedule the pods of a Kubernetes cluster (run 'koord-scheduler simulate -h' for the simulator).",
    )
    parser.add_argument("--config", help="KubeSchedulerConfiguration file")
    parser.add_argument("--kubeconfig", default="", help="kubeconfig file (overrides clientConnection.kubeconfig)")
    parser.add_argument(
        "--leader-elect",
        nargs="?",
        const=True,
        default=None,
        type=_parse_bool,
        metavar="BOOL",
        help="use a Lease so only one replica schedules (default: from config)",
    )
    for flag in ("lease-duration", "renew-deadline", "retry-period"):
        parser.add_argument(f"--leader-elect-{flag}", type=_parse_duration, metavar="DURATION")
    parser.add_argument("--leader-elect-resource-name", metavar="NAME")
    parser.add_argument("--leader-elect-resource-namespace", metavar="NAMESPACE")
    port = parser.add_mutually_exclusive_group()
    port.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help=f"plain-HTTP port for /healthz, /readyz, /metrics (default {DEFAULT_METRICS_PORT}; 0: off)",
    )
    port.add_argument(
        "--secure-port",
        type=int,
        default=None,
        dest="secure_port",
        help="kube-scheduler's flag name; an alias of --metrics-port (still plain HTTP)",
    )
    parser.add_argument("--bind-address", default="0.0.0.0", help="address the HTTP endpoints listen on")
    parser.add_argument("-v", "--v", type=int, default=0, metavar="N", help="log verbosity")
    parser.add_argument(
        "-s",
        "--debug-scores",
        type=_debug_scores,
        default=0,
        metavar="N",
        help=f"log the top N nodes with per-plugin scores for every pod (0: off, at most "
        f"{MAX_DEBUG_SCORES}); switch at runtime with PUT /debug/flags/s on --debug-flags-port",
    )
    parser.add_argument(
        "-f",
        "--debug-filters",
        nargs="?",
        const=True,
        default=False,
        type=_parse_bool,
        help="log every filter failure; switch at runtime with PUT /debug/flags/f",
    )
    parser.add_argument(
        "--debug-flags-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve PUT /debug/flags/{s,f} on 127.0.0.1:PORT only (default 0: off)",
    )
    parser.add_argument(
        "--reservation-controller",
        nargs="?",
        const=True,
        default=True,
        type=_parse_bool,
        help="run the Reservation lifecycle controller (expiry, owners, GC) when the "
        "Reservation plugin is enabled (default true; only the leader acts); false is "
        "--controllers=...,-reservation",
    )
    parser.add_argument(
        "--scheduling-timeout",
        type=_parse_duration,
        default=DEFAULT_SCHEDULING_TIMEOUT,
        metavar="DURATION",
        help="warn (once per attempt) and count scheduler_scheduling_timeout_total "
        "when a pod's scheduling attempt runs longer than this (default 30s; 0s: off)",
    )
    parser.add_argument(
        "--scheduler-monitor-period",
        type=_parse_duration,
        default=DEFAULT_MONITOR_PERIOD,
        metavar="DURATION",
        help="how often bindings in flight are checked against --scheduling-timeout (default 10s)",
    )
    parser.add_argument(
        "--plugin-services",
        nargs="?",
        const=True,
        default=True,
        type=_parse_bool,
        metavar="BOOL",
        help="serve Koordinator's read-only /apis/v1/... plugin services on the metrics port, "
        "leader only (default true)",
    )
    add_feature_gates_flag(parser)
    add_controller_flags(parser, _parse_bool)
    add_webhook_flags(parser)
    return parser


def add_feature_gates_flag(parser: argparse.ArgumentParser) -> None:
    """``--feature-gates A=true,B=false``: kube-scheduler's gates and Koordinator's scheduler gates."""
    parser.add_argument(
        "--feature-gates",
        type=_feature_gates,
        default=DEFAULT_FEATURE_GATES,
        metavar="A=true,...",
        help="kube-scheduler v1.35's and Koordinator's scheduler feature gates; an unknown gate, or "
        "one set to a value koord-scheduler does not implement, is refused (docs/dra.md)",
    )


def _feature_gates(text: str) -> SchedulerFeatureGates:
    try:
        return SchedulerFeatureGates.resolve(parse_feature_gates_flag(text))
    except FeatureGateError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    from apis.config.duration import parse_go_duration

    try:
        return parse_go_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _options(ns: argparse.Namespace) -> ServeOptions:
    from apis.config import KubeSchedulerConfiguration, load_scheduler_config
    from kubeapi.leaderelection import LeaderElectionOptions

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
        controllers=_with_gated_controllers(controller_flags(ns), ns.feature_gates),
        debug_flags_port=_port("--debug-flags-port", ns.debug_flags_port),
        webhook=_with_admission_gates(_webhook_options(ns), ns.feature_gates),
        feature_gates=ns.feature_gates,
        monitor=_monitor_options(ns),
        plugin_services=bool(ns.plugin_services),
    )


def _with_admission_gates(webhook: WebhookOptions, gates: SchedulerFeatureGates) -> WebhookOptions:
    """The webhooks' gates out of ``--feature-gates`` (Koordinator's koord-manager gates)."""
    from koord_scheduler.webhook.gates import AdmissionGates

    return dataclasses.replace(webhook, gates=AdmissionGates.from_feature_gates(gates))


def _with_gated_controllers(flags: ControllerFlags, gates: SchedulerFeatureGates) -> ControllerFlags:
    """Koordinator's gate ``ColocationProfileController`` also turns on the ``colocationprofile`` controller."""
    if not gates.enabled("ColocationProfileController"):
        return flags
    return dataclasses.replace(flags, enabled=flags.enabled | {COLOCATIONPROFILE})


def _monitor_options(ns: argparse.Namespace) -> MonitorOptions:
    if ns.scheduling_timeout < 0:
        raise ServeError(f"--scheduling-timeout: {ns.scheduling_timeout:g}s is negative (0s turns the monitor off)")
    if ns.scheduler_monitor_period <= 0:
        raise ServeError(f"--scheduler-monitor-period: {ns.scheduler_monitor_period:g}s must be more than 0s")
    return MonitorOptions(timeout=ns.scheduling_timeout, period=ns.scheduler_monitor_period)


DEFAULT_QPS, DEFAULT_BURST = 50.0, 100
PROTOBUF = "application/vnd.kubernetes.protobuf"
"""``clientConnection.contentType``'s default, as kube-scheduler's."""
"""``clientConnection``'s defaults (the configuration's own, repeated for :func:`_stated_client`)."""


def _stated_client(ns: argparse.Namespace) -> tuple[str, float, int, bool] | None:
    """The kubeconfig and client limits as the flags and a plain KubeSchedulerConfiguration file state
    them, read without validating the file (so listing can start while it is validated); None where
    that is not simple to tell (a ConfigMap, anything unreadable). The caller compares the result with
    the validated options and starts over on any difference."""
    client: object = {}
    if ns.config:
        import yaml

        try:
            with open(ns.config, encoding="utf-8") as stream:
                document = yaml.safe_load(stream)
        except (OSError, ValueError, yaml.YAMLError):
            return None
        if not isinstance(document, dict) or document.get("kind") != "KubeSchedulerConfiguration":
            return None
        client = document.get("clientConnection") or {}
    if not isinstance(client, dict):
        return None
    kubeconfig = ns.kubeconfig or client.get("kubeconfig") or ""
    qps, burst = client.get("qps", DEFAULT_QPS), client.get("burst", DEFAULT_BURST)
    accept, content_type = client.get("acceptContentTypes", ""), client.get("contentType", PROTOBUF)
    if not isinstance(kubeconfig, str) or not isinstance(qps, int | float) or not isinstance(burst, int):
        return None
    if not isinstance(accept, str) or not isinstance(content_type, str):
        return None
    from kubeapi.protowire import wants_protobuf

    return kubeconfig, float(qps), burst, wants_protobuf(accept, content_type)


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
    for name in ("koord-scheduler", "kubeapi", "kubeapi.leaderelection"):
        logging.getLogger(name).setLevel(lifecycle)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    from koord_scheduler.app import logs  # loaded on use: --help and refused flags need none of it

    logs.install(verbosity)
