"""Job-level preemption's pure decisions, by hand-computed cases (Koordinator's rules)."""

from __future__ import annotations

import pytest

from apis.core.types import Pod
from koord_scheduler.plugins.coscheduling import preemption_policy as policy
from tests.builders import make_pod

JOB = policy.LABEL_QUESTIONED_OBJECT_KEY


def p(name: str, prio: int, job: str = "") -> Pod:
    b = make_pod(name).priority(prio)
    if job:
        b = b.label(JOB, job)
    return b.build()


@pytest.mark.parametrize(
    ("victims", "want"),
    [
        pytest.param({"a": [p("x", 0)], "b": [p("y", 10)]}, {"a": 0, "b": 1}, id="rank-of-priority"),
        pytest.param(
            {"a": [p("x", 0, "j1"), p("y", 10, "j1")], "b": [p("z", 10, "j2"), p("w", 10, "j3")]},
            {"a": 0, "b": 2},
            id="one-cost-per-job-first-pod-counts",
        ),
        pytest.param({"a": [p("x", 5), p("y", 7)]}, {"a": 0}, id="pods-without-job-share-one-key"),
    ],
)
def test_preemption_costs(victims: dict[str, list[Pod]], want: dict[str, int]) -> None:
    assert policy.preemption_costs(victims) == want


@pytest.mark.parametrize(
    ("feasible", "costs", "want"),
    [
        pytest.param(["b", "a"], {"a": 1, "b": 1}, "a", id="tie-first-by-name"),
        pytest.param(["a", "b"], {"a": 2, "b": 1}, "b", id="cheapest"),
        pytest.param(["c"], {}, "c", id="no-cost-known"),
    ],
)
def test_pick_node(feasible: list[str], costs: dict[str, int], want: str) -> None:
    assert policy.pick_node(feasible, costs) == want


def test_victim_order_priority_desc_then_job_then_name() -> None:
    pods = [p("b", 1, "j2"), p("a", 1, "j2"), p("c", 1, "j1"), p("d", 9, "j9")]
    assert [x.name for x in sorted(pods, key=policy.victim_order_key)] == ["d", "c", "a", "b"]


@pytest.mark.parametrize(
    ("victim", "job", "want"),
    [
        pytest.param(p("v", 5), (), True, id="lower-priority"),
        pytest.param(p("v", 10), (), False, id="equal-priority"),
        pytest.param(p("v", 5), ("default/v",), False, id="own-job"),
        pytest.param(
            make_pod("v").priority(5).label(policy.LABEL_DISABLE_PREEMPTIBLE, "true").build(),
            (),
            False,
            id="disable-preemptible",
        ),
        pytest.param(
            make_pod("v").priority(5).annotation("scheduling.koordinator.sh/reserve-pod", "true").build(),
            (),
            False,
            id="reserve-pod",
        ),
    ],
)
def test_is_possible_victim(victim: Pod, job: tuple[str, ...], want: bool) -> None:
    assert policy.is_possible_victim(victim, p("t", 10), job) is want


def test_disruption_target_patch_names_job_and_trigger() -> None:
    patch = policy.disruption_target_patch(
        p("v", 0), scheduler_name="koord-scheduler", preemptor="ns/g", trigger="ns/g-0", now=0.0
    )
    assert patch == {
        "status": {
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": "koord-scheduler: preempting to accommodate higher priority pods, preemptor: ns/g, "
                    "triggerPod: ns/g-0",
                    "lastTransitionTime": "1970-01-01T00:00:00Z",
                }
            ]
        }
    }


def test_fit_error_message_counts_unrecorded_nodes_as_not_helpful() -> None:
    from koord_scheduler.framework.status import unschedulable

    got = policy.fit_error_message(3, [unschedulable("Insufficient cpu")])
    assert got == "0/3 nodes are available: 1 Insufficient cpu, 2 Preemption is not helpful for scheduling."
