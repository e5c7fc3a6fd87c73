"""The admission HTTPS server: ``POST /mutate-pod``, ``POST /validate-pod``,
``POST /validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``,
``POST /mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` and ``GET /healthz``.

Runs on every replica (no leader election: the API server may call any of them), in a thread of its own
with its own event loop (:mod:`.thread`), so admission work never delays a scheduling cycle.
``/validate-pod`` applies Koordinator's pod rules when given a :class:`~.pod_validation.PodValidator`
(``routes``) and allows every pod review it serves otherwise; the ElasticQuota paths check and default
quotas (:mod:`.quota`).

Every request is bounded and contained (:mod:`kubeapi.serving_limits`): a body over 3 MiB gets
``413`` (a declared length before any byte is read), a body that does not arrive in time ``408``, a slow
request head closes the connection. Then, per request, whatever goes wrong becomes an answer, never an
HTTP 500 and never a traceback:

- a body that is not JSON, or not an AdmissionReview with a usable ``request.uid``: HTTP ``400`` (the
  webhook configuration's ``failurePolicy`` then decides: ``Ignore`` admits the object, ``Fail`` refuses it);
- a review with a UID that this path does not serve, or that cannot be read (see
  :func:`~.review.parse_review`): an AdmissionReview with ``allowed: false`` and the reason, so it fails
  closed whatever the ``failurePolicy``;
- any exception while answering (``RecursionError`` on deep input, ``MemoryError``, ``OverflowError``, a
  bug): ``allowed: false`` naming the exception type when the UID is known, ``400`` otherwise.

Each refusal counts in ``koord_webhook_requests_refused_total{path,reason}`` and is logged in one line
(repeats of one path and reason are folded into one line every :data:`REFUSAL_LOG_SECONDS`).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from koord_scheduler.webhook.admission import PodMutator, validate_pod
from koord_scheduler.webhook.quota import VALIDATE_QUOTA_PATH, QuotaValidator
from koord_scheduler.webhook.review import BadReviewError, deny, review_uid
from kubeapi import jsoncodec
from kubeapi.serving import (
    Application,
    HardenedServer,
    Middleware,
    Request,
    Response,
    Route,
    new_app,
    read_body,
    token_middleware,
)
from kubeapi.serving_limits import BodyTimeoutError, BodyTooLargeError, ClientAuth, FoldedLog, ServingLimits, TokenFile

log = logging.getLogger(__name__)

MUTATE_POD_PATH = "/mutate-pod"
VALIDATE_POD_PATH = "/validate-pod"
REFUSAL_LOG_SECONDS = 10.0

Json = dict[str, Any]
Answer = Callable[[Any], Awaitable[Json]]


class AdmissionServerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.refused = Counter(
            "koord_webhook_requests_refused_total",
            "Admission requests refused by the server: over the size limit, too slow, not a review it serves, or "
            "failing while answered (reason).",
            ["path", "reason"],
            registry=registry,
        )


def webhook_app(
    mutator: PodMutator,
    quotas: QuotaValidator | None = None,
    *,
    limits: ServingLimits | None = None,
    metrics: AdmissionServerMetrics | None = None,
    auth: ClientAuth | None = None,
    routes: Mapping[str, Answer] | None = None,
) -> Application:
    """The routes; without ``quotas`` the ElasticQuota validating path is not served (404). ``routes`` adds
    paths or replaces the default answer of one (``/validate-pod`` allows every pod without it). With
    ``auth.token_file`` every path but ``/healthz`` requires the bearer token."""
    limits = limits or ServingLimits()
    metrics = metrics or AdmissionServerMetrics(CollectorRegistry())
    refusals = FoldedLog(log, interval=REFUSAL_LOG_SECONDS)

    def route(path: str, respond: Answer) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            return await _serve_review(request, path, respond, limits=limits, metrics=metrics, refusals=refusals)

        return handler

    async def validate(body: Any) -> Json:
        return validate_pod(body)

    async def healthz(_: Request) -> Response:
        return Response(text="ok")

    middlewares: list[Middleware] = []
    if auth is not None and auth.token_file:
        middlewares.append(token_middleware(TokenFile(auth.token_file), exempt=frozenset({"/healthz"})))
    answers: dict[str, Answer] = {MUTATE_POD_PATH: mutator.review, VALIDATE_POD_PATH: validate}
    if quotas is not None:
        answers[VALIDATE_QUOTA_PATH] = quotas.review
    answers.update(routes or {})
    served: list[Route] = [("POST", path, route(path, respond)) for path, respond in answers.items()]
    served.append(("GET", "/healthz", healthz))
    return new_app(served, max_body_bytes=limits.max_body_bytes, middlewares=middlewares)


async def _serve_review(
    request: Request,
    path: str,
    respond: Answer,
    *,
    limits: ServingLimits,
    metrics: AdmissionServerMetrics,
    refusals: FoldedLog,
) -> Response:
    def refuse(reason: str, message: str, status: int) -> Response:
        metrics.refused.labels(path, reason).inc()
        refusals.warning(f"{path} {reason}", f"admission {path} refused ({reason}): {message}")
        response = Response(status=status, text=f"{message}\n")
        if status in (408, 413):
            # The body was not read (or not all of it): close rather than wait for the rest.
            response.force_close()
        return response

    try:
        raw = await read_body(request, limits)
    except BodyTooLargeError as exc:
        return refuse("TooLarge", str(exc), 413)
    except BodyTimeoutError as exc:
        return refuse("Timeout", str(exc), 408)
    body: Any = None
    try:
        body = jsoncodec.loads(raw)
        return _json(await respond(body))
    except BadReviewError as exc:
        if not exc.uid:
            return refuse("NotAdmissionReview", f"not an AdmissionReview this path serves: {exc}", 400)
        metrics.refused.labels(path, "Denied").inc()
        refusals.warning(f"{path} Denied", f"admission {path} refused (Denied): request {exc.uid}: {exc}")
        return _json(deny(exc.uid, str(exc)))
    except Exception as exc:  # every failure of one request stays in that request
        what = f"{type(exc).__name__}: {str(exc)[:200]}" if str(exc) else type(exc).__name__
        if body is None:
            return refuse("NotJSON", f"the body is not JSON ({what})", 400)
        uid = review_uid(body)
        if not uid:
            return refuse("InternalError", f"the request could not be answered ({what})", 400)
        metrics.refused.labels(path, "InternalError").inc()
        refusals.warning(f"{path} InternalError", f"admission {path} refused (InternalError): request {uid}: {what}")
        return _json(
            deny(uid, f"the webhook could not process this request ({type(exc).__name__})", reason="InternalError")
        )


def _json(answer: Json) -> Response:
    return Response(body=jsoncodec.dumps(answer), content_type="application/json")


@dataclass(frozen=True, slots=True)
class AdmissionServing:
    """Where and how the admission server listens."""

    address: str
    port: int
    limits: ServingLimits = field(default_factory=ServingLimits)
    auth: ClientAuth = field(default_factory=ClientAuth)
    """``client_ca_file`` goes into the TLS context (see :func:`~.certs.server_ssl_context`);
    ``token_file`` is checked per request."""


class WebhookServer:
    """The app behind TLS (``ssl_context``) as ``serving`` says; :meth:`start`, then :meth:`stop`."""

    def __init__(
        self,
        mutator: PodMutator,
        ssl_context: ssl.SSLContext,
        *,
        serving: AdmissionServing,
        routes: Mapping[str, Answer] | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """``routes``: the paths served beside ``/mutate-pod`` (see :func:`webhook_app`)."""
        self.mutator = mutator
        self.routes = dict(routes or {})
        self.metrics = AdmissionServerMetrics(registry if registry is not None else CollectorRegistry())
        app = webhook_app(mutator, limits=serving.limits, metrics=self.metrics, auth=serving.auth, routes=routes)
        self.server = HardenedServer(
            app, address=serving.address, port=serving.port, ssl_context=ssl_context, limits=serving.limits
        )

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        await self.server.start()
        paths = sorted({MUTATE_POD_PATH, VALIDATE_POD_PATH, *self.routes})
        log.info("serving %s on https://%s:%d", ", ".join(paths), self.server.address, self.server.port)

    async def stop(self) -> None:
        await self.server.stop()
