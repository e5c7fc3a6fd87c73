"""Which reservations a pod may use: owner matching (DNF), reservation affinity, taints, labels.

Koordinator's ``MatchReservationOwners`` / ``matchReservationAffinity`` / ``checkReservationMatchedOrIgnored``,
as pure functions, plus :class:`OwnerIndex`: an index from owner terms to reservations so that a pod that
matches no reservation costs a few dictionary probes, not a scan.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apis.core import boundedjson
from apis.core.selectors import label_selector_matches, node_selector_term_matches
from apis.core.tolerations import find_untolerated_taint
from apis.core.types import Operator, Pod, Taint, TaintEffect
from apis.scheduling import (
    ANNOTATION_EXACT_MATCH_RESERVATION,
    ANNOTATION_RESERVATION_AFFINITY,
    LABEL_RESERVATION_IGNORED,
    LABEL_RESERVATION_ORDER,
    OwnerTerm,
    ReservationAffinity,
    ReservationRecord,
    parse_reservation_affinity,
)

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", TaintEffect.NO_SCHEDULE)
"""What ``spec.unschedulable`` looks like to reservation-affinity tolerations (Koordinator's rule)."""

IndexKey = tuple[str, ...]


def owner_term_matches(term: OwnerTerm, pod: Pod) -> bool:
    """One DNF term: every part that is set must match the pod."""
    if term.has_object:
        if term.object_uid and term.object_uid != pod.uid:
            return False
        if term.object_name and term.object_name != pod.name:
            return False
        if term.object_namespace and term.object_namespace != pod.namespace:
            return False
    if term.has_controller and not _controller_matches(term, pod):
        return False
    return term.label_selector is None or label_selector_matches(term.label_selector, pod.labels)


def _controller_matches(term: OwnerTerm, pod: Pod) -> bool:
    if term.controller_namespace and term.controller_namespace != pod.namespace:
        return False
    for ref in pod.meta.owner_references:
        if term.controller_only and not ref.controller:
            continue
        if term.controller_uid:
            if ref.uid == term.controller_uid:
                return True
            continue
        if term.controller_name and ref.name != term.controller_name:
            continue
        if term.controller_kind and ref.kind != term.controller_kind:
            continue
        if term.controller_api_version and ref.api_version != term.controller_api_version:
            continue
        return True
    return False


def index_keys(term: OwnerTerm) -> tuple[IndexKey, ...]:
    """Keys under which ``term`` is indexed: every pod it matches produces one of them
    (:func:`pod_probe_keys`). Empty means the term cannot be indexed and is checked for every pod."""
    if term.has_object and term.object_uid:
        return (("uid", term.object_uid),)
    if term.has_object and term.object_name:
        return (("name", term.object_namespace, term.object_name),)
    if term.has_controller and term.controller_uid:
        return (("owner-uid", term.controller_uid),)
    if term.has_controller and term.controller_name:
        return (("owner-name", term.controller_name),)
    selector = term.label_selector
    if selector is not None:
        if selector.match_labels:
            key, value = min(selector.match_labels.items())
            return (("label", key, value),)
        for req in selector.match_expressions:
            if req.operator is Operator.IN and req.values:
                return tuple(("label", req.key, v) for v in req.values)
    return ()


def pod_probe_keys(pod: Pod) -> list[IndexKey]:
    keys: list[IndexKey] = [("uid", pod.uid), ("name", pod.namespace, pod.name), ("name", "", pod.name)]
    for ref in pod.meta.owner_references:
        keys.append(("owner-uid", ref.uid))
        keys.append(("owner-name", ref.name))
    keys.extend(("label", k, v) for k, v in pod.labels.items())
    return keys


class OwnerIndex:
    """Distinct owner terms → the reservations (uids) that list them, found from a pod by probing keys.

    Each distinct term is evaluated at most once per pod however many reservations share it.
    """

    def __init__(self) -> None:
        self._term_ids: dict[OwnerTerm, int] = {}
        self._terms: list[OwnerTerm] = []
        self._members: list[set[str]] = []
        self._by_key: dict[IndexKey, set[int]] = {}
        self._unindexed: set[int] = set()
        self._of_uid: dict[str, tuple[int, ...]] = {}
        self.generation = 0

    def __len__(self) -> int:
        return len(self._of_uid)

    def add(self, uid: str, owners: Iterable[OwnerTerm]) -> None:
        self.remove(uid)
        ids = []
        for term in owners:
            tid = self._term_ids.get(term)
            if tid is None:
                tid = len(self._terms)
                self._term_ids[term] = tid
                self._terms.append(term)
                self._members.append(set())
                keys = index_keys(term)
                if not keys:
                    self._unindexed.add(tid)
                for key in keys:
                    self._by_key.setdefault(key, set()).add(tid)
            self._members[tid].add(uid)
            ids.append(tid)
        self._of_uid[uid] = tuple(ids)
        self.generation += 1

    def remove(self, uid: str) -> None:
        ids = self._of_uid.pop(uid, None)
        if ids is None:
            return
        for tid in ids:
            self._members[tid].discard(uid)
        self.generation += 1

    def match(self, pod: Pod) -> set[str]:
        """Uids of the reservations whose owners match ``pod``."""
        if not self._of_uid:
            return set()
        candidates: set[int] = set(self._unindexed)
        by_key = self._by_key
        for key in pod_probe_keys(pod):
            hit = by_key.get(key)
            if hit:
                candidates |= hit
        out: set[str] = set()
        for tid in candidates:
            members = self._members[tid]
            if members and owner_term_matches(self._terms[tid], pod):
                out |= members
        return out


@dataclass(frozen=True, slots=True)
class PodReservationIntent:
    """What a pod's labels and annotations say about reservations."""

    ignored: bool = False
    affinity: ReservationAffinity | None = None
    exact_names: tuple[str, ...] = ()
    """The ``exact-match-reservation`` annotation's ``resourceNames``."""
    error: str = ""
    """Why the reservation affinity or exact-match annotation could not be read ("" when it could)."""


NO_INTENT = PodReservationIntent()


def pod_intent(pod: Pod) -> PodReservationIntent:
    ignored = pod.labels.get(LABEL_RESERVATION_IGNORED) == "true"
    text = pod.annotations.get(ANNOTATION_RESERVATION_AFFINITY)
    exact_text = pod.annotations.get(ANNOTATION_EXACT_MATCH_RESERVATION)
    if text is None and not exact_text:
        return PodReservationIntent(ignored=True) if ignored else NO_INTENT
    affinity = None
    exact: tuple[str, ...] = ()
    try:
        if text is not None:
            affinity = parse_reservation_affinity(text)
    except (ValueError, TypeError) as exc:
        return PodReservationIntent(ignored=ignored, error=f"invalid reservation affinity: {exc}")
    try:
        exact = parse_exact_match(exact_text) if exact_text else ()
    except ValueError as exc:
        error = f"invalid annotation {ANNOTATION_EXACT_MATCH_RESERVATION}: {exc}"
        return PodReservationIntent(ignored=ignored, error=error)
    return PodReservationIntent(ignored=ignored, affinity=affinity, exact_names=exact)


def parse_exact_match(text: str) -> tuple[str, ...]:
    """``{"resourceNames": [...]}`` (Koordinator ``ExactMatchReservationSpec``); ValueError names the fault."""
    try:
        raw = boundedjson.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise ValueError("must be a JSON object with resourceNames")
    names = raw.get("resourceNames") or []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError("resourceNames must be a list of resource names")
    return tuple(names)


def exact_match(requests: Mapping[str, int], allocatable: Mapping[str, int], names: Iterable[str]) -> bool:
    """Koordinator ``ExactMatchReservation``: for every listed resource, the reservation's allocatable
    equals the pod's request; a resource that neither has is skipped, one that only one side has fails.
    (Koordinator stops at the first resource neither side has and answers true, so later names go
    unchecked; here every listed name is checked.)"""
    for name in names:
        have = allocatable.get(name)
        want = requests.get(name)
        if have is None and want is None:
            continue
        if have is None or want is None or have != want:
            return False
    return True


def exact_match_ok(pod: Pod, reservation: ReservationRecord) -> bool:
    """Whether ``pod``'s exact-match annotation lets it use ``reservation`` (an unreadable one does not)."""
    intent = pod_intent(pod)
    if intent.error:
        return False
    return exact_match(pod.requests, reservation.allocatable, intent.exact_names)


def affinity_allows(
    affinity: ReservationAffinity | None, reservation: ReservationRecord, node_labels: Mapping[str, str]
) -> str:
    """Why ``reservation`` may not be used by a pod with ``affinity`` ("" when it may).

    Unschedulable and tainted reservations need tolerations (in the affinity), as in Koordinator.
    Selector terms and ``reservationSelector`` see the reservation's labels over the node's.
    """
    tolerations = affinity.tolerations if affinity is not None else ()
    if affinity is not None and affinity.name:
        return "" if affinity.name == reservation.name else "name mismatch"
    if reservation.unschedulable and find_untolerated_taint((UNSCHEDULABLE_TAINT,), tolerations) is not None:
        return "reservation is unschedulable"
    if reservation.taints:
        taint = find_untolerated_taint(reservation.taints, tolerations)
        if taint is not None:
            return f"reservation had untolerated taint {{{taint.key}: {taint.value}}}"
    if affinity is None:
        return ""
    labels = {**node_labels, **reservation.labels}
    if affinity.reservation_selector is not None and any(
        labels.get(k) != v for k, v in affinity.reservation_selector.items()
    ):
        return "didn't match reservation affinity rules"
    if affinity.required_terms is not None and not any(
        node_selector_term_matches(t, labels, reservation.name) for t in affinity.required_terms
    ):
        return "didn't match reservation affinity rules"
    return ""


def reservation_order(reservation: ReservationRecord) -> int:
    """The ``reservation-order`` label: lower non-zero orders are preferred; 0 means none."""
    text = reservation.labels.get(LABEL_RESERVATION_ORDER)
    if not text:
        return 0
    try:
        return max(0, int(text))
    except ValueError:
        return 0
