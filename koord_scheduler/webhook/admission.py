"""AdmissionReview in, AdmissionReview out: the ``/mutate-pod`` and ``/validate-pod`` handlers, without HTTP.

Only ``admission.k8s.io/v1`` reviews of pod CREATE (``/mutate-pod``; CREATE and UPDATE for
``/validate-pod``) are served; :func:`~.review.parse_review` refuses anything else, and a namespace or name
that is not a Kubernetes name, before any lookup (a denial naming the field, or HTTP 400 without a UID).
A pod without a ``spec`` object is denied the same way: a review that cannot be read fails closed.

A well-formed pod the webhook cannot mutate (a lookup that failed, a quantity or annotation it cannot
read) is admitted unchanged, with one log line and the ``reason`` label of
``koord_webhook_pod_mutation_errors_total``: the API server validates the pod itself, and a cluster whose
API server is briefly unreachable from the webhook must still create pods.
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
from apis.core.paths import shown
from koord_scheduler.webhook.jsonpatch import create_patch
from koord_scheduler.webhook.mutation import (
    MutationError,
    PriorityClassInfo,
    ProfileSkip,
    match_profiles,
    mutate_pod,
)
from koord_scheduler.webhook.review import BadReviewError, ReviewRule, allow, answer, parse_review

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
            mutated=Counter(
                "koord_webhook_pods_mutated_total", "Pods the webhook changed on CREATE.", registry=registry
            ),
            errors=Counter(
                "koord_webhook_pod_mutation_errors_total",
                "Pods admitted unchanged because the webhook could not mutate them.",
                ["reason"],
                registry=registry,
            ),
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
        """The AdmissionReview answering ``body``. Raises :class:`BadReviewError` for a review this path
        does not serve (see :func:`~.review.parse_review`) and for a pod without a ``spec`` object."""
        request = parse_review(body, POD_CREATE)
        pod = request["object"]
        if not isinstance(pod.get("spec"), dict) or not isinstance(pod.get("metadata", {}), dict):
            raise BadReviewError("request.object: expected a pod with metadata and spec objects", uid=request["uid"])
        started = time.perf_counter()
        try:
            response = await self._respond(request, pod)
        finally:
            self.metrics.duration.observe(time.perf_counter() - started)
        return answer(request["uid"], response)

    async def _respond(self, request: Json, pod: Json) -> Json:
        meta = _map(pod, "metadata")
        namespace: str = request["namespace"]  # a DNS-1123 label (parse_review)
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
            log.warning(
                "pod %s/%s: ClusterColocationProfile %s skipped: %s", namespace, _name(meta), skip.profile, skip.message
            )
            self.lookup.profile_skipped(skip)
        ops = create_patch(pod, result.pod)
        if not ops:
            return {"allowed": True}
        self.metrics.mutated.inc()
        log.info("pod %s/%s mutated by %s", namespace, _name(meta), ", ".join(result.applied) or "no profile")
        return {
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(ops, separators=(",", ":")).encode()).decode(),
        }

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
        log.warning("pod %s/%s admitted unchanged (%s): %s", request.get("namespace", ""), _name(meta), reason, message)
        return {"allowed": True}


def _map(obj: Mapping[str, Any], key: str) -> Json:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _name(meta: Mapping[str, Any]) -> str:
    """The pod's name (or generateName) for a log line: escaped when it is not plain visible text."""
    text = str(meta.get("name") or meta.get("generateName") or "")
    return text if text.isascii() and text.isprintable() else shown(text)


POD_CREATE = ReviewRule("", "pods", frozenset({"CREATE"}))
"""What ``/mutate-pod`` serves (the chart's MutatingWebhookConfiguration sends pod CREATEs)."""
POD_CREATE_UPDATE = ReviewRule("", "pods", frozenset({"CREATE", "UPDATE"}))
"""What ``/validate-pod`` serves (Koordinator's ``vpod`` rule: pod create and update)."""


def validate_pod(body: Any) -> Json:
    """``/validate-pod``: allows every pod review it serves. Raises :class:`BadReviewError` otherwise."""
    return allow(parse_review(body, POD_CREATE_UPDATE)["uid"])


__all__ = [
    "POD_CREATE",
    "POD_CREATE_UPDATE",
    "BadReviewError",
    "ClusterLookupError",
    "ColocationLookup",
    "PodMutator",
    "WebhookMetrics",
    "validate_pod",
]
