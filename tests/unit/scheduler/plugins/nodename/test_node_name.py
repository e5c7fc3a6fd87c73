"""NodeName Filter."""

from __future__ import annotations

import numpy as np
import pytest

from apis.core.types import Node, ObjectMeta, Pod
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import QueueingHint
from koord_scheduler.plugins.nodename import plugin as nodename
from koord_scheduler.plugins.nodename.policy import node_name_mask
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot

REJECTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match the requested node name",))
NODES = [Node(ObjectMeta(n)) for n in ("n1", "n2", "n3")]


@pytest.mark.parametrize(
    ("positions", "requested", "wanted_position", "want"),
    [
        pytest.param([0, 1, 2], "", None, [True, True, True], id="no-node-name-any-node"),
        pytest.param([0, 1, 2], "n2", 1, [False, True, False], id="only-named-node"),
        pytest.param([2, 0], "n2", 1, [False, False], id="named-node-not-among-positions"),
        pytest.param([0, 1], "gone", None, [False, False], id="named-node-missing"),
    ],
)
def test_node_name_mask(positions: list[int], requested: str, wanted_position: int | None, want: list[bool]) -> None:
    got = node_name_mask(np.array(positions, dtype=np.intp), requested, wanted_position)
    assert got.tolist() == want


@pytest.mark.parametrize(
    ("node_name", "want"),
    [
        pytest.param("", {"n1": Status(), "n2": Status(), "n3": Status()}, id="unset-passes-all"),
        pytest.param("n2", {"n1": REJECTED, "n2": Status(), "n3": REJECTED}, id="set-matches-one"),
        pytest.param("nx", {"n1": REJECTED, "n2": REJECTED, "n3": REJECTED}, id="set-matches-none"),
    ],
)
def test_filter(node_name: str, want: dict[str, Status]) -> None:
    snap = make_snapshot(NODES)
    plugin = nodename.new(None, FakeHandle(snap))
    assert filter_statuses(plugin, Pod(ObjectMeta("p", "default"), node_name=node_name), snap) == want


@pytest.mark.parametrize(
    ("node_name", "new", "want"),
    [
        pytest.param("n2", Node(ObjectMeta("n2")), QueueingHint.QUEUE, id="named-node-added"),
        pytest.param("n2", Node(ObjectMeta("n1")), QueueingHint.SKIP, id="other-node-added"),
        pytest.param("", Node(ObjectMeta("n1")), QueueingHint.QUEUE, id="no-node-name"),
    ],
)
def test_hint(node_name: str, new: Node, want: QueueingHint) -> None:
    pod = Pod(ObjectMeta("p", "default"), node_name=node_name)
    assert nodename.is_schedulable_after_node_change(pod, None, new) == want
