"""AdmissionReview in, AdmissionReview out: the ``/mutate-pod`` handler, without HTTP.

``admission.k8s.io/v1`` and ``v1beta1`` reviews are answered in the version they came in. Only pod
CREATE requests (no subresource) are mutated; everything else is allowed as is. The answer is always
``allowed: true``: a pod the webhook cannot mutate (a malformed object, a lookup that failed, a quantity
it cannot read) is admitted unchanged, with one log line and the ``reason`` label of
``koord_webhook_pod_mutation_errors_total``. Only a body that is not an AdmissionReview at all gets an
HTTP error from the server.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram

from apis.colocation import ResolvedProfile
from koord_scheduler.webhook.jsonpatch import create_patch
from koord_scheduler.webhook.mutation import (
    MutationError,
    PriorityClassInfo,
    ProfileSkip,
    match_profiles,
    mutate_pod,
)

log = logging.getLogger(__name__)

Json = dict[str, Any]


class ClusterLookupError(Exception):
    """A lookup the mutation needs failed (the API server could not be asked)."""


class ColocationLookup(Protocol):
    """What the mutation reads from the cluster. The kube implementation answers from watch caches."""

    def profiles(self) -> Sequence[ResolvedProfile]:
        """Every usable profile (invalid ones are reported when seen, not returned)."""
        ...

    async def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """The namespace's labels; None if it does not exist. Raises ``ClusterLookupError`` if unknown."""
        ...

    async def priority_class(self, name: str) -> PriorityClassInfo | None:
        """The PriorityClass; None if it does not exist. Raises ``ClusterLookupError`` if unknown."""
        ...

    def profile_skipped(self, skip: ProfileSkip) -> None:
        """A matched profile could not be used (the kube implementation records an Event on it)."""
        ...


class BadReviewError(ValueError):
    """The request body is not an AdmissionReview."""


@dataclass(slots=True)
class WebhookMetrics:
    duration: Histogram
    mutated: Counter
    errors: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> WebhookMetrics:
        return cls(
            duration=Histogram(
                "koord_webhook_pod_mutation_duration_seconds",
                "Time the pod mutating webhook spent on one admission request.",
                buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0),
                registry=registry,
            ),
            mutated=Counter("koord_webhook_pods_mutated_total", "Pods the webhook changed on CREATE.",
                            registry=registry),
            errors=Counter("koord_webhook_pod_mutation_errors_total",
                           "Pods admitted unchanged because the webhook could not mutate them.", ["reason"],
                           registry=registry),
        )


class PodMutator:
    """Answers pod AdmissionReviews with the ClusterColocationProfile mutation."""

    def __init__(
        self,
        lookup: ColocationLookup,
        *,
        metrics: WebhookMetrics | None = None,
        roll: Callable[[], int] | None = None,
    ) -> None:
        self.lookup = lookup
        self.metrics = metrics or WebhookMetrics.create(CollectorRegistry())
        self.roll = roll or (lambda: random.randrange(100))

    async def review(self, body: Any) -> Json:
        """The AdmissionReview answering ``body``. Raises :class:`BadReviewError` for a non-review."""
        request = request_of(body)
        started = time.perf_counter()
        try:
            response = await self._respond(request)
        finally:
            self.metrics.duration.observe(time.perf_counter() - started)
        return {"apiVersion": body.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
                "response": {"uid": request.get("uid", ""), **response}}

    async def _respond(self, request: Json) -> Json:
        resource = request.get("resource") or {}
        if resource.get("group", "") != "" or resource.get("resource") != "pods" or request.get("subResource"):
            return {"allowed": True}
        if request.get("operation") != "CREATE":
            return {"allowed": True}
        pod = request.get("object")
        if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
            return self._unchanged(request, "BadObject", "the request carries no pod object")
        meta = _map(pod, "metadata")
        namespace = str(meta.get("namespace") or request.get("namespace") or "")
        labels = _map(meta, "labels")
        try:
            profiles = self.lookup.profiles()
            namespace_labels = None
            if any(p.namespace_selector is not None for p in profiles):
                namespace_labels = await self.lookup.namespace_labels(namespace)
            matched = match_profiles(labels, profiles, namespace_labels)
            priority_classes = await self._priority_classes(matched)
            result = mutate_pod(pod, matched, priority_classes=priority_classes, roll=self.roll)
        except ClusterLookupError as exc:
            return self._unchanged(request, "LookupFailed", str(exc))
        except MutationError as exc:
            return self._unchanged(request, "CannotMutate", str(exc))
        for skip in result.skipped:
            log.warning("pod %s/%s: ClusterColocationProfile %s skipped: %s", namespace, _name(meta),
                        skip.profile, skip.message)
            self.lookup.profile_skipped(skip)
        ops = create_patch(pod, result.pod)
        if not ops:
            return {"allowed": True}
        self.metrics.mutated.inc()
        log.info("pod %s/%s mutated by %s", namespace, _name(meta), ", ".join(result.applied) or "no profile")
        return {"allowed": True, "patchType": "JSONPatch",
                "patch": base64.b64encode(json.dumps(ops, separators=(",", ":")).encode()).decode()}

    async def _priority_classes(self, matched: Sequence[ResolvedProfile]) -> dict[str, PriorityClassInfo]:
        out: dict[str, PriorityClassInfo] = {}
        for profile in matched:
            name = profile.spec.priority_class_name
            if name and name not in out:
                info = await self.lookup.priority_class(name)
                if info is not None:
                    out[name] = info
        return out

    def _unchanged(self, request: Json, reason: str, message: str) -> Json:
        self.metrics.errors.labels(reason).inc()
        meta = _map(_map(request, "object"), "metadata")
        log.warning("pod %s/%s admitted unchanged (%s): %s", request.get("namespace", ""), _name(meta), reason,
                    message)
        return {"allowed": True}


def _map(obj: Mapping[str, Any], key: str) -> Json:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _name(meta: Mapping[str, Any]) -> str:
    return str(meta.get("name") or meta.get("generateName") or "")


def request_of(body: Any) -> Json:
    if not isinstance(body, dict) or body.get("kind") != "AdmissionReview" or not isinstance(body.get("request"), dict):
        raise BadReviewError("expected an AdmissionReview with a request")
    request: Json = body["request"]
    return request


def allow(body: Any) -> Json:
    """An AdmissionReview that allows ``body``'s request (``/validate-pod``)."""
    request = request_of(body)
    return {"apiVersion": body.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
            "response": {"uid": request.get("uid", ""), "allowed": True}}
