"""``ReservationArgs.ignoredResources`` / ``ignoredResourceGroups``: the reservation fit check skips those
extended resources (Koordinator ``isResourceIgnored``)."""

from __future__ import annotations

import json

import pytest

from apis.scheduling import ANNOTATION_RESERVATION_ALLOCATED
from koord_scheduler.plugins.reservation.policy import is_ignored
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import PROFILE, make_reservation, run

GPU = "example.com/gpu"


@pytest.mark.parametrize(
    ("resource", "resources", "groups", "want"),
    [
        pytest.param(GPU, {GPU}, set(), True, id="listed"),
        pytest.param(GPU, set(), {"example.com"}, True, id="group"),
        pytest.param(GPU, set(), {"example"}, False, id="group-must-be-whole-prefix"),
        pytest.param("example.com/fpga", {GPU}, set(), False, id="other-resource"),
        pytest.param("cpu", set(), {"cpu"}, False, id="no-prefix"),
        pytest.param("/gpu", set(), {""}, False, id="empty-prefix"),
        pytest.param(GPU, set(), set(), False, id="nothing-ignored"),
    ],
)
def test_is_ignored(resource: str, resources: set[str], groups: set[str], want: bool) -> None:
    assert is_ignored(resource, frozenset(resources), frozenset(groups)) is want


def profile(args: str) -> str:
    return (
        PROFILE
        + f"""  pluginConfig:
  - name: Reservation
    args: {{{args}}}
"""
    )


@pytest.mark.parametrize(
    ("args", "in_reservation"),
    [
        pytest.param("", False, id="checked"),
        pytest.param(f"ignoredResources: [{GPU}]", True, id="ignoredResources"),
        pytest.param("ignoredResourceGroups: [example.com]", True, id="ignoredResourceGroups"),
    ],
)
async def test_restricted_reservation_skips_ignored_resources(args: str, in_reservation: bool) -> None:
    """A Restricted reservation holds 1 GPU; the owner asks for 2. Checked, the reservation cannot take
    it; with the GPU ignored the reservation is used (the node still has the GPUs)."""
    nodes = [make_node("n1").capacity({"cpu": "4", "memory": "16Gi", "pods": "110", GPU: "4"}).build()]
    r = await run(
        nodes,
        [
            make_reservation("r")
            .req(cpu="2", **{GPU: "1"})
            .owner_labels(app="web")
            .spec(allocatePolicy="Restricted")
            .available("n1")
        ],
        [make_pod("w").req({"cpu": "1", GPU: "2"}).label("app", "web").build()],
        profile=profile(args),
    )
    assert r.node_of("w") == "n1"
    text = r.cluster.pods["default/w"].annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    assert (json.loads(text)["name"] if text else None) == ("r" if in_reservation else None)
