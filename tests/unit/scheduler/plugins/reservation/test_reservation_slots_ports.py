"""An owner takes over its reservation's pod slot and host ports (Koordinator's ``pods - matched + 1`` and
the reserve pod's ports given back in restore); nobody else can."""

import json

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import Run, make_reservation, run


def node(pods: int):
    return make_node("n1").capacity(cpu="8", memory="16Gi", pods=pods).build()


def allocated_to(r: Run, pod: str) -> str | None:
    text = r.cluster.pods[f"default/{pod}"].annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    return json.loads(text)["name"] if text else None


async def test_owner_fits_a_node_at_its_pod_limit_through_the_reservation_slot() -> None:
    r = await run(
        [node(pods=3)],
        [make_reservation("r").req(cpu="1").owner_labels(app="web")],
        [
            make_pod("f0").node("n1").build(),
            make_pod("f1").node("n1").build(),
            make_pod("stranger").build(),
            make_pod("w").req(cpu="1").label("app", "web").build(),
        ],
    )
    assert (r.node_of("w"), allocated_to(r, "w")) == ("n1", "r")
    assert r.node_of("stranger") == ""
    assert "Too many pods" in r.scheduler.outcomes["default/stranger"].message


async def test_the_slot_is_reused_not_multiplied() -> None:
    """pods=3, one filler, a 2-CPU reservation (allocateOnce false): two 1-CPU owners make three real pods;
    a third owner would be the fourth."""
    r = await run(
        [node(pods=3)],
        [make_reservation("r").req(cpu="2").owner_labels(app="web").spec(allocateOnce=False)],
        [make_pod("f0").node("n1").build()]
        + [make_pod(f"w{i}").req(cpu="1").label("app", "web").build() for i in range(3)],
    )
    assert [r.node_of(f"w{i}") for i in range(3)] == ["n1", "n1", ""]
    assert "Too many pods" in r.scheduler.outcomes["default/w2"].message


async def test_owner_uses_the_reserved_host_port_once() -> None:
    r = await run(
        [node(pods=110)],
        [make_reservation("r").req(cpu="2").host_port(8080).owner_labels(app="web").spec(allocateOnce=False)],
        [
            make_pod("stranger").host_port(8080).build(),
            make_pod("w0").req(cpu="1").host_port(8080).label("app", "web").build(),
            make_pod("w1").req(cpu="1").host_port(8080).label("app", "web").build(),
        ],
    )
    assert (r.node_of("w0"), allocated_to(r, "w0")) == ("n1", "r")
    assert r.node_of("stranger") == "" and r.node_of("w1") == ""
    assert "free ports" in r.scheduler.outcomes["default/w1"].message
