"""Reservation preemption (``enablePreemption``): the victim rule, and reservations and owner pods that
preempt through the whole in-memory scheduler."""

from __future__ import annotations

import pytest

from apis.core.types import Node, Pod
from koord_scheduler.framework.status import Code, Status, unresolvable, unschedulable
from koord_scheduler.plugins.reservation.preemption import is_victim, settles
from tests.builders import make_node, make_pod
from tests.unit.scheduler.plugins.reservation.harness import make_reservation, run

IGNORED = "scheduling.koordinator.sh/reservation-ignored"
DISABLE = "scheduling.koordinator.sh/disable-preemptible"
RESERVE = "scheduling.koordinator.sh/reserve-pod"

PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: default-scheduler
  plugins:
    preFilter: {enabled: [{name: Reservation}]}
    filter: {enabled: [{name: Reservation}]}
    postFilter: {disabled: [{name: "*"}], enabled: [{name: Reservation}]}
    preScore: {enabled: [{name: Reservation}]}
    score: {enabled: [{name: Reservation, weight: 5000}]}
    reserve: {enabled: [{name: Reservation}]}
    preBind: {enabled: [{name: Reservation}]}
    bind:
      disabled: [{name: "*"}]
      enabled: [{name: Reservation}, {name: DefaultBinder}]
  pluginConfig:
  - name: Reservation
    args: {enablePreemption: %s}
"""


def victim(priority: int, *, labels: dict[str, str] | None = None, reserve: bool = False) -> Pod:
    b = make_pod("v").priority(priority).labels(labels or {})
    if reserve:
        b = b.annotation(RESERVE, "true")
    return b.build()


@pytest.mark.parametrize(
    ("candidate", "preemptor_priority", "want"),
    [
        pytest.param(victim(10), 100, True, id="lower-priority"),
        pytest.param(victim(100), 100, False, id="equal-priority"),
        pytest.param(victim(200), 100, False, id="higher-priority"),
        pytest.param(victim(10, labels={DISABLE: "true"}), 100, False, id="disable-preemptible"),
        pytest.param(victim(10, labels={DISABLE: "false"}), 100, True, id="disable-preemptible-false"),
        pytest.param(victim(10, labels={IGNORED: "true"}), 100, False, id="reservation-ignored"),
        pytest.param(victim(10, labels={IGNORED: "false"}), 100, True, id="reservation-ignored-false"),
        pytest.param(victim(10, reserve=True), 100, False, id="reserve-pod"),
    ],
)
def test_victim_rule(candidate: Pod, preemptor_priority: int, want: bool) -> None:
    preemptor = make_pod("p").priority(preemptor_priority).build()
    assert is_victim(candidate, preemptor) is want


@pytest.mark.parametrize(
    ("status", "want"),
    [
        pytest.param(Status(), True, id="success"),
        pytest.param(unresolvable("x"), True, id="unresolvable"),
        pytest.param(Status(Code.ERROR, ("boom",)), True, id="error"),
        pytest.param(unschedulable("x"), False, id="unschedulable"),
    ],
)
def test_which_preemption_answers_stand(status: Status, want: bool) -> None:
    assert settles(status) is want


def one_node(cpu: str = "4") -> list[Node]:
    return [make_node("n1").capacity(cpu=cpu, memory="16Gi", pods=110).build()]


def low(name: str, cpu: str, **labels: str) -> Pod:
    return make_pod(name).req(cpu=cpu).priority(10).labels(labels).node("n1").build()


async def test_reservation_preempts_a_lower_priority_pod_and_becomes_available() -> None:
    r = await run(
        one_node(),
        [make_reservation("r1").req(cpu="3").owner_labels(app="web")],
        [low("low", "2")],
        profile=PROFILE % "true",
    )
    assert "default/low" not in r.cluster.pods
    assert [e.reason for e in r.cluster.events if e.object_key == "default/low"] == ["Preempted"]
    rec = r.reservation("r1")
    assert (rec.phase, rec.node_name) == ("Available", "n1")


async def test_without_the_arg_the_reservation_stays_pending() -> None:
    r = await run(
        one_node(),
        [make_reservation("r1").req(cpu="3").owner_labels(app="web")],
        [low("low", "2")],
        profile=PROFILE % "false",
    )
    assert "default/low" in r.cluster.pods
    assert r.reservation("r1").phase == "Pending"


@pytest.mark.parametrize("label", [IGNORED, DISABLE])
async def test_protected_pods_are_never_victims(label: str) -> None:
    r = await run(
        one_node(),
        [make_reservation("r1").req(cpu="3").owner_labels(app="web")],
        [low("low", "2", **{label: "true"})],
        profile=PROFILE % "true",
    )
    assert "default/low" in r.cluster.pods
    rec = r.reservation("r1")
    assert rec.phase == "Pending"
    cond = rec.condition("Scheduled")
    assert cond is not None and "preemption: " in cond[3], cond


async def test_owner_pod_preempts_and_keeps_the_reservation_reasons_when_it_cannot() -> None:
    """An ordinary pod preempts through the Reservation PostFilter too; where nothing can be preempted,
    its message carries the preemption's reason and then the reservation reasons."""
    r = await run(
        one_node(),
        [make_reservation("r1").req(cpu="1").owner_labels(app="web").node("n1")],
        [
            low("low", "2"),
            make_pod("web-0").req(cpu="3").priority(100).label("app", "web").build(),
            make_pod("web-1").req(cpu="9").priority(100).label("app", "web").build(),
        ],
        profile=PROFILE % "true",
    )
    assert r.node_of("web-0") == "n1" and "default/low" not in r.cluster.pods
    message = r.scheduler.outcomes["default/web-1"].message
    assert "preemption: " in message and "Reservation(s) matched owner total" in message, message
