"""``extender-server``'s HTTP side: the routes, what each verb acts on, and its limits.

Which pods: only those whose ``spec.schedulerName`` is one of :attr:`ExtenderServing.scheduler_names` (the
kube-scheduler profiles that call this extender; ``--scheduler-names``). For any other pod ``/filter``
passes every node sent, ``/prioritize`` scores every node 0 and ``/preempt`` returns the candidates as
sent: the extender has no opinion on pods it does not serve. ``/bind`` refuses them.

``/bind`` changes the cluster, so before anything is asked of the API server the request's ``PodNamespace``
must be a DNS-1123 label, ``PodName`` and ``Node`` DNS-1123 subdomains and ``PodUID`` a plain UID; then
the pod is read (one GET) and bound only if it exists with that UID, is not bound yet and has a served
``schedulerName``. Every refusal is an ``Error`` naming the field or the reason.

Limits and authentication come from :mod:`kubeapi.serving_limits` (body size, header and body
time-outs, connection count; optional client certificate and bearer token). Every failure of one request
is answered (an ``Error``, or 4xx for ``/preempt`` whose result has no error field), never an HTTP 500 for
bad input and never a traceback.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from apis.core.paths import InvalidNameError, check_name, check_namespace, shown
from apis.core.types import ObjectMeta, Pod
from koord_scheduler.extenders.service import (
    ExtenderService,
    RequestError,
    binding_pod,
    request_node_names,
    request_pod,
    request_victims,
)
from koord_scheduler.framework.errors import PluginCycleError
from koord_scheduler.scheduler.source import ClusterSource
from kubeapi.serving import (
    Application,
    HTTPBadRequest,
    HTTPException,
    HTTPInternalServerError,
    HTTPRequestEntityTooLarge,
    HTTPRequestTimeout,
    Middleware,
    NextHandler,
    Request,
    Response,
    StreamResponse,
    middleware,
    new_app,
    read_body,
    token_middleware,
)
from kubeapi.serving_limits import BodyTimeoutError, BodyTooLargeError, ClientAuth, ServingLimits, TokenFile

log = logging.getLogger("koord-scheduler")

DEFAULT_SCHEDULER_NAMES = frozenset({"default-scheduler"})
EXTENDER_BODY_LIMIT = 64 * 1024 * 1024
"""ExtenderArgs carry whole Nodes unless ``nodeCacheCapable`` (then only names): thousands of nodes of a few
kilobytes each. Far above that is not a scheduler's request."""
_UID = re.compile(r"[\x21-\x7e]{1,128}")

Handler = Callable[[Request], Awaitable[Response]]
PodGetter = Callable[[str, str], Awaitable[Pod | None]]
"""``get_pod(namespace, name)``: the pod as the API server has it now, None when it does not exist."""


@dataclass(frozen=True, slots=True)
class ExtenderServing:
    """Whose pods the server acts on, and how it listens."""

    scheduler_names: frozenset[str] = DEFAULT_SCHEDULER_NAMES
    limits: ServingLimits = field(default_factory=lambda: ServingLimits(max_body_bytes=EXTENDER_BODY_LIMIT))
    auth: ClientAuth = field(default_factory=ClientAuth)


@dataclass(slots=True)
class _Once:
    """Log a line once per key (pods of another scheduler keep coming)."""

    seen: set[str] = field(default_factory=set)

    def info(self, key: str, message: str, *args: Any) -> None:
        if key not in self.seen and len(self.seen) < 1000:
            self.seen.add(key)
            log.info(message, *args)


