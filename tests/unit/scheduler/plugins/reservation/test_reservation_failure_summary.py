"""A pod with reservation affinity that fails gets a reservation-level summary Event (Koordinator's
reservation error handler), besides the node-level FailedScheduling."""

import json

import pytest

from apis.scheduling import ANNOTATION_RESERVATION_AFFINITY
from koord_scheduler.plugins.reservation import policy
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import make_reservation, run


@pytest.mark.parametrize(
    ("total", "reasons", "want"),
    [
        pytest.param(0, {}, "0/0 reservations are available.", id="none"),
        pytest.param(
            3,
            {"didn't match owner": 2, "didn't fit the pod": 1},
            "0/3 reservations are available: 1 Reservation(s) didn't fit the pod, 2 Reservation(s) didn't match owner.",
            id="sorted-by-reason",
        ),
    ],
)
def test_reservations_summary(total: int, reasons: dict[str, int], want: str) -> None:
    assert policy.reservations_summary(total, reasons) == want


async def test_affinity_pod_failure_gets_reservation_summary_event() -> None:
    nodes = [make_node(n).capacity(cpu="4", memory="16Gi", pods=110).build() for n in ("n1", "n2")]
    r = await run(
        nodes,
        [
            make_reservation("small").req(cpu="1").owner_labels(app="web").node("n1"),
            make_reservation("other").req(cpu="1").owner_labels(app="db").node("n2"),
        ],
        [
            make_pod("w")
            .req(cpu="5")
            .label("app", "web")
            .annotation(ANNOTATION_RESERVATION_AFFINITY, json.dumps({"name": "small"}))
            .build()
        ],
    )
    await r.plugin.drain()
    assert r.node_of("w") == ""
    summaries = [e.message for e in r.cluster.events if e.object_key == "default/w" and "reservations are" in e.message]
    assert summaries == [
        "0/2 reservations are available: 1 Reservation(s) didn't fit the pod, 1 Reservation(s) didn't match owner."
    ]
