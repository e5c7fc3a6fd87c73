"""The admission HTTPS server: ``POST /mutate-pod``, ``POST /validate-pod``,
``POST /validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` and ``GET /healthz``.

Runs on every replica (no leader election: the API server may call any of them). ``/validate-pod``
allows every request; the ElasticQuota path refuses invalid quota trees (:mod:`.quota`).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from koord_scheduler.scheduler.kube import jsoncodec
from koord_scheduler.webhook.admission import BadReviewError, PodMutator, allow
from koord_scheduler.webhook.quota import VALIDATE_QUOTA_PATH, QuotaValidator

log = logging.getLogger(__name__)

MUTATE_POD_PATH = "/mutate-pod"
VALIDATE_POD_PATH = "/validate-pod"
MAX_REVIEW_BYTES = 8 * 1024 * 1024
"""An AdmissionReview carries the object (and on updates the old one); etcd allows 1.5 MiB objects."""


def webhook_app(mutator: PodMutator, quotas: QuotaValidator | None = None) -> web.Application:
    """The routes; without ``quotas`` the ElasticQuota path is not served (404)."""

    async def mutate(request: web.Request) -> web.Response:
        try:
            body = jsoncodec.loads(await request.read())
            answer = await mutator.review(body)
        except (ValueError, BadReviewError) as exc:
            return web.Response(status=400, text=f"not an AdmissionReview: {exc}")
        return _json(answer)

    async def validate(request: web.Request) -> web.Response:
        try:
            answer = allow(jsoncodec.loads(await request.read()))
        except (ValueError, BadReviewError) as exc:
            return web.Response(status=400, text=f"not an AdmissionReview: {exc}")
        return _json(answer)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=MAX_REVIEW_BYTES)
    app.router.add_post(MUTATE_POD_PATH, mutate)
    app.router.add_post(VALIDATE_POD_PATH, validate)
    if quotas is not None:
        app.router.add_post(VALIDATE_QUOTA_PATH, _quota_handler(quotas))
    app.router.add_get("/healthz", healthz)
    return app


def _quota_handler(quotas: QuotaValidator) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def validate_quota(request: web.Request) -> web.Response:
        try:
            answer = await quotas.review(jsoncodec.loads(await request.read()))
        except (ValueError, BadReviewError) as exc:
            return web.Response(status=400, text=f"not an AdmissionReview: {exc}")
        return _json(answer)

    return validate_quota


def _json(answer: dict[str, Any]) -> web.Response:
    return web.Response(body=jsoncodec.dumps(answer), content_type="application/json")


class WebhookServer:
    """The app behind TLS on ``address:port``; :meth:`start`, then :meth:`stop`."""

    def __init__(self, mutator: PodMutator, ssl_context: ssl.SSLContext, *, address: str, port: int,
                 quotas: QuotaValidator | None = None) -> None:
        self.mutator = mutator
        self.quotas = quotas
        self.ssl_context = ssl_context
        self.address = address
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        runner = web.AppRunner(webhook_app(self.mutator, self.quotas), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.address, self.port, ssl_context=self.ssl_context)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        paths = [MUTATE_POD_PATH, VALIDATE_POD_PATH] + ([VALIDATE_QUOTA_PATH] if self.quotas is not None else [])
        log.info("serving %s on https://%s:%d", ", ".join(paths), self.address, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
