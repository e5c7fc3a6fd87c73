"""NodeResourcesFit and NodePorts honour RESTORED_CAPACITY (capacity, pod slots and host ports reserved for
this pod) in Filter."""

import numpy as np
import pytest

from apis.config.plugin_args import NodeResourcesFitArgs
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.restored import RESTORED_CAPACITY, RestoredCapacity
from koord_scheduler.plugins.nodeports.plugin import NodePorts
from koord_scheduler.plugins.noderesources.plugin import Fit
from tests.builders import make_node, make_pod
from tests.fwtest import filter_statuses, make_snapshot


def _snapshot():
    nodes = [make_node(n).capacity(cpu="4", memory="8Gi", pods=110).build() for n in ("n1", "n2", "n3")]
    used = [make_pod(f"u-{n}").req(cpu="3").node(n).build() for n in ("n1", "n2", "n3")]
    return make_snapshot(nodes, used)


@pytest.mark.parametrize(
    ("restored", "want_pass"),
    [
        pytest.param(None, set(), id="no-key"),
        pytest.param({"n1": 1000}, {"n1"}, id="restored-enough"),
        pytest.param({"n1": 500}, set(), id="restored-too-little"),
        pytest.param({"n2": 2000, "n3": 1000}, {"n2", "n3"}, id="several-nodes"),
    ],
)
def test_filter_with_restored_capacity(restored: dict[str, int] | None, want_pass: set[str]) -> None:
    snap = _snapshot()
    pod = make_pod("p").req(cpu="2").build()
    state = CycleState()
    if restored is not None:
        positions = np.array([snap.positions[n] for n in restored], dtype=np.intp)
        amounts = np.zeros((len(restored), len(snap.resource_names)), dtype=np.int64)
        amounts[:, 0] = list(restored.values())
        state.write(RESTORED_CAPACITY, RestoredCapacity(positions, amounts))
    got = filter_statuses(Fit(NodeResourcesFitArgs()), pod, snap, state)
    assert {n for n, s in got.items() if s.is_success} == want_pass
    if "n1" not in want_pass:
        assert got["n1"].reasons == ("Insufficient cpu",)


@pytest.mark.parametrize(
    ("slots", "want_pass"),
    [
        pytest.param(None, False, id="no-slots-node-full"),
        pytest.param([0], False, id="zero-slots"),
        pytest.param([1], True, id="reservation-slot-reused"),
    ],
)
def test_filter_with_restored_pod_slots(slots: list[int] | None, want_pass: bool) -> None:
    """Koordinator's ``pods - matched + 1 <= allowed``: the reservation's pseudo-pod slot is the owner's."""
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods=2).build()
    snap = make_snapshot([node], [make_pod(f"u{i}").req(cpu="1").node("n1").build() for i in range(2)])
    state = CycleState()
    amounts = np.zeros((1, len(snap.resource_names)), dtype=np.int64)
    pod_slots = None if slots is None else np.array(slots, dtype=np.int64)
    state.write(RESTORED_CAPACITY, RestoredCapacity(np.array([0], dtype=np.intp), amounts, pod_slots=pod_slots))
    got = filter_statuses(Fit(NodeResourcesFitArgs()), make_pod("p").req(cpu="1").build(), snap, state)
    assert got["n1"].is_success is want_pass
    if not want_pass:
        assert got["n1"].reasons == ("Too many pods",)


PORT_8080 = ("0.0.0.0", "TCP", 8080)


@pytest.mark.parametrize(
    ("users", "held", "want_pass"),
    [
        pytest.param(1, None, False, id="no-restored-ports"),
        pytest.param(1, {PORT_8080}, True, id="reserved-port-is-the-owners"),
        pytest.param(2, {PORT_8080}, False, id="another-pod-uses-it-too"),
        pytest.param(1, {("0.0.0.0", "TCP", 9090)}, False, id="other-port-held"),
    ],
)
def test_node_ports_with_restored_ports(users: int, held: set[tuple[str, str, int]] | None, want_pass: bool) -> None:
    """``users`` pods hold 8080 on n1; the first stands for the reservation's holding pod."""
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods=110).build()
    snap = make_snapshot([node], [make_pod(f"u{i}").host_port(8080).node("n1").build() for i in range(users)])
    state = CycleState()
    if held is not None:
        amounts = np.zeros((1, len(snap.resource_names)), dtype=np.int64)
        state.write(
            RESTORED_CAPACITY, RestoredCapacity(np.array([0], dtype=np.intp), amounts, ports={0: frozenset(held)})
        )
    pod = make_pod("p").host_port(8080).build()
    plugin = NodePorts()
    plugin.pre_filter(state, pod, snap)
    got = filter_statuses(plugin, pod, snap, state)
    assert got["n1"].is_success is want_pass
