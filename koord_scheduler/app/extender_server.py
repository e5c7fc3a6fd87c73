"""``koord-scheduler extender-server``: pykoord's plugins as an HTTP extender of a stock kube-scheduler.

::

    koord-scheduler extender-server --config FILE [--kubeconfig FILE] [--profile NAME]
                                    [--bind-address ADDR] [--port PORT] [-v N]

The profile (by ``schedulerName``; the first one by default) says which plugins answer. The server keeps
its own informers and scheduler cache (the same cluster source and cache as ``koord-scheduler``) and
never schedules: it answers ``POST /filter``, ``/prioritize``, ``/preempt`` and ``/bind`` in kube-scheduler's extender
protocol, and ``GET /healthz`` (ok once the informers have synced). Point kube-scheduler at it with::

    extenders:
    - urlPrefix: http://koord-extender:10262
      filterVerb: filter
      prioritizeVerb: prioritize
      preemptVerb: preempt
      weight: 1
      nodeCacheCapable: true

Filter and prioritize run on the event loop (plugin work is synchronous CPU work over the cache, as in
the scheduling cycle); bind awaits the API server. Pending pods whose schedulerName is the served profile's
sit in the (never popped) queue; give the profile a name of its own to keep that empty.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
from aiohttp import web

from apis.config import KubeSchedulerConfiguration, load_scheduler_config
from koord_scheduler.framework.errors import PluginCycleError, SchedulerError
from koord_scheduler.framework.registry import Registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.extenders import Extenders
from koord_scheduler.scheduler.extenders.service import ExtenderService, RequestError, binding_pod
from koord_scheduler.scheduler.kube import KubeClusterSource, KubeSourceOptions, load_connection
from koord_scheduler.scheduler.scheduler import Scheduler, SchedulerOptions
from koord_scheduler.scheduler.source import ClusterSource

log = logging.getLogger("koord-scheduler")

DEFAULT_EXTENDER_PORT = 10262
Handler = Callable[[web.Request], Awaitable[web.Response]]


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


def make_app(service: ExtenderService, source: ClusterSource, *, synced: Callable[[], bool]) -> web.Application:
    """The HTTP routes; each verb answers 200 with the protocol's JSON (errors in its ``Error`` field)."""

    def json_response(value: Any) -> web.Response:
        return web.Response(body=orjson.dumps(value), content_type="application/json")

    async def read(request: web.Request) -> Any:
        try:
            return orjson.loads(await request.read())
        except orjson.JSONDecodeError as exc:
            raise web.HTTPBadRequest(text=f"request body is not JSON: {exc}") from exc

    async def filter_handler(request: web.Request) -> web.Response:
        body = await read(request)
        if not isinstance(body, dict):
            return json_response({"Error": "bad ExtenderArgs: expected a JSON object"})
        return json_response(service.filter(body))

    async def prioritize_handler(request: web.Request) -> web.Response:
        body = await read(request)
        if not isinstance(body, dict):
            return json_response({"Error": "bad ExtenderArgs: expected a JSON object"})
        return json_response(service.prioritize(body))

    async def preempt_handler(request: web.Request) -> web.Response:
        body = await read(request)
        try:
            return json_response(service.preempt(body if isinstance(body, dict) else {}))
        except RequestError as exc:
            raise web.HTTPBadRequest(text=f"bad ExtenderPreemptionArgs: {exc}") from exc
        except PluginCycleError as exc:
            raise web.HTTPInternalServerError(text=exc.status.message) from exc

    async def bind_handler(request: web.Request) -> web.Response:
        body = await read(request)
        try:
            pod, node = binding_pod(body if isinstance(body, dict) else {})
            await source.client.bind(pod, node)
        except RequestError as exc:
            return json_response({"Error": f"bad ExtenderBindingArgs: {exc}"})
        except Exception as exc:  # the API server's refusal goes back to kube-scheduler as the bind error
            return json_response({"Error": f"binding {body.get('PodNamespace')}/{body.get('PodName')}: {exc}"})
        return json_response({"Error": ""})

    async def healthz(_: web.Request) -> web.Response:
        ok = synced()
        return web.Response(status=200 if ok else 503, text="ok" if ok else "informers not synced")

    app = web.Application()
    app.router.add_post("/filter", _timed("filter", filter_handler))
    app.router.add_post("/prioritize", _timed("prioritize", prioritize_handler))
    app.router.add_post("/preempt", _timed("preempt", preempt_handler))
    app.router.add_post("/bind", _timed("bind", bind_handler))
    app.router.add_get("/healthz", healthz)
    return app


def _timed(verb: str, handler: Handler) -> Handler:
    async def wrapped(request: web.Request) -> web.Response:
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            log.debug("extender %s answered in %.1f ms", verb, (time.perf_counter() - started) * 1e3)

    return wrapped


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="koord-scheduler extender-server",
        description="Serve a KubeSchedulerConfiguration profile's plugins over kube-scheduler's extender protocol.",
    )
    parser.add_argument("--config", required=True, help="KubeSchedulerConfiguration: its profile names the plugins")
    parser.add_argument("--kubeconfig", default="", help="overrides clientConnection.kubeconfig")
    parser.add_argument("--profile", default="", help="schedulerName of the profile to serve (default: the first)")
    parser.add_argument("--bind-address", default="0.0.0.0", help="where to listen (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=DEFAULT_EXTENDER_PORT, help="default %(default)s")
    parser.add_argument("-v", "--v", type=int, default=0, help="log verbosity")
    return parser


def extender_server_main(argv: Sequence[str], registry: Callable[[], Registry]) -> int:
    """Run until SIGTERM / SIGINT; the exit code."""
    ns = _parser().parse_args(list(argv))
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
        ),
    )
    scheduler = build_extender_scheduler(config, registry(), source)
    if ns.profile and ns.profile not in scheduler.profiles:
        raise SchedulerError(f"--profile: no profile with schedulerName {ns.profile!r} in the configuration")
    return asyncio.run(_serve(scheduler, source, ns.profile, ns.bind_address, ns.port))


async def _serve(scheduler: Scheduler, source: KubeClusterSource, profile: str, address: str, port: int) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner: web.AppRunner | None = None
    try:
        await source.start(scheduler, list(scheduler.watched_kinds.values()))
        service = service_for(scheduler, profile)
        runner = web.AppRunner(make_app(service, source, synced=lambda: source.synced), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, address, port).start()
        log.info("extender server: profile %s, plugins on http://%s:%d/{filter,prioritize,preempt,bind}",
                 service.fwk.profile_name, address, port)
        await stop.wait()
        return 0
    finally:
        if runner is not None:
            await runner.cleanup()
        await source.stop()
