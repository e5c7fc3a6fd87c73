"""The ElasticQuota validating webhook: ``POST /validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``.

Koordinator serves this path from koord-manager (Koordinator pkg/webhook/elasticquota/validating,
quota_topology.go, quota_topology_check.go); pykoord serves it from koord-scheduler's admission server.
CREATE, UPDATE and DELETE of ``elasticquotas`` are checked against the quotas the server watches:

- the tree rules the ElasticQuota plugin applies when it builds its tree
  (:func:`~koord_scheduler.quota.validation.validate_tree`: non-negative numbers,
  ``min <= max``, the parent exists and is labelled ``is-parent: "true"``, no cycle, the parent's
  ``tree-id``, children's min sum at most the parent's min), applied to the quota set as it would be after
  the request: a request is refused if the quota itself would be left out of the tree, or if it would leave
  out another quota that is in the tree today;
- the rules only Koordinator's webhook applies: quota names are unique cluster-wide; a namespace is bound
  to one quota only; every resource of ``min`` is also in ``max``; the root and system quotas are not
  modified; ``tree-id`` never changes; ``is-parent`` does not turn false while the quota has child quotas,
  nor true while pods carry its ``quota.scheduling.koordinator.sh/name`` label; the built-in quotas and a
  quota with child quotas or pods are not deleted.

An UPDATE that leaves min, max, parent, is-parent, tree-id and the namespaces alone (status, the
scheduler's own annotations) is always allowed, as Koordinator does. A refusal is an ``allowed: false``
answer with HTTP code 400 and a message naming the quota and the field; the API server shows it as
``admission webhook "velasticquota.koordinator.sh" denied the request: <message>``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from apis.core.errors import ParseError
from apis.core.quantity import format_quantity
from apis.scheduling.elasticquota import (
    BUILTIN_QUOTAS,
    DEFAULT_QUOTA,
    GROUP,
    PLURAL,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    QuotaRecord,
    parse_elastic_quota,
)
from koord_scheduler.quota.validation import (
    min_sum_message,
    min_sum_over,
    numbers_problem,
    validate_tree,
)
from koord_scheduler.webhook.admission import ClusterLookupError
from koord_scheduler.webhook.review import BadReviewError, ReviewRule, answer, deny, parse_review

log = logging.getLogger(__name__)

Json = dict[str, Any]

VALIDATE_QUOTA_PATH = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
"""Koordinator's path for this webhook (kubebuilder marker of pkg/webhook/elasticquota/validating)."""
QUOTA_RULE = ReviewRule(GROUP, PLURAL, frozenset({"CREATE", "UPDATE", "DELETE"}))
"""What the path serves: ``admission.k8s.io/v1`` reviews of ElasticQuota writes (no subresource)."""
POD_NAMES_SHOWN = 2
"""A refused delete names at most this many of the quota's pods (then ``...``), as Koordinator does."""


class QuotaLookup(Protocol):
    """What the quota checks read from the cluster."""

    def quotas(self) -> Mapping[str, QuotaRecord]:
        """The quotas as last watched, by name (malformed ones left out)."""
        ...

    async def relist(self) -> Mapping[str, QuotaRecord]:
        """The quotas as they are now (one LIST): used when a request names a quota the watch has not
        delivered yet. Raises ``ClusterLookupError``."""
        ...

    async def pods_of(self, quota: str) -> Sequence[str]:
        """Names (``namespace/name``) of pods labelled with ``quota``. Raises ``ClusterLookupError``."""
        ...


# ----- the checks, pure -----


def _display(record: QuotaRecord) -> str:
    return f"ElasticQuota {record.meta.namespace}/{record.name}"


def tree_fields(record: QuotaRecord) -> tuple[object, ...]:
    """What the webhook checks (Koordinator's ``quotaFieldsCopy``): equal tuples mean nothing to check."""
    return (
        tuple(sorted(record.min.items())),
        tuple(sorted(record.max.items())),
        record.parent,
        record.is_parent,
        record.tree_id,
        record.namespaces,
    )


def children_of(name: str, quotas: Mapping[str, QuotaRecord]) -> list[str]:
    return sorted(r.name for r in quotas.values() if r.parent == name and r.name != name)


