import json

import pytest

from apis.core.types import Pod
from apis.scheduling import OwnerTerm, ReservationRecord, parse_reservation
from koord_scheduler.plugins.reservation.matching import (
    OwnerIndex,
    affinity_allows,
    index_keys,
    pod_intent,
    reservation_order,
)
from tests.builders import make_pod
from tests.unit.scheduler.plugins.reservation.harness import make_reservation

WEB = make_pod("web-0", "ns").label("app", "web").label("tier", "a").owner("ReplicaSet", "rs").build()


def _owners(*owners: dict) -> tuple[OwnerTerm, ...]:
    b = make_reservation("r")
    for o in owners:
        b.owner(o)
    return b.build().owners


@pytest.mark.parametrize(
    ("owners", "want"),
    [
        pytest.param(_owners({"object": {"name": "web-0", "namespace": "ns"}}), True, id="object-name-ns"),
        pytest.param(_owners({"object": {"name": "web-0"}}), True, id="object-name-any-ns"),
        pytest.param(_owners({"object": {"name": "web-0", "namespace": "other"}}), False, id="object-wrong-ns"),
        pytest.param(_owners({"object": {"uid": "uid-ns-web-0"}}), True, id="object-uid"),
        pytest.param(_owners({"object": {"uid": "nope"}}), False, id="object-wrong-uid"),
        pytest.param(
            _owners({"controller": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "uid-rs"}}),
            True,
            id="controller-uid",
        ),
        pytest.param(
            _owners(
                {
                    "controller": {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "rs",
                        "uid": "",
                        "namespace": "ns",
                    }
                }
            ),
            True,
            id="controller-name-kind",
        ),
        pytest.param(
            _owners({"controller": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "rs", "uid": ""}}),
            False,
            id="controller-wrong-kind",
        ),
        pytest.param(_owners({"labelSelector": {"matchLabels": {"app": "web"}}}), True, id="labels"),
        pytest.param(
            _owners({"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}}),
            True,
            id="expression-in",
        ),
        pytest.param(_owners({"labelSelector": {"matchLabels": {"app": "db"}}}), False, id="labels-mismatch"),
        pytest.param(
            _owners({"object": {"name": "web-0"}, "labelSelector": {"matchLabels": {"app": "db"}}}),
            False,
            id="and-inside-term",
        ),
        pytest.param(
            _owners({"object": {"name": "x"}}, {"labelSelector": {"matchLabels": {"app": "web"}}}),
            True,
            id="or-between-terms",
        ),
    ],
)
def test_owner_matching_dnf(owners: tuple[OwnerTerm, ...], want: bool) -> None:
    index = OwnerIndex()
    index.add("r", owners)
    assert index.match(WEB) == ({"r"} if want else set())


def test_owner_index_evaluates_shared_terms_once_and_skips_unrelated_pods() -> None:
    index = OwnerIndex()
    term = _owners({"labelSelector": {"matchLabels": {"app": "web"}}})
    for i in range(1000):
        index.add(f"r{i}", term)
    assert len(index.match(WEB)) == 1000
    assert index.match(make_pod("other").label("app", "db").build()) == set()
    index.remove("r0")
    assert "r0" not in index.match(WEB)


def test_unindexable_terms_are_always_checked() -> None:
    term = _owners({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}})
    assert index_keys(term[0]) == ()
    index = OwnerIndex()
    index.add("r", term)
    assert index.match(WEB) == {"r"}
    assert index.match(make_pod("x").build()) == set()


def _res(**spec: object) -> ReservationRecord:
    b = make_reservation("r1").owner_labels(app="web").label("pool", "a")
    b.spec(**spec)
    return b.build()


def _affinity_pod(affinity: dict | None, *, ignored: bool = False) -> Pod:
    b = make_pod("p").label("app", "web")
    if affinity is not None:
        b.annotation("scheduling.koordinator.sh/reservation-affinity", json.dumps(affinity))
    if ignored:
        b.label("scheduling.koordinator.sh/reservation-ignored", "true")
    return b.build()


@pytest.mark.parametrize(
    ("affinity", "reservation", "want"),
    [
        pytest.param(None, _res(), "", id="no-affinity"),
        pytest.param({"name": "r1"}, _res(), "", id="name-match"),
        pytest.param({"name": "r2"}, _res(), "name mismatch", id="name-mismatch"),
        pytest.param({"reservationSelector": {"pool": "a"}}, _res(), "", id="selector-reservation-label"),
        pytest.param({"reservationSelector": {"zone": "z1"}}, _res(), "", id="selector-node-label"),
        pytest.param(
            {"reservationSelector": {"pool": "b"}},
            _res(),
            "didn't match reservation affinity rules",
            id="selector-mismatch",
        ),
        pytest.param(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "reservationSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                    ]
                }
            },
            _res(),
            "",
            id="terms-match",
        ),
        pytest.param(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "reservationSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["a"]}]}
                    ]
                }
            },
            _res(),
            "didn't match reservation affinity rules",
            id="terms-mismatch",
        ),
        pytest.param(None, _res(unschedulable=True), "reservation is unschedulable", id="unschedulable"),
        pytest.param(
            {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]},
            _res(unschedulable=True),
            "",
            id="unschedulable-tolerated",
        ),
        pytest.param(
            None,
            _res(taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
            "reservation had untolerated taint {k: v}",
            id="taint",
        ),
        pytest.param(
            {"tolerations": [{"key": "k", "operator": "Equal", "value": "v"}]},
            _res(taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
            "",
            id="taint-tolerated",
        ),
    ],
)
def test_reservation_affinity(affinity: dict | None, reservation: ReservationRecord, want: str) -> None:
    intent = pod_intent(_affinity_pod(affinity))
    assert affinity_allows(intent.affinity, reservation, {"zone": "z1"}) == want


def test_pod_intent() -> None:
    assert pod_intent(_affinity_pod(None, ignored=True)).ignored
    bad = make_pod("p").annotation("scheduling.koordinator.sh/reservation-affinity", "{nope").build()
    assert pod_intent(bad).error.startswith("invalid reservation affinity")


@pytest.mark.parametrize(("value", "want"), [("3", 3), ("0", 0), ("x", 0), (None, 0), ("-2", 0)])
def test_reservation_order_label(value: str | None, want: int) -> None:
    b = make_reservation("r").owner_labels(app="x")
    if value is not None:
        b.label("scheduling.koordinator.sh/reservation-order", value)
    assert reservation_order(parse_reservation(b.obj())) == want
