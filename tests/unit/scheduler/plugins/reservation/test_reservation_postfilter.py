"""Reservation PostFilter: Koordinator's aggregated per-reservation reasons (``makePostFilterReasons``),
as a pure function and end to end through the scheduler's FailedScheduling message."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from apis.core.types import Taint, TaintEffect, Toleration
from apis.scheduling import ANNOTATION_RESERVATION_AFFINITY
from koord_scheduler.plugins.reservation.postfilter import (
    NodeDiagnosis,
    Verdict,
    classify,
    post_filter_reasons,
)
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import make_reservation, run

PROFILE_WITH_POSTFILTER = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {enabled: [{name: Reservation}]}
    filter: {enabled: [{name: Reservation}]}
    postFilter:
      disabled: [{name: "*"}]
      enabled: [{name: Reservation}]
    preScore: {enabled: [{name: Reservation}]}
    score: {enabled: [{name: Reservation, weight: 5000}]}
    reserve: {enabled: [{name: Reservation}]}
    preBind: {enabled: [{name: Reservation}]}
    bind:
      disabled: [{name: "*"}]
      enabled: [{name: Reservation}, {name: DefaultBinder}]
"""


def diag(owner: int, taints: dict[str, int] | None = None, **counts: int) -> NodeDiagnosis:
    d = NodeDiagnosis(owner_matched=owner)
    for name, n in counts.items():
        setattr(d, name, n)
    if taints:
        d.taint_reasons = Counter(taints)
        d.taints_unmatched = sum(taints.values())
    return d


@pytest.mark.parametrize(
    ("per_node", "node_reasons", "has_affinity", "want"),
    [
        pytest.param({}, {}, False, [], id="no-owner-no-affinity-adds-nothing"),
        pytest.param({}, {}, True, ["0 Reservation(s) matched owner total"], id="affinity-always-shows-total"),
        pytest.param(
            # Koordinator's "show reservation reasons without preemption" case.
            {"n0": diag(3, affinity_unmatched=1), "n1": diag(3, unschedulable_unmatched=1)},
            {
                "n0": ("Reservation(s) Insufficient cpu", "Insufficient memory"),
                "n1": ("Reservation(s) Insufficient cpu", "Reservation(s) Insufficient memory", "Insufficient cpu"),
            },
            False,
            [
                "1 Reservation(s) didn't match affinity rules",
                "1 Reservation(s) is unschedulable",
                "1 Reservation(s) for node reason that Insufficient memory",
                "6 Reservation(s) matched owner total",
            ],
            id="koordinator-example",
        ),
        pytest.param(
            {"n1": diag(2, unschedulable_unmatched=1, affinity_unmatched=1), "n2": diag(1)},
            {"n2": ("Insufficient cpu",)},
            False,
            [
                "1 Reservation(s) didn't match affinity rules",
                "1 Reservation(s) is unschedulable",
                "1 Reservation(s) for node reason that Insufficient cpu",
                "3 Reservation(s) matched owner total",
            ],
            id="usable-reservation-charged-to-node-reason",
        ),
        pytest.param(
            {"n1": diag(3, name_matched=1, name_unmatched=2)},
            {"n1": ("Insufficient cpu", "Insufficient memory")},
            True,
            [
                "1 Reservation(s) exactly matches the requested reservation name",
                "2 Reservation(s) didn't match the requested reservation name",
                "1 Reservation(s) for node reason that Insufficient cpu",
                "1 Reservation(s) for node reason that Insufficient memory",
                "3 Reservation(s) matched owner total",
            ],
            id="name-matched-counts-its-node-reasons",
        ),
        pytest.param(
            {"n1": diag(2, taints={"{dedicated: gpu}": 1}, not_exact_matched=1), "n2": diag(2)},
            {"n2": ("Insufficient cpu",)},
            False,
            [
                "1 Reservation(s) is not exact matched",
                "1 Reservation(s) had untolerated taint {dedicated: gpu}",
                "2 Reservation(s) for node reason that Insufficient cpu",
                "4 Reservation(s) matched owner total",
            ],
            id="taints-and-exact-match",
        ),
        pytest.param(
            {"n1": diag(2)},
            {"n1": ("Reservation(s) Insufficient cpu", "Reservation(s) Insufficient memory", "Insufficient cpu")},
            False,
            ["2 Reservation(s) matched owner total"],
            id="reservation-level-reasons-cap-node-reasons-at-zero",
        ),
        pytest.param(
            {"n1": diag(2)},
            {"n1": ("Insufficient cpu", "Insufficient memory")},
            False,
            [
                "2 Reservation(s) for node reason that Insufficient cpu",
                "2 Reservation(s) for node reason that Insufficient memory",
                "2 Reservation(s) matched owner total",
            ],
            id="each-node-reason-times-remaining",
        ),
    ],
)
def test_post_filter_reasons(
    per_node: dict[str, NodeDiagnosis], node_reasons: dict[str, tuple[str, ...]], has_affinity: bool, want: list[str]
) -> None:
    assert post_filter_reasons(per_node, node_reasons, has_affinity=has_affinity) == want


TOLERATE_ALL = (Toleration(key="", operator="Exists"),)