def own_problem(quota: QuotaRecord, quotas: Mapping[str, QuotaRecord], *,
                current: Mapping[str, QuotaRecord] | None = None) -> str:
    """What is wrong with writing ``quota`` into ``quotas`` (the other quotas; ``""``: nothing).

    Koordinator's per-quota rules first, then the plugin's tree rules (:func:`tree_problem`); ``current``
    is the cluster today (default ``quotas``)."""
    for key in sorted(quota.min):
        if key not in quota.max:
            return f"spec.min.{key} is set but spec.max.{key} is not: every resource of min must be in max"
    message = numbers_problem(quota)
    if message:
        return message
    if quota.name == ROOT_QUOTA:
        return ""
    proposed = {**quotas, quota.name: quota}
    # Koordinator's webhook checks its own rule on children's min; validate_tree would blame whichever
    # sibling comes last in name order, so the quota being written is checked here first.
    parent = proposed.get(quota.parent)
    if quota.parent != ROOT_QUOTA and parent is not None and parent.is_parent:
        siblings = [proposed[c].min for c in children_of(quota.parent, proposed)]
        over = min_sum_over(parent, siblings)
        if over is not None:
            return f"spec.min: {min_sum_message(parent, *over)}"
    kids = children_of(quota.name, proposed)
    if kids:
        over = min_sum_over(quota, [proposed[c].min for c in kids])
        if over is not None:
            key, total = over
            return (
                f"spec.min.{key}: the min of its child quotas ({', '.join(kids)}) adds up to "
                f"{format_quantity(key, total)}, above this quota's min ({format_quantity(key, quota.min.get(key, 0))})"
            )
    return tree_problem(quotas, quota, current=quotas if current is None else current)


def tree_problem(quotas: Mapping[str, QuotaRecord], quota: QuotaRecord, *, current: Mapping[str, QuotaRecord]) -> str:
    """The plugin's tree rules on ``quotas`` with ``quota`` in it: the quota's own problem, else another quota
    that is in the tree of ``current`` (the cluster today) and would be left out, and why."""
    proposed = {**quotas, quota.name: quota}
    valid_then, problems = validate_tree(proposed.values())
    for problem in problems:
        if problem.quota == quota.name and problem.namespace == quota.meta.namespace:
            return problem.message
    others = [p for p in problems if p.quota != quota.name and p.quota not in valid_then]
    if others:
        valid_now, _ = validate_tree(current.values())
        for problem in others:
            if problem.quota in valid_now:
                return f"quota {problem.quota} would become invalid: {problem.message}"
    return ""


def check_create(quota: QuotaRecord, quotas: Mapping[str, QuotaRecord]) -> str:
    """Why a new ``quota`` is refused (``""``: allowed)."""
    same = quotas.get(quota.name)
    if same is not None:
        return (
            f"{_display(quota)}: metadata.name: a quota named {quota.name} already exists in namespace "
            f"{same.meta.namespace}; quota names are cluster-wide"
        )
    message = _namespaces_taken(quota, quotas) or own_problem(quota, quotas)
    return f"{_display(quota)}: {message}" if message else ""


def check_update(old: QuotaRecord, new: QuotaRecord, quotas: Mapping[str, QuotaRecord], *,
                 has_pods: bool = False) -> str:
    """Why changing ``old`` into ``new`` is refused (``""``: allowed). ``has_pods``: pods carry the
    quota's name label (only asked when ``is-parent`` turns true, see :func:`needs_pods`)."""
    if tree_fields(old) == tree_fields(new):
        return ""
    if new.name in (ROOT_QUOTA, SYSTEM_QUOTA):
        return f"{_display(new)}: the {new.name} quota cannot be modified"
    message = ""
    kids = children_of(new.name, quotas)
    if old.tree_id != new.tree_id:
        message = (
            f"metadata.labels[quota.scheduling.koordinator.sh/tree-id]: the tree id cannot change "
            f"({old.tree_id!r} to {new.tree_id!r})"
        )
    elif old.is_parent and not new.is_parent and kids:
        message = (
            f"metadata.labels[quota.scheduling.koordinator.sh/is-parent]: cannot turn false while the quota has "
            f"child quotas ({', '.join(kids)})"
        )
    elif not old.is_parent and new.is_parent and has_pods:
        message = (
            "metadata.labels[quota.scheduling.koordinator.sh/is-parent]: cannot turn true while pods are bound to "
            "the quota (label quota.scheduling.koordinator.sh/name)"
        )
    elif new.parent != old.parent and _is_descendant(new.parent, new.name, quotas):
        message = (
            f"metadata.labels[quota.scheduling.koordinator.sh/parent]: {new.parent} is below {new.name} in the "
            f"tree; the quota parents would form a cycle"
        )
    rest = {k: v for k, v in quotas.items() if k != new.name}
    message = message or _namespaces_taken(new, rest) or own_problem(new, rest, current=quotas)
    return f"{_display(new)}: {message}" if message else ""


