"""NodePorts: conflict rules (HostPortInfo.CheckConflict), PreFilter Skip, batch Filter, queueing hint."""

from __future__ import annotations

import numpy as np
import pytest

from apis.core.types import HostPort, Node, ObjectMeta, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import QueueingHint
from koord_scheduler.plugins.nodeports import plugin as nodeports
from koord_scheduler.plugins.nodeports.policy import (
    conflict_positions,
    conflicts,
    free_ports_mask,
    port_users,
)
from tests.fwtest import FakeHandle, filter_statuses, make_snapshot

REJECTED = Status(Code.UNSCHEDULABLE, ("node(s) didn't have free ports for the requested pod ports",))


def hp(port: int, protocol: str = "TCP", host_ip: str = "0.0.0.0") -> HostPort:
    return HostPort(port, protocol, host_ip)


def pod(name: str, *ports: HostPort, node_name: str = "") -> Pod:
    return Pod(ObjectMeta(name, "default", uid=name), node_name=node_name, host_ports=ports)


@pytest.mark.parametrize(
    ("used", "wanted", "want_conflict"),
    [
        pytest.param([("127.0.0.1", "TCP", 80)], hp(80), True, id="want-all-ips-vs-specific-ip"),
        pytest.param([("0.0.0.0", "TCP", 80)], hp(80, host_ip="127.0.0.1"), True, id="want-ip-vs-all-ips"),
        pytest.param([("127.0.0.1", "TCP", 80)], hp(80, host_ip="127.0.0.1"), True, id="same-ip"),
        pytest.param([("127.0.0.1", "TCP", 80)], hp(80, host_ip="127.0.0.2"), False, id="different-ips"),
        pytest.param([("0.0.0.0", "UDP", 80)], hp(80), False, id="different-protocol"),
        pytest.param([("0.0.0.0", "TCP", 8080)], hp(80), False, id="different-port"),
        pytest.param([("", "", 80)], hp(80, protocol="", host_ip=""), True, id="empty-ip-and-protocol-default"),
        pytest.param([("0.0.0.0", "TCP", 80)], hp(0), False, id="port-zero-never-conflicts"),
        pytest.param([], hp(80), False, id="nothing-used"),
    ],
)
def test_conflict_rules(used: list[tuple[str, str, int]], wanted: HostPort, want_conflict: bool) -> None:
    users = port_users([(7, used)])
    assert (conflict_positions(users, [wanted]) == {7}) is want_conflict


@pytest.mark.parametrize(
    ("used_ips", "wanted_ip", "want"),
    [
        pytest.param(["10.0.0.1"], "0.0.0.0", True, id="all-ips-collides-with-any"),
        pytest.param(["10.0.0.1"], "10.0.0.2", False, id="distinct-ips"),
        pytest.param(["0.0.0.0"], "10.0.0.2", True, id="any-ip-user-blocks-specific"),
        pytest.param([], "0.0.0.0", False, id="no-users"),
    ],
)
def test_conflicts(used_ips: list[str], wanted_ip: str, want: bool) -> None:
    assert conflicts(used_ips, wanted_ip) is want


def test_free_ports_mask() -> None:
    positions = np.array([3, 1, 2], dtype=np.intp)
    assert free_ports_mask(positions, {1}, 4).tolist() == [True, False, True]
    assert free_ports_mask(positions, set(), 4).tolist() == [True, True, True]


NODES = [Node(ObjectMeta(n)) for n in ("n1", "n2", "n3")]
RUNNING = [
    pod("web", hp(80), node_name="n1"),
    pod("dns", hp(53, "UDP", "10.0.0.2"), node_name="n2"),
]


@pytest.mark.parametrize(
    ("incoming", "want"),
    [
        pytest.param(pod("p", hp(80)), {"n1": REJECTED, "n2": Status(), "n3": Status()}, id="port-taken-on-n1"),
        pytest.param(
            pod("p", hp(53, "UDP")),
            {"n1": Status(), "n2": REJECTED, "n3": Status()},
            id="all-ips-vs-specific",
        ),
        pytest.param(
            pod("p", hp(53, "UDP", "10.0.0.3")),
            {"n1": Status(), "n2": Status(), "n3": Status()},
            id="other-ip-free",
        ),
        pytest.param(
            pod("p", hp(80), hp(53, "UDP")),
            {"n1": REJECTED, "n2": REJECTED, "n3": Status()},
            id="any-port-conflicts",
        ),
    ],
)
def test_filter(incoming: Pod, want: dict[str, Status]) -> None:
    snap = make_snapshot(NODES, RUNNING)
    assert filter_statuses(nodeports.new(None, FakeHandle(snap)), incoming, snap) == want


def test_pre_filter_skips_pod_without_host_ports() -> None:
    snap = make_snapshot(NODES, RUNNING)
    result, status = nodeports.NodePorts().pre_filter(CycleState(), pod("p"), snap)
    assert (result, status) == (None, Status(Code.SKIP))


def test_filter_sees_pods_added_after_first_use() -> None:
    snap = make_snapshot(NODES, RUNNING)
    plugin = nodeports.NodePorts()
    incoming = pod("p", hp(8080))
    assert filter_statuses(plugin, incoming, snap)["n3"] == Status()
    snap.add_pod(pod("late", hp(8080), node_name="n3"))
    assert filter_statuses(plugin, incoming, snap)["n3"] == REJECTED
    snap.remove_pod(pod("late", hp(8080), node_name="n3"))
    assert filter_statuses(plugin, incoming, snap)["n3"] == Status()


@pytest.mark.parametrize(
    ("deleted", "want"),
    [
        pytest.param(pod("web", hp(80), node_name="n1"), QueueingHint.QUEUE, id="held-wanted-port"),
        pytest.param(pod("web", hp(81), node_name="n1"), QueueingHint.SKIP, id="held-other-port"),
        pytest.param(pod("web", node_name="n1"), QueueingHint.SKIP, id="held-no-ports"),
        pytest.param(pod("web", hp(80)), QueueingHint.SKIP, id="was-not-assigned"),
    ],
)
def test_hint_pod_deleted(deleted: Pod, want: QueueingHint) -> None:
    assert nodeports.is_schedulable_after_pod_deleted(pod("p", hp(80)), deleted, None) == want
