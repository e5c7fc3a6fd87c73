"""An owner pod matched by several Reservations lands in the one with the lowest ``reservation-order``
(Koordinator's ``scoring.go``): a migration's replacement pod goes into the oldest migration's
Reservation, not into one whose job has not evicted its pod yet."""

from __future__ import annotations

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import make_reservation, run

ORDER = "scheduling.koordinator.sh/reservation-order"


async def test_replacement_lands_in_the_lowest_order_reservation() -> None:
    nodes = [make_node(n).capacity(cpu="8", memory="16Gi", pods=110).build() for n in ("n1", "n2", "n3")]
    newer = make_reservation("newer").req(cpu="2").owner_labels(app="web").label(ORDER, "1800000002000")
    older = make_reservation("older").req(cpu="2").owner_labels(app="web").label(ORDER, "1800000001000")
    r = await run(
        nodes,
        [newer.available("n1"), older.available("n2")],
        [make_pod("web-1").req(cpu="2").label("app", "web").build()],
    )
    assert r.node_of("web-1") == "n2"
    assert '"name":"older"' in r.cluster.pods["default/web-1"].annotations[ANNOTATION_RESERVATION_ALLOCATED].replace(
        " ", ""
    )


async def test_without_orders_the_tightest_reservation_wins() -> None:
    nodes = [make_node(n).capacity(cpu="8", memory="16Gi", pods=110).build() for n in ("n1", "n2")]
    loose = make_reservation("loose").req(cpu="4").owner_labels(app="web")
    tight = make_reservation("tight").req(cpu="2").owner_labels(app="web")
    r = await run(
        nodes,
        [loose.available("n1"), tight.available("n2")],
        [make_pod("web-1").req(cpu="2").label("app", "web").build()],
    )
    assert r.node_of("web-1") == "n2"
