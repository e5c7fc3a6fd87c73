"""NodeUnschedulable: mask policy, batch Filter, cache invalidation, queueing hints."""

from __future__ import annotations

import numpy as np
import pytest

from apis.core.types import Node, ObjectMeta, Pod, TaintEffect, Toleration
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import QueueingHint
from koord_scheduler.plugins.nodeunschedulable import plugin as nodeunschedulable
from koord_scheduler.plugins.nodeunschedulable.policy import (
    tolerates_unschedulable,
    unschedulable_flags,
    unschedulable_mask,
)
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot

REJECTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) were unschedulable",))
UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"


def node(name: str, *, cordoned: bool = False) -> Node:
    return Node(ObjectMeta(name), unschedulable=cordoned)


def pod(*tolerations: Toleration) -> Pod:
    return Pod(ObjectMeta("p", "default", uid="p"), tolerations=tolerations)


@pytest.mark.parametrize(
    ("tolerations", "want"),
    [
        pytest.param((), False, id="none"),
        pytest.param((Toleration(UNSCHEDULABLE_KEY, "Exists", effect=TaintEffect.NO_SCHEDULE),), True, id="exact"),
        pytest.param((Toleration(UNSCHEDULABLE_KEY, "Exists"),), True, id="any-effect"),
        pytest.param((Toleration(operator="Exists"),), True, id="tolerate-everything"),
        pytest.param(
            (Toleration(UNSCHEDULABLE_KEY, "Exists", effect=TaintEffect.NO_EXECUTE),),
            False,
            id="wrong-effect",
        ),
        pytest.param((Toleration("other", "Exists"),), False, id="other-key"),
    ],
)
def test_tolerates_unschedulable(tolerations: tuple[Toleration, ...], want: bool) -> None:
    assert tolerates_unschedulable(tolerations) is want


@pytest.mark.parametrize(
    ("nodes", "positions", "tolerated", "want"),
    [
        pytest.param([(0, False), (1, True), (2, False)], [0, 1, 2], False, [True, False, True], id="cordoned"),
        pytest.param([(0, False), (1, True)], [1, 0], True, [True, True], id="tolerated"),
        pytest.param([(0, False), (1, False)], [0, 1], False, [True, True], id="none-cordoned"),
        pytest.param([(3, True)], [3, 2], False, [False, True], id="position-order-kept"),
    ],
)
def test_unschedulable_mask(
    nodes: list[tuple[int, bool]], positions: list[int], tolerated: bool, want: list[bool]
) -> None:
    schedulable = ~unschedulable_flags(nodes, capacity=4)
    got = unschedulable_mask(schedulable, np.array(positions, dtype=np.intp), tolerated=tolerated)
    assert got.tolist() == want


@pytest.mark.parametrize(
    ("incoming", "want"),
    [
        pytest.param(pod(), {"a": Status(), "b": REJECTED, "c": Status()}, id="cordoned-node-rejects"),
        pytest.param(
            pod(Toleration(UNSCHEDULABLE_KEY, "Exists", effect=TaintEffect.NO_SCHEDULE)),
            {"a": Status(), "b": Status(), "c": Status()},
            id="toleration-admits",
        ),
    ],
)
def test_filter(incoming: Pod, want: dict[str, Status]) -> None:
    snap = make_snapshot([node("a"), node("b", cordoned=True), node("c")])
    assert filter_statuses(nodeunschedulable.new(None, FakeHandle(snap)), incoming, snap) == want


def test_cache_follows_spec_changes() -> None:
    snap = make_snapshot([node("a"), node("b")])
    plugin = nodeunschedulable.NodeUnschedulable()
    assert filter_statuses(plugin, pod(), snap) == {"a": Status(), "b": Status()}
    snap.upsert_node(node("b", cordoned=True))
    assert filter_statuses(plugin, pod(), snap) == {"a": Status(), "b": REJECTED}
    snap.upsert_node(node("b"))
    snap.upsert_node(node("a", cordoned=True))
    assert filter_statuses(plugin, pod(), snap) == {"a": REJECTED, "b": Status()}


@pytest.mark.parametrize(
    ("old", "new", "waiting", "want"),
    [
        pytest.param(node("a", cordoned=True), node("a"), pod(), QueueingHint.QUEUE, id="uncordoned"),
        pytest.param(None, node("a"), pod(), QueueingHint.QUEUE, id="schedulable-node-added"),
        pytest.param(node("a"), node("a"), pod(), QueueingHint.SKIP, id="was-already-schedulable"),
        pytest.param(None, node("a", cordoned=True), pod(), QueueingHint.SKIP, id="cordoned-node-added"),
        pytest.param(
            None,
            node("a", cordoned=True),
            pod(Toleration(UNSCHEDULABLE_KEY, "Exists")),
            QueueingHint.QUEUE,
            id="cordoned-but-tolerated",
        ),
    ],
)
def test_node_hint(old: Node | None, new: Node, waiting: Pod, want: QueueingHint) -> None:
    assert nodeunschedulable.is_schedulable_after_node_change(waiting, old, new) == want


def test_pod_toleration_hint() -> None:
    tolerating = pod(Toleration(UNSCHEDULABLE_KEY, "Exists"))
    assert nodeunschedulable.is_schedulable_after_pod_toleration_change(pod(), pod(), tolerating) == (
        QueueingHint.QUEUE
    )
    assert nodeunschedulable.is_schedulable_after_pod_toleration_change(pod(), pod(), pod()) == QueueingHint.SKIP