@pytest.mark.parametrize(
    ("reservation", "kwargs", "want"),
    [
        pytest.param(make_reservation("r"), {}, (Verdict.USABLE, ""), id="usable"),
        pytest.param(make_reservation("r"), {"wanted_name": "r"}, (Verdict.NAME_MATCHED, ""), id="name-matched"),
        pytest.param(make_reservation("r"), {"wanted_name": "x"}, (Verdict.NAME_UNMATCHED, ""), id="name-unmatched"),
        pytest.param(
            make_reservation("r"), {"wanted_name": "r", "exact_ok": False}, (Verdict.NOT_EXACT, ""), id="name-not-exact"
        ),
        pytest.param(
            make_reservation("r").spec(unschedulable=True),
            {"wanted_name": "r"},
            (Verdict.NAME_MATCHED, ""),
            id="name-wins-over-unschedulable",
        ),
        pytest.param(
            make_reservation("r").spec(unschedulable=True),
            {"affinity_ok": False},
            (Verdict.UNSCHEDULABLE, ""),
            id="unschedulable-before-affinity",
        ),
        pytest.param(
            make_reservation("r").spec(unschedulable=True),
            {"tolerations": TOLERATE_ALL},
            (Verdict.USABLE, ""),
            id="unschedulable-tolerated",
        ),
        pytest.param(
            make_reservation("r").spec(taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
            {"affinity_ok": False},
            (Verdict.TAINT, "{dedicated: gpu}"),
            id="taint-before-affinity",
        ),
        pytest.param(
            make_reservation("r").spec(taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]),
            {},
            (Verdict.USABLE, ""),
            id="prefer-no-schedule-taint-ignored",
        ),
        pytest.param(make_reservation("r"), {"affinity_ok": False}, (Verdict.AFFINITY, ""), id="affinity"),
        pytest.param(make_reservation("r"), {"exact_ok": False}, (Verdict.NOT_EXACT, ""), id="not-exact"),
    ],
)
def test_classify(reservation: object, kwargs: dict[str, object], want: tuple[Verdict, str]) -> None:
    args: dict[str, object] = {"wanted_name": "", "tolerations": (), "affinity_ok": True, "exact_ok": True}
    args.update(kwargs)
    record = reservation.build()  # type: ignore[attr-defined]
    assert classify(record, **args) == want  # type: ignore[arg-type]


def test_taint_text_matches_koordinator() -> None:
    from koord_scheduler.plugins.reservation.postfilter import taint_text

    assert taint_text(Taint("k", TaintEffect.NO_SCHEDULE, "v")) == "{k: v}"


async def test_owner_pod_failure_message_says_why_reservations_did_not_fit() -> None:
    nodes = [make_node(n).capacity(cpu="4", memory="16Gi", pods=110).build() for n in ("n1", "n2")]
    r = await run(
        nodes,
        [
            make_reservation("locked").req(cpu="1").owner_labels(app="web").spec(unschedulable=True).available("n1"),
            make_reservation("small").req(cpu="1").owner_labels(app="web").available("n2"),
            make_reservation("other").req(cpu="1").owner_labels(app="db").available("n2"),
        ],
        [make_pod("w").req(cpu="8").label("app", "web").build()],
        profile=PROFILE_WITH_POSTFILTER,
    )
    assert r.node_of("w") == ""
    messages = [e.message for e in r.cluster.events if e.object_key == "default/w" and e.reason == "FailedScheduling"]
    assert messages, r.cluster.events
    assert messages[-1].endswith(
        "1 Reservation(s) is unschedulable, 1 Reservation(s) for node reason that Insufficient cpu, "
        "2 Reservation(s) matched owner total"
    ), messages[-1]


async def test_pod_without_reservations_gets_the_plain_fit_error() -> None:
    nodes = [make_node("n1").capacity(cpu="4", memory="16Gi", pods=110).build()]
    r = await run(
        nodes,
        [make_reservation("other").req(cpu="1").owner_labels(app="db").available("n1")],
        [make_pod("w").req(cpu="8").build()],
        profile=PROFILE_WITH_POSTFILTER,
    )
    messages = [e.message for e in r.cluster.events if e.object_key == "default/w" and e.reason == "FailedScheduling"]
    assert messages and "Reservation(s)" not in messages[-1], messages


async def test_named_reservation_reports_name_mismatch() -> None:
    nodes = [make_node("n1").capacity(cpu="4", memory="16Gi", pods=110).build()]
    r = await run(
        nodes,
        [
            make_reservation("a").req(cpu="1").owner_labels(app="web").available("n1"),
            make_reservation("b").req(cpu="1").owner_labels(app="web").available("n1"),
        ],
        [
            make_pod("w")
            .req(cpu="8")
            .label("app", "web")
            .annotation(ANNOTATION_RESERVATION_AFFINITY, json.dumps({"name": "a"}))
            .build()
        ],
        profile=PROFILE_WITH_POSTFILTER,
    )
    messages = [e.message for e in r.cluster.events if e.object_key == "default/w" and e.reason == "FailedScheduling"]
    assert messages and "1 Reservation(s) didn't match the requested reservation name" in messages[-1], messages
    assert "2 Reservation(s) matched owner total" in messages[-1]
