"""``koord-scheduler extender-server``: pykoord's plugins as an HTTP extender of a stock kube-scheduler.

::

    koord-scheduler extender-server --config FILE [--kubeconfig FILE] [--profile NAME]
                                    [--scheduler-names NAME,...] [--bind-address ADDR] [--port PORT]
                                    [--tls-cert-file FILE --tls-private-key-file FILE]
                                    [--client-ca-file FILE] [--token-file FILE] [-v N]

The profile (by ``schedulerName``; the first one by default) says which plugins answer;
``--scheduler-names`` (default ``default-scheduler``) says whose pods: the schedulerNames of the
kube-scheduler profiles that call this extender. Pods of any other scheduler get no opinion from filter,
prioritize and preempt, and are never bound (:mod:`.extender_http`). The server keeps its own informers and
scheduler cache (the same cluster source and cache as ``koord-scheduler``) and never schedules: it answers
``POST /filter``, ``/prioritize``, ``/preempt`` and ``/bind`` in kube-scheduler's extender protocol, and
``GET /healthz`` (ok once the informers have synced).

It listens on loopback unless ``--bind-address`` says otherwise (kube-scheduler on the same host or in the
same pod). Over the network, serve TLS (``--tls-cert-file``/``--tls-private-key-file``) and require
kube-scheduler's client certificate (``--client-ca-file``): kube-scheduler's extender client
(``pkg/scheduler/extender.go``, ``makeTransport``) sends one from ``tlsConfig.certFile``/``keyFile``, and no
other credential. ``--token-file`` (a bearer token) is for other callers, such as a proxy in front.
Point kube-scheduler at it with::

    extenders:
    - urlPrefix: https://koord-extender:10262
      filterVerb: filter
      prioritizeVerb: prioritize
      preemptVerb: preempt
      weight: 1
      nodeCacheCapable: true
      enableHTTPS: true
      tlsConfig: {caFile: /etc/extender/ca.crt, certFile: /etc/extender/client.crt, keyFile: /etc/extender/client.key}

Filter and prioritize run on the event loop (plugin work is synchronous CPU work over the cache, as in
the scheduling cycle); bind awaits the API server. Pending pods whose schedulerName is the served profile's
sit in the (never popped) queue; give the profile a name of its own to keep that empty.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import signal
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from apis.config import KubeSchedulerConfiguration, load_scheduler_config
from apis.core.parse import parse_pod
from apis.core.types import Pod
from koord_scheduler.app.extender_http import DEFAULT_SCHEDULER_NAMES, EXTENDER_BODY_LIMIT, ExtenderServing, make_app
from koord_scheduler.extenders import Extenders
from koord_scheduler.extenders.service import ExtenderService
from koord_scheduler.framework.errors import SchedulerError
from koord_scheduler.framework.registry import Registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.kube_source import KubeClusterSource, KubeSourceOptions
from koord_scheduler.scheduler.scheduler import Scheduler, SchedulerOptions
from koord_scheduler.scheduler.source import ClusterSource
from kubeapi import ApiError, load_connection
from kubeapi.paths import resource_path
from kubeapi.protowire import wants_protobuf
from kubeapi.reflector import ReflectorOptions
from kubeapi.serving import HardenedServer
from kubeapi.serving_limits import ClientAuth, ServingLimits, TokenFile, server_ssl_context

log = logging.getLogger("koord-scheduler")

DEFAULT_EXTENDER_PORT = 10262
LOOPBACK = "127.0.0.1"

__all__ = ["build_extender_scheduler", "extender_server_main", "kube_pod_getter", "make_app", "service_for"]


def build_extender_scheduler(
    config: KubeSchedulerConfiguration, registry: Registry, source: ClusterSource
) -> Scheduler:
    """The scheduler whose cache and plugin watches the server reads (its own ``extenders`` dropped: an
    extender server does not call extenders). Its loop never runs."""
    config = config.model_copy(update={"extenders": ()})
    return build_scheduler(config, registry, source, options=SchedulerOptions(extenders=Extenders([])))


def service_for(scheduler: Scheduler, profile: str = "") -> ExtenderService:
    """The service of ``profile`` (a schedulerName; "" for the first profile)."""
    if profile and profile not in scheduler.profiles:
        raise SchedulerError(f"--profile: no profile with schedulerName {profile!r} in the configuration")
    fwk = scheduler.profiles[profile] if profile else next(iter(scheduler.profiles.values()))
    scheduler.warm_up()
    return ExtenderService(fwk, scheduler.cache.snapshot)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="koord-scheduler extender-server",
        description="Serve a KubeSchedulerConfiguration profile's plugins over kube-scheduler's extender protocol.",
    )
    parser.add_argument("--config", required=True, help="KubeSchedulerConfiguration: its profile names the plugins")
    parser.add_argument("--kubeconfig", default="", help="overrides clientConnection.kubeconfig")
    parser.add_argument("--profile", default="", help="schedulerName of the profile to serve (default: the first)")
    parser.add_argument(
        "--scheduler-names",
        default=",".join(sorted(DEFAULT_SCHEDULER_NAMES)),
        metavar="N1,N2",
        help="schedulerNames of the pods this extender acts on: the kube-scheduler profiles that "
        "call it (default %(default)s)",
    )
    parser.add_argument("--bind-address", default=LOOPBACK, help="where to listen (default %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_EXTENDER_PORT, help="default %(default)s")
    parser.add_argument("--tls-cert-file", default="", metavar="FILE", help="serve HTTPS with this certificate")
    parser.add_argument("--tls-private-key-file", default="", metavar="FILE", help="the certificate's key")
    parser.add_argument(
        "--client-ca-file",
        default="",
        metavar="FILE",
        help="require a client certificate signed by this CA (needs TLS)",
    )
    parser.add_argument(
        "--token-file", default="", metavar="FILE", help="require 'Authorization: Bearer <the file's content>'"
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=EXTENDER_BODY_LIMIT,
        metavar="N",
        help="largest request accepted (default %(default)s)",
    )
    parser.add_argument("-v", "--v", type=int, default=0, help="log verbosity")
    return parser


@dataclass(frozen=True, slots=True)
class Listen:
    address: str
    port: int
    ssl_context: ssl.SSLContext | None


def _serving(ns: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[ExtenderServing, Listen]:
    """What the flags say; a bad combination or an unusable file ends the command with a usage error."""
    names = frozenset(n.strip() for n in ns.scheduler_names.split(",") if n.strip())
    if not names:
        parser.error("--scheduler-names: give at least one schedulerName")
    if bool(ns.tls_cert_file) != bool(ns.tls_private_key_file):
        parser.error("--tls-cert-file and --tls-private-key-file go together")
    if ns.client_ca_file and not ns.tls_cert_file:
        parser.error("--client-ca-file needs TLS (--tls-cert-file and --tls-private-key-file)")
    if ns.max_body_bytes < 1024:
        parser.error("--max-body-bytes: at least 1024")
    context = None
    try:
        if ns.tls_cert_file:
            context = server_ssl_context(ns.tls_cert_file, ns.tls_private_key_file, client_ca_file=ns.client_ca_file)
        if ns.token_file:
            TokenFile(ns.token_file)
    except (OSError, ssl.SSLError) as exc:
        parser.error(f"TLS or token files: {exc}")
    auth = ClientAuth(ns.client_ca_file, ns.token_file)
    serving = ExtenderServing(names, ServingLimits(max_body_bytes=ns.max_body_bytes), auth)
    return serving, Listen(ns.bind_address, ns.port, context)


def kube_pod_getter(source: KubeClusterSource) -> Callable[[str, str], Awaitable[Pod | None]]:
    """``get_pod`` for :func:`make_app`: one GET through the source's client (names already checked)."""

    async def get_pod(namespace: str, name: str) -> Pod | None:
        try:
            raw = await source.http.request_json("GET", resource_path("", "v1", "pods", namespace=namespace, name=name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return parse_pod(raw)

    return get_pod


def extender_server_main(argv: Sequence[str], registry: Callable[[], Registry]) -> int:
    """Run until SIGTERM / SIGINT; the exit code."""
    parser = _parser()
    ns = parser.parse_args(list(argv))
    serving, listen = _serving(ns, parser)
    level = logging.DEBUG if ns.v >= 4 else logging.INFO if ns.v >= 2 else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("koord-scheduler").setLevel(logging.INFO)
    config = load_scheduler_config(ns.config)
    connection = load_connection(ns.kubeconfig or config.client_connection.kubeconfig)
    source = KubeClusterSource(
        connection,
        options=KubeSourceOptions(
            qps=config.client_connection.qps,
            burst=config.client_connection.burst,
            scheduler_names=tuple(p.scheduler_name for p in config.profiles),
            reflector=ReflectorOptions(
                protobuf=wants_protobuf(
                    config.client_connection.accept_content_types, config.client_connection.content_type
                )
            ),
        ),
    )
    scheduler = build_extender_scheduler(config, registry(), source)
    if ns.profile and ns.profile not in scheduler.profiles:
        raise SchedulerError(f"--profile: no profile with schedulerName {ns.profile!r} in the configuration")
    return asyncio.run(_serve(scheduler, source, ns.profile, serving, listen))


async def _serve(
    scheduler: Scheduler, source: KubeClusterSource, profile: str, serving: ExtenderServing, listen: Listen
) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server: HardenedServer | None = None
    try:
        await source.start(scheduler, list(scheduler.watched_kinds.values()))
        service = service_for(scheduler, profile)
        app = make_app(service, source, synced=lambda: source.synced, get_pod=kube_pod_getter(source), serving=serving)
        server = HardenedServer(
            app, address=listen.address, port=listen.port, ssl_context=listen.ssl_context, limits=serving.limits
        )
        await server.start()
        scheme = "https" if listen.ssl_context is not None else "http"
        log.info(
            "extender server: profile %s for pods of %s, plugins on %s://%s:%d/{filter,prioritize,preempt,bind}",
            service.fwk.profile_name,
            ", ".join(sorted(serving.scheduler_names)),
            scheme,
            listen.address,
            server.port,
        )
        if not _loopback(listen.address) and not serving.auth.enabled:
            log.warning(
                "extender server: listening on %s without client authentication: anyone who reaches the "
                "port can ask it to bind pods of %s (use --client-ca-file or --token-file)",
                listen.address,
                ", ".join(sorted(serving.scheduler_names)),
            )
        await stop.wait()
        return 0
    finally:
        if server is not None:
            await server.stop()
        await source.stop()


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"