def needs_pods(operation: str, old: QuotaRecord | None, new: QuotaRecord | None) -> bool:
    """Whether the check needs the quota's pods (a LIST): DELETE, and ``is-parent`` turning true."""
    if operation == "DELETE":
        return True
    return operation == "UPDATE" and old is not None and new is not None and not old.is_parent and new.is_parent


def check_delete(quota: QuotaRecord, quotas: Mapping[str, QuotaRecord], pods: Sequence[str] = ()) -> str:
    """Why deleting ``quota`` is refused (``""``: allowed). ``pods``: those labelled with its name."""
    if quota.name in BUILTIN_QUOTAS:
        return f"{_display(quota)}: the built-in quota {quota.name} cannot be deleted"
    kids = children_of(quota.name, quotas)
    if kids:
        return f"{_display(quota)}: cannot be deleted: it has {len(kids)} child quota(s): {', '.join(kids)}"
    if pods:
        shown = list(pods[:POD_NAMES_SHOWN]) + (["..."] if len(pods) > POD_NAMES_SHOWN else [])
        return f"{_display(quota)}: cannot be deleted: it has {len(pods)} pod(s): {', '.join(shown)}"
    return ""


def _namespaces_taken(quota: QuotaRecord, quotas: Mapping[str, QuotaRecord]) -> str:
    for other in sorted(quotas.values(), key=lambda r: r.name):
        if other.name == quota.name:
            continue
        for namespace in quota.namespaces:
            if namespace in other.namespaces:
                return (
                    f"metadata.annotations[quota.scheduling.koordinator.sh/namespaces]: namespace {namespace} "
                    f"is already bound to quota {other.name}"
                )
    return ""


def _is_descendant(name: str, ancestor: str, quotas: Mapping[str, QuotaRecord]) -> bool:
    """Whether ``ancestor`` is on the parent chain of ``name`` (``name`` itself included)."""
    seen: set[str] = set()
    current = name
    while current and current not in seen:
        if current == ancestor:
            return True
        seen.add(current)
        record = quotas.get(current)
        if record is None or current in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA):
            return False
        current = record.parent
    return False


# ----- the admission review -----


class QuotaValidator:
    """Answers ElasticQuota AdmissionReviews with the checks above."""

    def __init__(self, lookup: QuotaLookup) -> None:
        self.lookup = lookup

    async def review(self, body: Any) -> Json:
        """The AdmissionReview answering ``body``. Raises :class:`BadReviewError` for a review this path
        does not serve (see :func:`~.review.parse_review`)."""
        request = parse_review(body, QUOTA_RULE)
        message = await self._refusal(request)
        if message:
            log.info("refused %s of an ElasticQuota: %s", request["operation"], message)
            return deny(request["uid"], message)
        return answer(request["uid"], {"allowed": True})

    async def _refusal(self, request: Json) -> str:
        operation = str(request["operation"])
        try:
            new = _record(request.get("object"))
            old = _record(request.get("oldObject"))
        except ParseError as exc:
            return str(exc)
        quotas = self.lookup.quotas()
        try:
            if _unseen(new, quotas):
                quotas = await self.lookup.relist()
            pods: Sequence[str] = ()
            if needs_pods(operation, old, new):
                subject = old if old is not None else new
                if subject is not None and (operation != "DELETE" or not check_delete(subject, quotas)):
                    pods = await self.lookup.pods_of(subject.name)
        except ClusterLookupError as exc:
            subject = new if new is not None else old
            what = _display(subject) if subject is not None else "ElasticQuota"
            return f"{what}: cannot be checked: {exc}"
        if operation == "CREATE" and new is not None:
            return check_create(new, quotas)
        if operation == "UPDATE" and new is not None:
            return check_update(old if old is not None else new, new, quotas, has_pods=bool(pods))
        if operation == "DELETE" and old is not None:
            return check_delete(old, quotas, pods)
        return ""


def _record(obj: Any) -> QuotaRecord | None:
    if not isinstance(obj, dict):
        return None
    return parse_elastic_quota(obj)


def _unseen(new: QuotaRecord | None, quotas: Mapping[str, QuotaRecord]) -> bool:
    """The request names a parent the watch has not delivered yet (created a moment ago)."""
    return new is not None and new.parent not in ("", ROOT_QUOTA) and new.parent not in quotas


def refused(answer: Json) -> str:
    """The message of a refusing answer, ``""`` when it allows (tests and logs)."""
    response = answer.get("response") or {}
    return "" if response.get("allowed") else str((response.get("status") or {}).get("message", ""))


__all__ = ["VALIDATE_QUOTA_PATH", "BadReviewError", "QuotaLookup", "QuotaValidator", "check_create",
           "check_delete", "check_update", "needs_pods", "refused"]
