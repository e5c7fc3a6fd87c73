"""Job-level preemption (Coscheduling ``enablePreemption``) end to end on the in-memory cluster: a gang
preempts as a unit or not at all, an ordinary pod still preempts, and the cheapest victims are chosen."""

from __future__ import annotations

import json

import pytest

from tests.unit.scheduler.plugins.coscheduling.gang_harness import ANN, Run, node, simulate

JOB_PREEMPTION = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    postFilter:
      disabled:
      - name: '*'
      enabled:
      - name: Coscheduling
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
"""


def pod(
    name: str,
    prio: int,
    *,
    cpu: str = "4",
    node_name: str = "",
    gang: str = "",
    min_available: int = 0,
    labels: dict[str, str] | None = None,
    never: bool = False,
) -> str:
    annotations = {ANN + "name": gang, ANN + "min-available": str(min_available)} if gang else {}
    spec: dict[str, object] = {
        "priority": prio,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if never:
        spec["preemptionPolicy"] = "Never"
    meta = {"name": name, "namespace": "default", "annotations": annotations, "labels": labels or {}}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


async def run(*objects: str) -> Run:
    return await simulate(*objects, config=JOB_PREEMPTION)


def survivors(r: Run, *names: str) -> set[str]:
    return {n for n in names if f"default/{n}" in r.cluster.pods}


async def test_gang_preempts_as_a_unit_and_binds_together() -> None:
    objects = [node(f"n{i}") for i in range(3)]
    objects += [pod(f"low{i}", 0, node_name=f"n{i}") for i in range(3)]
    objects += [pod(f"g{i}", 100, gang="g", min_available=3) for i in range(3)]
    r = await run(*objects)
    assert r.bound() >= {"g0", "g1", "g2"}
    assert survivors(r, "low0", "low1", "low2") == set()
    records = r.result.extra_sections["JobPreemptions"]
    assert len(records) == 1
    assert records[0]["preemptor"] == "default/g"
    assert sorted(records[0]["victims"]) == ["default/low0", "default/low1", "default/low2"]
    assert sorted(records[0]["nominations"].values()) == ["n0", "n1", "n2"]


async def test_gang_that_cannot_complete_preempts_nobody() -> None:
    objects = [node(f"n{i}") for i in range(3)]
    objects += [pod("low0", 0, node_name="n0"), pod("low1", 0, node_name="n1"), pod("vip", 1000, node_name="n2")]
    objects += [pod(f"g{i}", 100, gang="g", min_available=3) for i in range(3)]
    r = await run(*objects)
    assert r.bound() & {"g0", "g1", "g2"} == set()
    assert survivors(r, "low0", "low1", "vip") == {"low0", "low1", "vip"}
    assert r.result.extra_sections["JobPreemptions"] == []
    messages = [r.placements[f"g{i}"][1] for i in range(3)]
    assert all("preemption: " in m for m in messages), messages
    assert any("preemption already attempted by default/" in m for m in messages), messages


async def test_ordinary_pod_still_preempts() -> None:
    r = await run(node("n0"), pod("low", 0, node_name="n0"), pod("high", 100))
    assert r.placements["high"] == ("n0", "")
    assert survivors(r, "low") == set()
    record = r.result.extra_sections["JobPreemptions"][0]
    assert (record["preemptor"], record["victims"]) == ("default/high", ["default/low"])
    assert [(e.object_key, e.message) for e in r.cluster.events if e.reason == "Preempted"] == [
        ("default/low", "Preempted by pod default/high on node n0")
    ]


async def test_preemption_policy_never_is_not_eligible() -> None:
    r = await run(node("n0"), pod("low", 0, node_name="n0"), pod("polite", 100, never=True))
    assert r.placements["polite"][0] is None
    assert r.placements["polite"][1].endswith("preemption: not eligible due to preemptionPolicy=Never.")
    assert survivors(r, "low") == {"low"}


@pytest.mark.parametrize(
    ("labels", "want_bound"),
    [
        pytest.param({"scheduling.koordinator.sh/disable-preemptible": "true"}, False, id="disable-preemptible"),
        pytest.param({"quota.scheduling.koordinator.sh/preemptible": "false"}, False, id="quota-non-preemptible"),
        pytest.param({}, True, id="unlabelled"),
    ],
)
async def test_protected_pods_are_never_victims(labels: dict[str, str], want_bound: bool) -> None:
    r = await run(node("n0"), pod("low", 0, node_name="n0", labels=labels), pod("high", 100))
    assert ("high" in r.bound()) is want_bound
    assert ("low" in survivors(r, "low")) is not want_bound
    if not want_bound:
        assert r.placements["high"][1].endswith("preemption: 0/1 nodes are available: 1 no potential victims.")


async def test_cheapest_node_is_chosen() -> None:
    """n0 holds a priority-10 victim, n1 a priority-0 one: the rank of 0 is lower, so n1 is preempted."""
    victims = [pod("mid", 10, node_name="n0"), pod("low", 0, node_name="n1")]
    r = await run(node("n0"), node("n1"), *victims, pod("high", 100))
    assert r.placements["high"] == ("n1", "")
    assert survivors(r, "mid", "low") == {"mid"}


async def test_only_the_victims_needed_are_preempted() -> None:
    """Two 2-cpu pods on a 4-cpu node; the preemptor needs 2: the less important one goes."""
    objects = [node("n0"), pod("a", 5, cpu="2", node_name="n0"), pod("b", 1, cpu="2", node_name="n0")]
    r = await run(*objects, pod("high", 100, cpu="2"))
    assert r.placements["high"] == ("n0", "")
    assert survivors(r, "a", "b") == {"a"}


async def test_members_waiting_at_permit_are_released_and_the_gang_binds_after_preemption() -> None:
    """g0 and g1 take the free nodes and wait at Permit; g2 fits nowhere. The job (g2 pending, g0 and g1
    waiting) preempts low on n2 for g2 only; the waiting members are released with their nodes kept as
    nominations, and the whole gang binds."""
    objects = [node("n0"), node("n1"), node("n2"), pod("low", 0, node_name="n2")]
    objects += [pod(f"g{i}", 100, gang="g", min_available=3) for i in range(3)]
    r = await run(*objects)
    assert r.bound() >= {"g0", "g1", "g2"}
    assert survivors(r, "low") == set()
    records = r.result.extra_sections["JobPreemptions"]
    assert [(x["preemptor"], x["trigger"], x["nominations"], x["victims"]) for x in records] == [
        ("default/g", "default/g2", {"default/g2": "n2"}, ["default/low"])
    ]
    assert r.placements["g2"][0] == "n2"


DEFAULT_PREEMPTION = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
"""


