"""The ElasticQuota webhooks: ``POST /validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` and
``POST /mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``.

Koordinator serves these paths from koord-manager (``pkg/webhook/elasticquota/{validating,mutating}``);
pykoord serves them from koord-scheduler's admission server, against the quotas it watches.

- Validating (CREATE, UPDATE, DELETE): Koordinator's checks and messages (:mod:`.quota_topology`), then one
  rule of pykoord's own: a new parent may not be below the quota (the parents would form a cycle, which
  Koordinator does not check). An UPDATE that leaves min, max, parent, is-parent, tree-id and the
  namespaces alone (status, the scheduler's own annotations, ``shared-weight``) is allowed without
  checks, as Koordinator does. A quantity that is not a Kubernetes quantity is refused naming the field.
- Mutating (CREATE): Koordinator's defaults (the parent, the parent's ``tree-id``, ``shared-weight``),
  sent as a JSON patch; a quota whose parent does not exist yet cannot take its tree id and is refused.

A refusal is an ``allowed: false`` answer with HTTP code 400; the API server shows it as
``admission webhook "velasticquota.koordinator.sh" denied the request: <message>`` (``melasticquota`` for
the defaults). Pods are listed (one LIST by the ``quota.scheduling.koordinator.sh/name`` label, and by
namespace) only for a DELETE and for ``is-parent`` turning true; a request naming a quota or parent the
watch has not delivered yet (created a moment before) makes the webhook list the quotas again.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from apis.core.errors import ParseError
from apis.scheduling.elasticquota import (
    DEFAULT_QUOTA,
    GROUP,
    PLURAL,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    QuotaRecord,
    parse_elastic_quota,
)
from koord_scheduler.webhook.admission import ClusterLookupError
from koord_scheduler.webhook.gates import DEFAULT_ADMISSION_GATES, AdmissionGates
from koord_scheduler.webhook.jsonpatch import create_patch
from koord_scheduler.webhook.quota_topology import (
    DEFAULT_TOPOLOGY_OPTIONS,
    TopologyOptions,
    add_problem,
    delete_problem,
    fields_unchanged,
    info_of,
    map_of,
    needs_pod_check,
    quota_defaults,
    self_item_problem,
    unreadable_quantity,
    update_problem,
)
from koord_scheduler.webhook.review import BadReviewError, ReviewRule, answer, deny, parse_review

log = logging.getLogger(__name__)

Json = dict[str, Any]

VALIDATE_QUOTA_PATH = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
"""Koordinator's path for this webhook (kubebuilder marker of pkg/webhook/elasticquota/validating)."""
MUTATE_QUOTA_PATH = "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
"""Koordinator's path for the defaults (pkg/webhook/elasticquota/mutating)."""
QUOTA_RULE = ReviewRule(GROUP, PLURAL, frozenset({"CREATE", "UPDATE", "DELETE"}))
"""What the validating path serves: ``admission.k8s.io/v1`` reviews of ElasticQuota writes (no subresource)."""
QUOTA_DEFAULTS_RULE = ReviewRule(GROUP, PLURAL, frozenset({"CREATE", "UPDATE"}))
"""What the mutating path serves (the chart sends CREATE; an UPDATE is answered unchanged, as Koordinator)."""


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

    async def has_pods(self, quota: str, namespaces: Sequence[str]) -> bool:
        """Koordinator's ``hasQuotaBoundedPods``: pods labelled with ``quota``, or in the namespace named
        like it, or in one of ``namespaces``. Raises ``ClusterLookupError``."""
        ...

    def admitted(self, name: str, record: QuotaRecord | None) -> None:
        """The webhook allowed writing ``record`` (None: deleting quota ``name``): :meth:`quotas` includes
        it until the watch delivers it, as Koordinator's topology does."""
        ...


# ----- the checks, pure -----


def _display(obj: Mapping[str, Any]) -> str:
    meta = map_of(obj, "metadata")
    return f"ElasticQuota {meta.get('namespace', '')}/{meta.get('name', '')}"


