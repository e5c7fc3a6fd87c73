"""``POST /validate-pod``: Koordinator's pod validating webhook (``vpod.koordinator.sh``), CREATE and UPDATE.

The rules and their messages are in :mod:`.pod_rules`. A refusal is an ``allowed: false`` answer with
HTTP code 400 and Koordinator's message; the API server shows it as
``admission webhook "vpod.koordinator.sh" denied the request: <message>``. The quota a pod belongs to is
read from the ElasticQuotas the server watches (no API call per pod); without the ElasticQuota CRD every
pod is in the default quota and passes that check.

With the gate ``PodValidatingWebhook`` off every pod is allowed, as before this webhook existed. A pod the
API server accepted but pykoord's parser cannot read (a quantity out of int64 range) is refused naming the
field, as Koordinator refuses a pod it cannot decode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram

from apis.core.errors import ParseError
from apis.core.parse import parse_pod
from apis.scheduling.elasticquota import QuotaRecord
from koord_scheduler.webhook.admission import POD_CREATE_UPDATE
from koord_scheduler.webhook.gates import DEFAULT_ADMISSION_GATES, AdmissionGates
from koord_scheduler.webhook.pod_rules import (
    aggregate,
    colocation_errors,
    quota_pod_error,
    reserve_pod_annotation_errors,
)
from koord_scheduler.webhook.review import BadReviewError, allow, deny, parse_review

log = logging.getLogger(__name__)

Json = dict[str, Any]


class QuotaView(Protocol):
    """The quotas as last watched, by name (the quota webhook's lookup is one)."""

    def quotas(self) -> Mapping[str, QuotaRecord]: ...


class _NoQuotas:
    def quotas(self) -> Mapping[str, QuotaRecord]:
        return {}


@dataclass(slots=True)
class PodValidationMetrics:
    duration: Histogram
    refused: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> PodValidationMetrics:
        return cls(
            duration=Histogram(
                "koord_webhook_pod_validation_duration_seconds",
                "Time the pod validating webhook spent on one admission request.",
                buckets=(0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1),
                registry=registry,
            ),
            refused=Counter(
                "koord_webhook_pods_refused_total",
                "Pod creations and updates the validating webhook refused, by the rule that refused them "
                "(reserve-pod, colocation, elasticquota, unreadable).",
                ["rule"],
                registry=registry,
            ),
        )


class PodValidator:
    """Answers pod AdmissionReviews with Koordinator's validating rules."""

    def __init__(
        self,
        quotas: QuotaView | None = None,
        *,
        gates: AdmissionGates = DEFAULT_ADMISSION_GATES,
        metrics: PodValidationMetrics | None = None,
    ) -> None:
        self.quota_view: QuotaView = quotas if quotas is not None else _NoQuotas()
        self.gates = gates
        self.metrics = metrics or PodValidationMetrics.create(CollectorRegistry())

    async def review(self, body: Any) -> Json:
        """The AdmissionReview answering ``body``. Raises :class:`BadReviewError` for a review this path
        does not serve (see :func:`~.review.parse_review`), and for an UPDATE without the old pod."""
        request = parse_review(body, POD_CREATE_UPDATE)
        if not self.gates.pod_validating_webhook:
            return allow(request["uid"])
        old = request.get("oldObject") if request["operation"] == "UPDATE" else None
        if request["operation"] == "UPDATE" and not isinstance(old, dict):
            raise BadReviewError("request.oldObject: expected the stored pod of the UPDATE", uid=request["uid"])
        started = time.perf_counter()
        try:
            rule, message = self.refusal(request["object"], old, namespace=request["namespace"])
        finally:
            self.metrics.duration.observe(time.perf_counter() - started)
        if not message:
            return allow(request["uid"])
        self.metrics.refused.labels(rule).inc()
        log.info(
            "refused %s of pod %s/%s (%s): %s",
            request["operation"],
            request["namespace"],
            request.get("name", ""),
            rule,
            message,
        )
        return deny(request["uid"], message)

    def refusal(self, new: Json, old: Json | None, *, namespace: str) -> tuple[str, str]:
        """(rule, message) of the first rule ``new`` breaks, ``("", "")`` when it breaks none."""
        errors = reserve_pod_annotation_errors(new)
        if errors:
            return "reserve-pod", aggregate(errors)
        try:
            parsed = parse_pod(_named(new), require_containers=False)
        except ParseError as exc:
            return "unreadable", str(exc)
        errors = colocation_errors(new, parsed, old, skip_validating_priority=self.gates.skip_validating_priority)
        if errors:
            return "colocation", aggregate(errors)
        message = quota_pod_error(
            new,
            old,
            namespace=namespace,
            quotas=self.quota_view.quotas(),
            parent_submit=self.gates.parent_quota_submit_pod,
            disable_default_quota=self.gates.disable_default_quota,
        )
        return ("elasticquota", message) if message else ("", "")


def _named(pod: Json) -> Json:
    """``pod`` with a name for the parser, which needs one (a CREATE through ``generateName`` has it by
    the time webhooks run; a review written by hand may not)."""
    meta = pod.get("metadata")
    if isinstance(meta, dict) and meta.get("name"):
        return pod
    return {**pod, "metadata": {**(meta if isinstance(meta, dict) else {}), "name": "unnamed"}}


__all__ = ["PodValidationMetrics", "PodValidator", "QuotaView"]