def make_app(
    service: ExtenderService,
    source: ClusterSource,
    *,
    synced: Callable[[], bool],
    get_pod: PodGetter,
    serving: ExtenderServing | None = None,
) -> Application:
    """The HTTP routes; each verb answers 200 with the protocol's JSON (errors in its ``Error`` field),
    ``/preempt`` 400 for a request it cannot use."""
    serving = serving or ExtenderServing()
    served = serving.scheduler_names
    others = _Once()

    def json_response(value: Any) -> Response:
        return Response(body=orjson.dumps(value), content_type="application/json")

    async def read(request: Request) -> dict[str, Any]:
        try:
            body = orjson.loads(await read_body(request, serving.limits))
        except BodyTooLargeError as exc:
            raise HTTPRequestEntityTooLarge(
                max_size=serving.limits.max_body_bytes, actual_size=request.content_length or 0, text=str(exc)
            ) from None
        except BodyTimeoutError as exc:
            raise HTTPRequestTimeout(text=str(exc)) from None
        except orjson.JSONDecodeError as exc:
            raise HTTPBadRequest(text=f"request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise HTTPBadRequest(text="request body is not a JSON object")
        return body

    def not_served(body: Mapping[str, Any]) -> bool:
        """The request's pod belongs to a scheduler this extender does not serve (a malformed pod is left to
        the verb, which reports it)."""
        try:
            pod = request_pod(body)
        except RequestError:
            return False
        if pod.scheduler_name in served:
            return False
        others.info(
            pod.scheduler_name,
            "extender: pods with schedulerName %s are not served (--scheduler-names %s): answered without an opinion",
            shown(pod.scheduler_name),
            ",".join(sorted(served)),
        )
        return True

    async def filter_handler(request: Request) -> Response:
        body = await read(request)
        if not_served(body):
            try:
                names, items = request_node_names(body)
            except RequestError as exc:
                return json_response({"Error": f"bad ExtenderArgs: {exc}"})
            result: dict[str, Any] = {
                "NodeNames": names,
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": {},
                "Error": "",
            }
            if items is not None:
                result["Nodes"] = {"items": items}
            return json_response(result)
        return json_response(service.filter(body))

    async def prioritize_handler(request: Request) -> Response:
        body = await read(request)
        if not_served(body):
            try:
                names, _ = request_node_names(body)
            except RequestError as exc:
                return json_response({"Error": f"bad ExtenderArgs: {exc}"})
            return json_response([{"Host": n, "Score": 0} for n in names])
        return json_response(service.prioritize(body))

    async def preempt_handler(request: Request) -> Response:
        body = await read(request)
        try:
            if not_served(body):
                return json_response({"NodeNameToMetaVictims": _victims_as_sent(body)})
            return json_response(service.preempt(body))
        except RequestError as exc:
            raise HTTPBadRequest(text=f"bad ExtenderPreemptionArgs: {exc}") from exc
        except PluginCycleError as exc:
            raise HTTPInternalServerError(text=exc.status.message) from exc

    async def bind_handler(request: Request) -> Response:
        body = await read(request)
        try:
            wanted, node = checked_binding(body)
        except RequestError as exc:
            return json_response({"Error": f"bad ExtenderBindingArgs: {exc}"})
        what = f"pod {wanted.namespace}/{wanted.name}"
        try:
            current = await get_pod(wanted.namespace, wanted.name)
        except Exception as exc:  # the API server's answer goes back to kube-scheduler as the bind error
            return json_response({"Error": f"binding {what}: cannot read it: {exc}"})
        refusal = bind_refusal(wanted, current, served)
        if refusal:
            log.warning("extender: refused to bind %s to %s: %s", what, node, refusal)
            return json_response({"Error": f"binding {what}: {refusal}"})
        assert current is not None
        try:
            await source.client.bind(
                Pod(meta=ObjectMeta(name=wanted.name, namespace=wanted.namespace, uid=current.uid)), node
            )
        except Exception as exc:  # the API server's refusal goes back to kube-scheduler as the bind error
            return json_response({"Error": f"binding {what}: {exc}"})
        return json_response({"Error": ""})

    async def healthz(_: Request) -> Response:
        ok = synced()
        return Response(status=200 if ok else 503, text="ok" if ok else "informers not synced")

    middlewares: list[Middleware] = [_contained]
    if serving.auth.token_file:
        middlewares.insert(0, token_middleware(TokenFile(serving.auth.token_file), exempt=frozenset({"/healthz"})))
    routes = [
        ("POST", "/filter", _timed("filter", filter_handler)),
        ("POST", "/prioritize", _timed("prioritize", prioritize_handler)),
        ("POST", "/preempt", _timed("preempt", preempt_handler)),
        ("POST", "/bind", _timed("bind", bind_handler)),
        ("GET", "/healthz", healthz),
    ]
    return new_app(routes, max_body_bytes=serving.limits.max_body_bytes, middlewares=middlewares)


def checked_binding(body: Mapping[str, Any]) -> tuple[ObjectMeta, str]:
    """The ``ExtenderBindingArgs`` with every name checked as a Kubernetes name (the pod's UID in
    ``meta.uid``, possibly empty). Raises :class:`RequestError` naming the field."""
    pod, node = binding_pod(body)
    try:
        check_namespace(pod.namespace, what="PodNamespace")
        check_name(pod.name, what="PodName")
        check_name(node, what="Node")
    except InvalidNameError as exc:
        raise RequestError(str(exc)) from None
    if pod.uid and not _UID.fullmatch(pod.uid):
        raise RequestError(f"PodUID {shown(pod.uid)} is not a UID")
    return pod.meta, node


def bind_refusal(wanted: ObjectMeta, current: Pod | None, served: frozenset[str]) -> str:
    """Why the pod must not be bound (``""``: bind it)."""
    if current is None:
        return "no such pod"
    if wanted.uid and current.uid != wanted.uid:
        return f"its UID is {current.uid}, not {wanted.uid} (deleted and created again?)"
    if current.scheduler_name not in served:
        return (
            f"its schedulerName is {shown(current.scheduler_name)}; this extender binds only pods of "
            f"{', '.join(sorted(served))} (--scheduler-names)"
        )
    if current.node_name:
        return f"it is already bound to {current.node_name}"
    return ""


def _victims_as_sent(body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        node: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": violations}
        for node, (uids, violations) in request_victims(body).items()
    }


@middleware
async def _contained(request: Request, handler: NextHandler) -> StreamResponse:
    """Every failure of one request is answered in that request: the HTTP errors the handlers raise as they
    are; a malformed request the protocol helpers refused as 400; anything else as 400 naming the
    exception type (with one log line), never a 500 with a traceback."""
    try:
        return await handler(request)
    except HTTPException:
        raise
    except RequestError as exc:
        return Response(status=400, text=f"bad request: {exc}")
    except Exception as exc:
        log.warning(
            "extender %s: the request could not be answered: %s: %s", request.path, type(exc).__name__, str(exc)[:200]
        )
        return Response(status=400, text=f"the request could not be answered ({type(exc).__name__})")


def _timed(verb: str, handler: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            log.debug("extender %s answered in %.1f ms", verb, (time.perf_counter() - started) * 1e3)

    return wrapped