async def test_with_default_preemption_a_member_of_a_gang_that_cannot_complete_evicts_nobody() -> None:
    # Room for one member after preemption, and the gang needs three: no member preempts on its own.
    objects = [node("n0"), node("n1"), pod("low", 0, node_name="n0"), pod("vip", 1000, node_name="n1")]
    objects += [pod(f"g{i}", 100, gang="g", min_available=3) for i in range(3)]
    r = await simulate(*objects, config=DEFAULT_PREEMPTION)
    assert survivors(r, "low", "vip") == {"low", "vip"}
    assert r.bound() & {"g0", "g1", "g2"} == set()
    messages = [r.placements[f"g{i}"][1] for i in range(3)]
    assert any("gangGroup default/g would not be satisfied even with this pod" in m for m in messages), messages


async def test_with_default_preemption_a_member_that_completes_its_gang_preempts() -> None:
    # min-available 1: the member alone satisfies its gang, so DefaultPreemption evicts for it.
    objects = [node("n0"), pod("low", 0, node_name="n0"), pod("g0", 100, gang="g", min_available=1)]
    r = await simulate(*objects, config=DEFAULT_PREEMPTION)
    assert survivors(r, "low") == set()
    assert r.placements["g0"] == ("n0", "")


async def test_with_default_preemption_an_ordinary_pod_still_preempts() -> None:
    r = await simulate(node("n0"), pod("low", 0, node_name="n0"), pod("high", 100), config=DEFAULT_PREEMPTION)
    assert survivors(r, "low") == set()
    assert r.placements["high"] == ("n0", "")
