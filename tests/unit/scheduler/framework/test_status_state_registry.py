from __future__ import annotations

import numpy as np
import pytest

from koord_scheduler.framework.cycle_state import CycleState, StateKey
from koord_scheduler.framework.diagnosis import Diagnosis, FailureChunk, fit_error_message
from koord_scheduler.framework.errors import RegistryError
from koord_scheduler.framework.registry import PluginSpec, Registry
from koord_scheduler.framework.status import Code, Status, error, unresolvable, unschedulable


@pytest.mark.parametrize(
    ("status", "want_rejected", "want_message"),
    [
        pytest.param(Status(), False, "", id="success"),
        pytest.param(
            unschedulable("Insufficient cpu", "Insufficient memory"),
            True,
            "Insufficient cpu, Insufficient memory",
            id="unschedulable-joins-reasons",
        ),
        pytest.param(
            unresolvable("node(s) didn't match the requested node name"),
            True,
            "node(s) didn't match the requested node name",
            id="unresolvable",
        ),
        pytest.param(Status(Code.PENDING, ("waiting",)), True, "waiting", id="pending-is-rejected"),
        pytest.param(error("boom"), False, "boom", id="error-not-rejected"),
    ],
)
def test_status_classification(status: Status, want_rejected: bool, want_message: str) -> None:
    assert status.is_rejected == want_rejected
    assert status.message == want_message


def test_with_plugin_stamps_name_without_mutating() -> None:
    original = unschedulable("x")
    stamped = original.with_plugin("NodePorts")
    assert stamped.plugin == "NodePorts"
    assert original.plugin == ""
    assert str(stamped) == "UNSCHEDULABLE from NodePorts: x"


def test_cycle_state_typed_keys_and_clone() -> None:
    key: StateKey[list[int]] = StateKey("k")
    state = CycleState()
    state.write(key, [1])
    state.skip_filter.add("A")
    clone = state.clone()
    clone.skip_filter.add("B")
    assert clone.read(key) == [1]
    assert state.skip_filter == {"A"}
    with pytest.raises(KeyError, match="cycle state has no 'missing'"):
        state.read(StateKey[int]("missing"))
    assert state.get(StateKey[int]("missing")) is None


class _Named:
    name = "A"


def _factory(args: object, handle: object) -> _Named:
    return _Named()


def test_registry_merge_refuses_duplicates() -> None:
    a = Registry([PluginSpec("A", _factory)])
    b = Registry([PluginSpec("B", _factory)])
    merged = a.merge(b)
    assert merged.names() == ["A", "B"]
    assert a.names() == ["A"], "merge must not mutate its inputs"
    with pytest.raises(RegistryError, match="'A' already exists"):
        merged.merge(Registry([PluginSpec("A", _factory)]))
    with pytest.raises(RegistryError, match="'Z' does not exist"):
        merged.get("Z")


def test_fit_error_message_sorts_counted_reasons_bytewise() -> None:
    diagnosis = Diagnosis(num_all_nodes=12)
    cpu = unschedulable("Insufficient cpu").with_plugin("NodeResourcesFit")
    both = unschedulable("Insufficient cpu", "Insufficient memory").with_plugin("NodeResourcesFit")
    taint = unresolvable("node(s) had untolerated taint(s)").with_plugin("TaintToleration")
    diagnosis.add_chunk(FailureChunk(np.arange(10), np.array([0] * 9 + [1]), (cpu, both)))
    diagnosis.add_chunk(FailureChunk(np.array([10, 11]), None, (taint,)))
    assert fit_error_message(diagnosis) == (
        "0/12 nodes are available: 1 Insufficient memory, 10 Insufficient cpu, 2 node(s) had untolerated taint(s)."
    )
    assert diagnosis.unschedulable_plugins == {"NodeResourcesFit", "TaintToleration"}


def test_fit_error_message_prefilter_and_postfilter() -> None:
    diagnosis = Diagnosis(
        num_all_nodes=3,
        pre_filter_msg="pod affinity terms conflict",
        post_filter_msg="No preemption victims found for incoming pod.",
    )
    assert fit_error_message(diagnosis) == (
        "0/3 nodes are available: pod affinity terms conflict. No preemption victims found for incoming pod."
    )
