"""NodeResourcesFit honours RESTORED_CAPACITY (capacity reserved for this pod) in Filter."""

import numpy as np
import pytest

from apis.config.plugin_args import NodeResourcesFitArgs
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.extender import RESTORED_CAPACITY, RestoredCapacity
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