def _parsed(obj: Mapping[str, Any]) -> QuotaRecord | str:
    """The quota, or why it cannot be read (naming the quota and the field)."""
    unreadable = unreadable_quantity(obj)
    if unreadable:
        return f"{_display(obj)}: {unreadable}"
    try:
        return parse_elastic_quota(obj)
    except ParseError as exc:  # a negative quantity: Koordinator's message for it, else the parser's
        return self_item_problem(obj) or str(exc)


def check_create(
    obj: Mapping[str, Any], quotas: Mapping[str, QuotaRecord], *, options: TopologyOptions = DEFAULT_TOPOLOGY_OPTIONS
) -> str:
    """Why a new quota ``obj`` is refused (``""``: allowed)."""
    new = _parsed(obj)
    if isinstance(new, str):
        return new
    return add_problem(obj, new, quotas, options=options)


def check_update(
    obj: Mapping[str, Any],
    old_obj: Mapping[str, Any],
    quotas: Mapping[str, QuotaRecord],
    *,
    has_pods: bool = False,
    options: TopologyOptions = DEFAULT_TOPOLOGY_OPTIONS,
) -> str:
    """Why changing ``old_obj`` into ``obj`` is refused (``""``: allowed). ``has_pods``: pods are bound to
    the quota (asked only when ``is-parent`` turns true, see :func:`needs_pods`)."""
    if fields_unchanged(old_obj, obj):
        return ""
    new = _parsed(obj)
    if isinstance(new, str):
        return new
    message = update_problem(obj, old_obj, new, quotas, has_pods=has_pods, options=options)
    if message:
        return message
    current = quotas.get(new.name)
    if current is not None and new.parent != current.parent and _is_descendant(new.parent, new.name, quotas):
        return (
            f"{_display(obj)}: metadata.labels[quota.scheduling.koordinator.sh/parent]: {new.parent} is below "
            f"{new.name} in the tree; the quota parents would form a cycle"
        )
    return ""


def needs_pods(operation: str, new: QuotaRecord | None, quotas: Mapping[str, QuotaRecord]) -> bool:
    """Whether the check needs the quota's pods: DELETE, and ``is-parent`` turning true (against the
    quota as the topology has it)."""
    if operation == "DELETE":
        return True
    if operation != "UPDATE" or new is None or new.name not in quotas:
        return False
    return needs_pod_check(info_of(quotas[new.name]), info_of(new))


def check_delete(name: str, quotas: Mapping[str, QuotaRecord], pods: Sequence[str] = ()) -> str:
    """Why deleting quota ``name`` is refused (``""``: allowed). ``pods``: ``namespace/name`` of those
    labelled with it (Koordinator names the pods without their namespace)."""
    return delete_problem(name, quotas, [p.rpartition("/")[2] for p in pods])


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


# ----- the admission reviews -----


class QuotaValidator:
    """Answers ElasticQuota AdmissionReviews with the checks above."""

    def __init__(self, lookup: QuotaLookup, *, gates: AdmissionGates = DEFAULT_ADMISSION_GATES) -> None:
        self.lookup = lookup
        self.gates = gates
        self.options = TopologyOptions(
            enable_update_resource_key=gates.enable_update_resource_key, guarantee_usage=gates.guarantee_usage
        )

    async def review(self, body: Any) -> Json:
        """The AdmissionReview answering ``body``. Raises :class:`BadReviewError` for a review this path
        does not serve (see :func:`~.review.parse_review`)."""
        request = parse_review(body, QUOTA_RULE)
        if not self.gates.elastic_quota_validating_webhook:
            return answer(request["uid"], {"allowed": True})
        message = await self._refusal(request)
        if message:
            log.info("refused %s of an ElasticQuota: %s", request["operation"], message)
            return deny(request["uid"], message)
        self._note_admitted(request)
        return answer(request["uid"], {"allowed": True})

    def _note_admitted(self, request: Json) -> None:
        if request["operation"] == "DELETE":
            name = str(map_of(request.get("oldObject"), "metadata").get("name", ""))
            self.lookup.admitted(name, None)
            return
        record = _parsed(request["object"])
        if isinstance(record, QuotaRecord):
            self.lookup.admitted(record.name, record)

    async def _refusal(self, request: Json) -> str:
        operation = str(request["operation"])
        obj = request.get("object") if isinstance(request.get("object"), dict) else None
        old_obj = request.get("oldObject") if isinstance(request.get("oldObject"), dict) else None
        subject = obj if obj is not None else old_obj
        assert subject is not None  # parse_review: the object the operation needs is there
        if operation == "UPDATE" and old_obj is None:
            raise BadReviewError("request.oldObject: expected the stored quota of the UPDATE", uid=request["uid"])
        if operation == "UPDATE" and old_obj is not None and obj is not None and fields_unchanged(old_obj, obj):
            return ""
        new = _parsed(obj) if obj is not None else None
        if isinstance(new, str):
            return new
        name = str((subject.get("metadata") or {}).get("name", ""))
        quotas = self.lookup.quotas()
        try:
            if _unseen(operation, name, new, quotas):
                quotas = await self.lookup.relist()
            pods: Sequence[str] = ()
            has_pods = False
            if operation == "DELETE":
                if not check_delete(name, quotas):  # pods are listed only when nothing else refuses
                    pods = await self.lookup.pods_of(name)
            elif needs_pods(operation, new, quotas):
                current = quotas[name]
                has_pods = await self.lookup.has_pods(name, current.namespaces)
        except ClusterLookupError as exc:
            return f"{_display(subject)}: cannot be checked: {exc}"
        if operation == "CREATE" and obj is not None:
            return check_create(obj, quotas, options=self.options)
        if operation == "UPDATE" and obj is not None and old_obj is not None:
            return check_update(obj, old_obj, quotas, has_pods=has_pods, options=self.options)
        if operation == "DELETE":
            return check_delete(name, quotas, pods)
        return ""


