"""The AdmissionReview envelope: what each webhook path accepts, and its answers. Pure (no HTTP, no API).

Every path serves ``admission.k8s.io/v1`` AdmissionReviews for one resource and a fixed set of operations
(:class:`ReviewRule`); :func:`parse_review` refuses anything else *before* a handler looks at it or asks
the API server anything:

- not a JSON object of ``kind: AdmissionReview`` with a ``request`` object, or no usable ``request.uid``
  (a non-empty visible-ASCII string of at most :data:`MAX_UID_CHARS`): :class:`BadReviewError` without a
  UID, which the server answers with HTTP 400 (then the webhook configuration's ``failurePolicy`` decides);
- a UID but another ``apiVersion``, resource, subresource or operation, a ``request.namespace`` that is not
  a DNS-1123 label, a ``request.name`` or an object's ``metadata.name`` that is not a DNS-1123 subdomain,
  or no object where the operation needs one: :class:`BadReviewError` with the UID, which the server
  answers with :func:`deny` (``allowed: false``, code 400 and the reason), so the request fails closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from apis.core.paths import InvalidNameError, check_name, check_namespace, shown

Json = dict[str, Any]

ADMISSION_API_VERSION = "admission.k8s.io/v1"
MAX_UID_CHARS = 128
"""UIDs are 36-character UUIDs; anything far longer is not from an API server."""
_UID = re.compile(r"[\x21-\x7e]+")


class BadReviewError(ValueError):
    """The body is not an AdmissionReview this path serves. ``uid`` is the request's UID when one could
    be read (the answer is then a denial), ``""`` otherwise (the answer is HTTP 400)."""

    def __init__(self, message: str, *, uid: str = "") -> None:
        super().__init__(message)
        self.uid = uid


@dataclass(frozen=True, slots=True)
class ReviewRule:
    """What one path serves: ``resource`` of API group ``group`` (no subresource), for ``operations``."""

    group: str
    resource: str
    operations: frozenset[str]
    namespaced: bool = True

    def describe(self) -> str:
        what = f"{self.group}/{self.resource}" if self.group else self.resource
        return f"{'/'.join(sorted(self.operations))} of {what}"


def review_uid(body: Any) -> str:
    """``request.uid`` when it is usable, else ``""``."""
    request = body.get("request") if isinstance(body, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    if isinstance(uid, str) and len(uid) <= MAX_UID_CHARS and _UID.fullmatch(uid):
        return uid
    return ""


def parse_review(body: Any, rule: ReviewRule) -> Json:
    """The ``request`` of ``body`` when it is a review ``rule`` serves; raises :class:`BadReviewError`."""
    if not isinstance(body, dict) or body.get("kind") != "AdmissionReview" or not isinstance(body.get("request"), dict):
        raise BadReviewError("expected an AdmissionReview with a request")
    uid = review_uid(body)
    if not uid:
        raise BadReviewError(
            f"request.uid: expected a non-empty string of at most {MAX_UID_CHARS} visible "
            f"ASCII characters, got {shown(body['request'].get('uid'))}"
        )
    request: Json = body["request"]

    def refuse(message: str) -> BadReviewError:
        return BadReviewError(message, uid=uid)

    if body.get("apiVersion") != ADMISSION_API_VERSION:
        raise refuse(f"apiVersion: expected {ADMISSION_API_VERSION}, got {shown(body.get('apiVersion'))}")
    resource = request.get("resource")
    group = resource.get("group", "") if isinstance(resource, dict) else None
    name = resource.get("resource") if isinstance(resource, dict) else None
    operation = request.get("operation")
    if group != rule.group or name != rule.resource or request.get("subResource") or operation not in rule.operations:
        sub = request.get("subResource")
        got = f"{shown(operation)} of {shown(group)}/{shown(name)}" + (f" subresource {shown(sub)}" if sub else "")
        raise refuse(f"this webhook serves {rule.describe()}; got {got}")
    try:
        if rule.namespaced:
            check_namespace(request.get("namespace"), what="request.namespace")
        if request.get("name"):
            check_name(request["name"], what="request.name")
        for key in ("object", "oldObject"):
            _check_object_names(request.get(key), key)
    except InvalidNameError as exc:
        raise refuse(str(exc)) from None
    wanted = "oldObject" if operation == "DELETE" else "object"
    if not isinstance(request.get(wanted), dict):
        raise refuse(f"request.{wanted}: expected the object of the {operation}")
    return request


def _check_object_names(obj: Any, key: str) -> None:
    if obj is None:
        return
    if not isinstance(obj, dict):
        raise InvalidNameError(f"request.{key}", type(obj).__name__, "expected an object")
    meta = obj.get("metadata")
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise InvalidNameError(f"request.{key}.metadata", type(meta).__name__, "expected an object")
    if meta.get("name"):
        check_name(meta["name"], what=f"request.{key}.metadata.name")
    if meta.get("namespace"):
        check_namespace(meta["namespace"], what=f"request.{key}.metadata.namespace")


def answer(uid: str, response: Json) -> Json:
    """The ``admission.k8s.io/v1`` AdmissionReview carrying ``response`` for request ``uid``."""
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": {"uid": uid, **response}}


def allow(uid: str) -> Json:
    return answer(uid, {"allowed": True})


def deny(uid: str, message: str, *, code: int = 400, reason: str = "BadRequest") -> Json:
    """A refusal: the API server shows ``admission webhook "<name>" denied the request: <message>``."""
    return answer(uid, {"allowed": False, "status": {"code": code, "reason": reason, "message": message}})
