"""RemovePodsViolatingTopologySpreadConstraint: cases of sigs.k8s.io/descheduler v0.35
``topologyspreadconstraint_test.go`` (same nodes, pods and expected number of evicted pods), the
balancing maths, the args and the round."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from apis.config.descheduler import load_descheduler_config, parse_descheduler_config
from apis.config.descheduler_upstream import RemovePodsViolatingTopologySpreadConstraintArgs
from apis.config.errors import ConfigError
from apis.core.types import Node, Pod
from koord_scheduler.app.cluster_file import load_cluster_file
from koord_scheduler.descheduler.evictor import EvictionFilter, fits_node, requested
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
from koord_scheduler.descheduler.round import Descheduler
from koord_scheduler.descheduler.topology_spread import (
    Domain,
    RemovePodsViolatingTopologySpreadConstraint,
    balance_domains,
    is_balanced,
)
from tests.builders import PodBuilder, make_node, make_pod
from tests.unit.descheduler.test_deschedule_plugins import HEAD, NOW, view

SPREAD = {"foo": "bar"}


def node(name: str, zone: str, *, cpu: str = "2", pods: int = 10, taint: bool = False) -> Node:
    b = make_node(name).allocatable(cpu=cpu, memory="3Gi", pods=str(pods)).label("zone", zone)
    if taint:
        b = b.taint("hardware", "gpu", "NoSchedule")
    return b.build()


@dataclass
class Group:
    """``testPodList``: ``count`` pods on ``node``, each with the default constraint when ``skew`` is set."""

    count: int
    node: str
    skew: int | None = None
    labels: dict[str, str] = field(default_factory=lambda: dict(SPREAD))
    action: str = "DoNotSchedule"
    edit: Any = None


def pods(*groups: Group) -> list[Pod]:
    out: list[Pod] = []
    for g in groups:
        for _ in range(g.count):
            b: PodBuilder = make_pod(f"pod-{len(out)}", "ns1").owner("ReplicaSet", "rs").node(g.node).req(cpu="100m")
            b = b.labels(g.labels)
            if g.skew is not None:
                b = b.spread(g.skew, "zone", SPREAD, when_unsatisfiable=g.action)
            if g.edit is not None:
                b = g.edit(b)
            out.append(b.build())
    return out


def run(
    nodes: list[Node], all_pods: list[Pod], args: RemovePodsViolatingTopologySpreadConstraintArgs | None = None
) -> list[str]:
    node_by_name = {n.name: n for n in nodes}
    on_node = {n.name: requested([p for p in all_pods if p.node_name == n.name]) for n in nodes}

    def fits(pod: Pod, name: str) -> bool:
        return fits_node(pod, node_by_name[name], on_node[name])

    plugin = RemovePodsViolatingTopologySpreadConstraint(args or RemovePodsViolatingTopologySpreadConstraintArgs())
    return [e.pod.name for e in plugin.deschedule(view(nodes, all_pods), evictable=EvictionFilter(), fits=fits)]


TWO = [node("n1", "zoneA"), node("n2", "zoneB")]
BOTH = RemovePodsViolatingTopologySpreadConstraintArgs(constraints=["DoNotSchedule", "ScheduleAnyway"])


def _selector_zone_a(b: PodBuilder) -> PodBuilder:
    return b.node_selector(zone="zoneA")


def _affinity_foo(b: PodBuilder) -> PodBuilder:
    return b.node_affinity("foo", "In", ["bar"])


def _deleting(b: PodBuilder) -> PodBuilder:
    b._meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return b


@pytest.mark.parametrize(
    ("nodes", "groups", "args", "want"),
    [
        pytest.param(TWO, [Group(1, "n1", 1), Group(1, "n1"), Group(1, "n2")], None, 0, id="[2,1] move 0"),
        pytest.param(TWO, [Group(1, "n1", 1), Group(2, "n1"), Group(1, "n2")], None, 1, id="[3,1] move 1"),
        pytest.param(
            TWO,
            [Group(1, "n1", 1, action="ScheduleAnyway"), Group(2, "n1"), Group(1, "n2")],
            BOTH,
            1,
            id="[3,1] soft constraint included",
        ),
        pytest.param(
            TWO,
            [Group(1, "n1", 1, action="ScheduleAnyway"), Group(2, "n1"), Group(1, "n2")],
            None,
            0,
            id="[3,1] soft constraint not included by default",
        ),
        pytest.param(TWO, [Group(1, "n1", 1), Group(4, "n1"), Group(2, "n2")], None, 1, id="[5,2] move 1"),
        pytest.param(TWO, [Group(1, "n1", 1), Group(3, "n1")], None, 2, id="[4,0] move 2"),
        pytest.param(
            TWO,
            [
                Group(2, "n1", 1, edit=_selector_zone_a),
                Group(1, "n1", 1, edit=_affinity_foo),
                Group(1, "n1", 1),
            ],
            None,
            1,
            id="[4,0] pods with nodeSelector or nodeAffinity stay",
        ),
        pytest.param(
            [node("n1", "zoneA"), node("n2", "zoneB"), node("n3", "zoneC")],
            [Group(1, "n2", 1), Group(100, "n3")],
            None,
            66,
            id="[0,1,100] move 66",
        ),
        pytest.param(
            [node("n1", "zoneA"), node("n2", "zoneB"), node("n3", "zoneC"), node("n4", "zoneD")],
            [Group(1, "n2", 1), Group(3, "n3"), Group(5, "n4")],
            None,
            3,
            id="[0,1,3,5] move 3",
        ),
        pytest.param(TWO, [Group(1, "n1", 2), Group(1, "n1"), Group(6, "n2")], None, 1, id="[2,6] maxSkew 2 move 1"),
        pytest.param(
            [node("n1", "zoneA", taint=True), node("n2", "zoneB")],
            [Group(1, "n1", 2), Group(1, "n1"), Group(6, "n2")],
            None,
            0,
            id="[2,6] the small domain's node is tainted",
        ),
        pytest.param(
            [node("n1", "zoneA", cpu="200m"), node("n2", "zoneB")],
            [Group(1, "n1", 2), Group(1, "n1"), Group(6, "n2")],
            None,
            0,
            id="[2,6] not enough cpu on the small domain",
        ),
        pytest.param(
            [node("n1", "zoneA"), node("n2", "zoneB"), node("n3", "zoneC")],
            [Group(1, "n1", 1), Group(7, "n1"), Group(7, "n2")],
            None,
            5,
            id="[8,7,0] move 5",
        ),
        pytest.param(
            [node("n1", "zoneA"), node("n2", "zoneB"), node("n3", "zoneC")],
            [Group(1, "n1", 1), Group(4, "n1"), Group(5, "n2"), Group(5, "n3")],
            None,
            0,
            id="[5,5,5] move 0",
        ),
        pytest.param(
            TWO,
            [Group(2, "n1", 1), Group(2, "n1", 1, edit=_deleting), Group(2, "n2", 1)],
            None,
            0,
            id="[4,2] two terminating pods are not counted",
        ),
        pytest.param(
            [
                node("n1", "zoneA", cpu="250m", pods=9),
                node("n2", "zoneB", cpu="1", pods=9),
                node("n3", "zoneC", cpu="1"),
            ],
            [Group(2, "n1", 1), Group(3, "n2", 1), Group(4, "n3", 1)],
            None,
            0,
            id="[2,3,4] not enough cpu in zoneA, topologyBalanceNodeFit",
        ),
        pytest.param(
            [node("n1", "zoneA", cpu="250m", pods=9), node("n2", "zoneB", cpu="1", pods=9), node("n3", "zoneC")],
            [Group(2, "n1", 1), Group(3, "n2", 1), Group(4, "n3", 1)],
            RemovePodsViolatingTopologySpreadConstraintArgs(topology_balance_node_fit=False),
            1,
            id="[2,3,4] topologyBalanceNodeFit false moves one to force a scale-up",
        ),
    ],
)
def test_upstream_cases(
    nodes: list[Node], groups: list[Group], args: RemovePodsViolatingTopologySpreadConstraintArgs | None, want: int
) -> None:
    assert len(run(nodes, pods(*groups), args)) == want


def test_match_label_keys_split_the_pods_by_revision() -> None:
    def revision(value: str) -> dict[str, str]:
        return {**SPREAD, "pod-template-hash": value}

    def with_keys(b: PodBuilder) -> PodBuilder:
        raw = b._spec["topologySpreadConstraints"][0]
        raw["matchLabelKeys"] = ["pod-template-hash"]
        return b

    same = pods(Group(2, "n1", 1, labels=revision("a"), edit=with_keys))
    assert len(run(TWO, same)) == 1
    split = pods(
        Group(1, "n1", 1, labels=revision("a"), edit=with_keys), Group(1, "n1", 1, labels=revision("b"), edit=with_keys)
    )
    assert run(TWO, split) == []


def test_namespaces_and_label_selector_limit_the_counted_pods() -> None:
    all_pods = pods(Group(1, "n1", 1), Group(2, "n1"), Group(1, "n2"))
    excluded = RemovePodsViolatingTopologySpreadConstraintArgs.model_validate({"namespaces": {"exclude": ["ns1"]}})
    assert run(TWO, all_pods, excluded) == []
    other = RemovePodsViolatingTopologySpreadConstraintArgs.model_validate(
        {"labelSelector": {"matchLabels": {"a": "b"}}}
    )
    assert run(TWO, all_pods, other) == []


@pytest.mark.parametrize(
    ("sizes", "skew", "want"),
    [([2, 1], 1, True), ([3, 1], 1, False), ([2, 6], 2, False), ([2, 4], 2, True), ([], 1, True)],
)
def test_is_balanced(sizes: list[int], skew: int, want: bool) -> None:
    assert is_balanced([Domain(str(i), pods(Group(n, "n1"))) for i, n in enumerate(sizes)], skew) is want


def test_balance_domains_moves_the_low_priority_pods_without_node_constraints_first() -> None:
    big = [
        make_pod("pinned").node("n1").node_selector(zone="zoneA").build(),
        make_pod("high").node("n1").priority(100).build(),
        make_pod("low").node("n1").priority(1).build(),
        make_pod("mid").node("n1").priority(50).build(),
    ]
    moved = balance_domains(
        [Domain("zoneA", big), Domain("zoneB", [])],
        1,
        fits_below=lambda pod, nodes: True,
        node_fit=True,
        domain_nodes={"zoneA": ["n1"], "zoneB": ["n2"]},
    )
    assert [p.name for p in moved] == ["mid", "low"]


def test_args_refused_with_path() -> None:
    text = (
        HEAD + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled:\n"
        "      - name: RemovePodsViolatingTopologySpreadConstraint\n  pluginConfig:\n"
        "  - name: RemovePodsViolatingTopologySpreadConstraint\n    args:\n      constraints: [Sometimes]\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_descheduler_config(text)
    assert 'profiles[0].pluginConfig[0].args.constraints[0]: Unsupported value: "Sometimes"' in str(info.value)


def test_round_runs_it_at_balance() -> None:
    text = (
        HEAD + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled:\n"
        "      - name: RemovePodsViolatingTopologySpreadConstraint\n"
    )
    config, args = parse_descheduler_config(text)
    plan = Descheduler(config, args, clock=lambda: NOW).plan(view(TWO, pods(Group(1, "n1", 1), Group(2, "n1"))))
    assert [(m.plugin, m.node) for m in plan.migrations] == [("RemovePodsViolatingTopologySpreadConstraint", "n1")]
    assert plan.migrations[0].reason == "violates its topology spread constraint on zone (maxSkew 1)"


def test_the_example_files() -> None:
    repo = Path(__file__).resolve().parents[3]
    cluster = load_cluster_file(repo / "config" / "simulate" / "topology-spread-cluster.yaml", {})
    assert cluster.problems == []
    config, args = load_descheduler_config(repo / "config" / "descheduler" / "topology-spread-config.yaml")
    by_node: dict[str, list[Pod]] = {}
    for pod in cluster.pods:
        by_node.setdefault(pod.node_name, []).append(pod)
    nodes = sorted(cluster.nodes, key=lambda n: n.name)
    plan = Descheduler(config, args, clock=lambda: NOW).plan(ClusterView(nodes, by_node, {}, NOW))
    assert [(m.name, m.node) for m in plan.migrations] == [
        ("web-3", "node-a"),
        ("web-4", "node-a"),
        ("web-2", "node-a"),
    ]