class QuotaDefaulter:
    """Answers ElasticQuota CREATE reviews with Koordinator's defaults (a JSON patch)."""

    def __init__(self, lookup: QuotaLookup, *, gates: AdmissionGates = DEFAULT_ADMISSION_GATES) -> None:
        self.lookup = lookup
        self.gates = gates

    async def review(self, body: Any) -> Json:
        """The AdmissionReview answering ``body``. Raises :class:`BadReviewError` for a review this path
        does not serve."""
        request = parse_review(body, QUOTA_DEFAULTS_RULE)
        obj = request["object"]
        if request["operation"] != "CREATE" or not self.gates.elastic_quota_mutating_webhook:
            return answer(request["uid"], {"allowed": True})
        quotas = self.lookup.quotas()
        parent = str(
            ((obj.get("metadata") or {}).get("labels") or {}).get("quota.scheduling.koordinator.sh/parent", "")
        )
        try:
            if parent and parent != ROOT_QUOTA and parent not in quotas:
                quotas = await self.lookup.relist()
        except ClusterLookupError as exc:
            return deny(request["uid"], f"{_display(obj)}: cannot be defaulted: {exc}")
        defaulted, problem = quota_defaults(obj, quotas)
        if problem:
            log.info("refused CREATE of an ElasticQuota: %s", problem)
            return deny(request["uid"], problem)
        ops = create_patch(obj, defaulted)
        if not ops:
            return answer(request["uid"], {"allowed": True})
        patch = base64.b64encode(json.dumps(ops, separators=(",", ":")).encode()).decode()
        return answer(request["uid"], {"allowed": True, "patchType": "JSONPatch", "patch": patch})


def _unseen(operation: str, name: str, new: QuotaRecord | None, quotas: Mapping[str, QuotaRecord]) -> bool:
    """The request names a quota or a parent the watch has not delivered yet (created a moment ago)."""
    if (
        operation in ("UPDATE", "DELETE")
        and name not in quotas
        and name not in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA)
    ):
        return True
    return new is not None and new.parent not in ("", ROOT_QUOTA) and new.parent not in quotas


def refused(answer: Json) -> str:
    """The message of a refusing answer, ``""`` when it allows (tests and logs)."""
    response = answer.get("response") or {}
    return "" if response.get("allowed") else str((response.get("status") or {}).get("message", ""))


__all__ = [
    "MUTATE_QUOTA_PATH",
    "VALIDATE_QUOTA_PATH",
    "BadReviewError",
    "QuotaDefaulter",
    "QuotaLookup",
    "QuotaValidator",
    "check_create",
    "check_delete",
    "check_update",
    "needs_pods",
    "refused",
]
