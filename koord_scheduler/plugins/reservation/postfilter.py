"""The Reservation plugin's PostFilter: why an owner pod did not fit the reservations it may use.

Koordinator ``pkg/scheduler/plugins/reservation`` (``PostFilter`` / ``makePostFilterReasons``): when no
node fits a pod that owns reservations (or names one through reservation affinity), the failure gets one
reason per kind of mismatch, counted over all owner-matched reservations, so that ``kubectl describe``
says why the pod did not land in its reservation::

    0/3 nodes are available: 1 Insufficient cpu. 1 Reservation(s) didn't match affinity rules,
    1 Reservation(s) is unschedulable, 1 Reservation(s) for node reason that Insufficient cpu,
    3 Reservation(s) matched owner total

With ``enablePreemption`` the plugin first runs reservation preemption (:mod:`.preemption`): its answer
stands when it nominated a node, was UnschedulableAndUnresolvable or an error; otherwise its reasons come
first and the reservation reasons follow, and the status is Unschedulable.

The counting is pure (:func:`post_filter_reasons`, table-tested); :func:`diagnose` classifies the
reservations of one pod from the plugin's cache, and runs only when the pod failed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from apis.core.tolerations import find_untolerated_taint
from apis.core.types import Pod, Taint, TaintEffect, Toleration
from apis.scheduling import ANNOTATION_RESERVATION_AFFINITY, ReservationRecord
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.diagnosis import Diagnosis
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.status import Status, unschedulable
from koord_scheduler.framework.types import PostFilterResult
from koord_scheduler.plugins.reservation import policy
from koord_scheduler.plugins.reservation.cache import ReservationCache
from koord_scheduler.plugins.reservation.matching import (
    UNSCHEDULABLE_TAINT,
    affinity_allows,
    exact_match_ok,
    pod_intent,
)
from koord_scheduler.plugins.reservation.preemption import ReservationPreemption, settles

RESERVATION_REASON_PREFIX = "Reservation(s) "
"""Reasons a reservation-level Filter wrote (Koordinator's ``IsReservationReason``): not node reasons."""


ExactMatcher = Callable[[Pod, ReservationRecord], bool]
"""Whether a pod may use a reservation under the pod's exact-match annotation."""


class Verdict(Enum):
    """How one owner-matched reservation relates to the pod (Koordinator's diagnosis counters)."""

    USABLE = "usable"
    NAME_MATCHED = "name matched"
    NAME_UNMATCHED = "name unmatched"
    UNSCHEDULABLE = "unschedulable"
    TAINT = "untolerated taint"
    AFFINITY = "affinity unmatched"
    NOT_EXACT = "not exact matched"


@dataclass(slots=True)
class NodeDiagnosis:
    """Counters of one node's owner-matched reservations (Koordinator's ``nodeDiagnosisState``)."""

    owner_matched: int = 0
    name_matched: int = 0
    name_unmatched: int = 0
    unschedulable_unmatched: int = 0
    affinity_unmatched: int = 0
    not_exact_matched: int = 0
    taints_unmatched: int = 0
    taint_reasons: Counter[str] = field(default_factory=Counter)
    """``{key: value}`` -> reservations with that untolerated taint."""

    def add(self, verdict: Verdict, taint: str = "") -> None:
        self.owner_matched += 1
        if verdict is Verdict.NAME_MATCHED:
            self.name_matched += 1
        elif verdict is Verdict.NAME_UNMATCHED:
            self.name_unmatched += 1
        elif verdict is Verdict.UNSCHEDULABLE:
            self.unschedulable_unmatched += 1
        elif verdict is Verdict.AFFINITY:
            self.affinity_unmatched += 1
        elif verdict is Verdict.NOT_EXACT:
            self.not_exact_matched += 1
        elif verdict is Verdict.TAINT:
            self.taints_unmatched += 1
            self.taint_reasons[taint] += 1

    @property
    def classified_unmatched(self) -> int:
        """Reservations already explained by a reservation-level reason (name matches are not)."""
        return (
            self.name_unmatched
            + self.unschedulable_unmatched
            + self.affinity_unmatched
            + self.not_exact_matched
            + self.taints_unmatched
        )


def is_reservation_reason(reason: str) -> bool:
    return reason.startswith(RESERVATION_REASON_PREFIX)


def taint_text(taint: Taint) -> str:
    return f"{{{taint.key}: {taint.value}}}"


def classify(
    reservation: ReservationRecord,
    *,
    wanted_name: str,
    tolerations: Sequence[Toleration],
    affinity_ok: bool,
    exact_ok: bool,
) -> tuple[Verdict, str]:
    """One owner-matched reservation, in Koordinator's order; the second value names an untolerated taint.

    A pod that names a reservation is judged on the name (then exact matching) only; otherwise an
    unschedulable reservation needs a toleration, then NoSchedule/NoExecute taints, then the affinity
    rules, then exact matching."""
    if wanted_name:
        if reservation.name != wanted_name:
            return Verdict.NAME_UNMATCHED, ""
        return (Verdict.NAME_MATCHED, "") if exact_ok else (Verdict.NOT_EXACT, "")
    if reservation.unschedulable and find_untolerated_taint((UNSCHEDULABLE_TAINT,), tolerations) is not None:
        return Verdict.UNSCHEDULABLE, ""
    hard = tuple(t for t in reservation.taints if t.effect in (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE))
    taint = find_untolerated_taint(hard, tolerations) if hard else None
    if taint is not None:
        return Verdict.TAINT, taint_text(taint)
    if not affinity_ok:
        return Verdict.AFFINITY, ""
    if not exact_ok:
        return Verdict.NOT_EXACT, ""
    return Verdict.USABLE, ""


def post_filter_reasons(
    per_node: Mapping[str, NodeDiagnosis],
    node_reasons: Mapping[str, Sequence[str]],
    *,
    has_affinity: bool,
) -> list[str]:
    """Koordinator's aggregated reasons, in its order. ``node_reasons``: each node's Filter failure
    reasons. Empty when no reservation matched the owner and the pod has no reservation affinity.

    Reservations on a node that no reservation-level reason explains are charged to the node's own
    Filter reasons: each such reservation counts once per non-reservation reason the node failed with,
    after subtracting the reservation-level reasons the node's Filter already wrote."""
    total = NodeDiagnosis()
    taints: Counter[str] = Counter()
    by_node: Counter[str] = Counter()
    for node, d in per_node.items():
        total.owner_matched += d.owner_matched
        total.name_matched += d.name_matched
        total.name_unmatched += d.name_unmatched
        total.unschedulable_unmatched += d.unschedulable_unmatched
        total.affinity_unmatched += d.affinity_unmatched
        total.not_exact_matched += d.not_exact_matched
        taints.update(d.taint_reasons)
        remaining = d.owner_matched - d.classified_unmatched
        if remaining <= 0:
            continue
        counts: Counter[str] = Counter()
        for reason in node_reasons.get(node, ()):
            if is_reservation_reason(reason):
                remaining -= 1
            else:
                counts[reason] += 1
        if remaining <= 0:
            continue
        for reason, n in counts.items():
            by_node[reason] += remaining * n
    if total.owner_matched <= 0 and not has_affinity:
        return []
    reasons: list[str] = []
    for n, text in (
        (total.name_matched, "exactly matches the requested reservation name"),
        (total.name_unmatched, "didn't match the requested reservation name"),
        (total.affinity_unmatched, "didn't match affinity rules"),
        (total.unschedulable_unmatched, "is unschedulable"),
        (total.not_exact_matched, "is not exact matched"),
    ):
        if n > 0:
            reasons.append(f"{n} {RESERVATION_REASON_PREFIX}{text}")
    # Koordinator walks Go maps here (random order); sorted keeps messages stable.
    reasons += [f"{n} {RESERVATION_REASON_PREFIX}had untolerated taint {key}" for key, n in sorted(taints.items())]
    reasons += [
        f"{n} {RESERVATION_REASON_PREFIX}for node reason that {reason}" for reason, n in sorted(by_node.items())
    ]
    reasons.append(f"{total.owner_matched} {RESERVATION_REASON_PREFIX}matched owner total")
    return reasons


def diagnose(
    cache: ReservationCache,
    pod: Pod,
    snapshot: ClusterSnapshot,
    exact_ok: ExactMatcher | None = None,
) -> dict[str, NodeDiagnosis]:
    """Per node, the owner-matched Available reservations of ``pod`` classified by :func:`classify`."""
    intent = pod_intent(pod)
    affinity = intent.affinity
    tolerations = affinity.tolerations if affinity is not None else ()
    wanted = affinity.name if affinity is not None else ""
    out: dict[str, NodeDiagnosis] = {}
    for uid in sorted(cache.owner_index.match(pod)):
        entry = cache.get(uid)
        if entry is None or entry.row < 0 or entry.exhausted:
            continue
        record = entry.record
        affinity_ok = True
        if affinity is not None and not wanted:
            info = snapshot.node_info(record.node_name)
            labels = info.node.labels if info is not None and info.node is not None else {}
            affinity_ok = not affinity_allows(affinity, record, labels)
        exact = exact_ok(pod, record) if exact_ok is not None else True
        verdict, taint = classify(
            record, wanted_name=wanted, tolerations=tolerations, affinity_ok=affinity_ok, exact_ok=exact
        )
        out.setdefault(record.node_name, NodeDiagnosis()).add(verdict, taint)
    return out


def node_failure_reasons(
    diagnosis: Diagnosis, snapshot: ClusterSnapshot, nodes: Iterable[str]
) -> dict[str, tuple[str, ...]]:
    """Filter failure reasons of ``nodes`` only (the nodes that hold owner-matched reservations)."""
    wanted = set(nodes)
    if not wanted:
        return {}
    statuses = diagnosis.node_statuses(snapshot)
    return {name: statuses[name].reasons for name in wanted if name in statuses}


def reservation_post_filter(
    cache: ReservationCache, pod: Pod, snapshot: ClusterSnapshot, diagnosis: Diagnosis
) -> Status:
    """The PostFilter status: Unschedulable, with the aggregated reasons when there are any."""
    per_node = diagnose(cache, pod, snapshot, exact_match_ok)
    has_affinity = ANNOTATION_RESERVATION_AFFINITY in pod.annotations
    if not per_node and not has_affinity:
        return unschedulable()
    node_reasons = node_failure_reasons(diagnosis, snapshot, per_node)
    reasons = post_filter_reasons(per_node, node_reasons, has_affinity=has_affinity)
    return unschedulable(*reasons)


def post_filter_with_preemption(
    preemption: ReservationPreemption | None,
    cache: ReservationCache,
    state: CycleState,
    pod: Pod,
    *,
    snapshot: ClusterSnapshot,
    diagnosis: Diagnosis,
) -> tuple[PostFilterResult | None, Status]:
    """Koordinator's ``PostFilter``: reservation preemption first when enabled (its answer stands when it
    :func:`.settles`), then the aggregated reservation reasons after the preemption's own."""
    result: PostFilterResult | None = None
    reasons: tuple[str, ...] = ()
    if preemption is not None:
        result, status = preemption.post_filter(state, pod, diagnosis)
        if settles(status):
            return result, status
        reasons = status.reasons
    status = reservation_post_filter(cache, pod, snapshot, diagnosis)
    return result, unschedulable(*reasons, *status.reasons)


def affinity_failure_summary(cache: ReservationCache, pod: Pod, snapshot: ClusterSnapshot) -> str:
    """Why none of the Available reservations took ``pod`` (which has reservation affinity), counted
    per reason: owner, allocated once, affinity/taints, else it did not fit."""
    intent = pod_intent(pod)
    owned = cache.owner_index.match(pod)
    reasons: dict[str, int] = {}
    total = 0
    for entry in cache:
        if entry.row < 0:
            continue
        total += 1
        if entry.uid not in owned:
            reason = "didn't match owner"
        elif entry.exhausted:
            reason = "is allocated"
        else:
            info = snapshot.node_info(entry.record.node_name)
            labels = info.node.labels if info is not None and info.node is not None else {}
            reason = affinity_allows(intent.affinity, entry.record, labels)
            if not reason and not exact_match_ok(pod, entry.record):
                reason = "is not exact matched"
            reason = reason or "didn't fit the pod"
        reasons[reason] = reasons.get(reason, 0) + 1
    return policy.reservations_summary(total, reasons)
