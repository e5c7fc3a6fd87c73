"""PodTopologySpread PreFilter/Filter: hand-computed tables (rows after upstream ``filtering_test.go``),
defaults, inclusion policies, minDomains, matchLabelKeys, and PreFilterExtensions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from apis.config.plugin_args import PodTopologySpreadArgs
from apis.core.parse import parse_pod
from apis.core.types import Node, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.plugins.podtopologyspread import plugin as pts
from koord_scheduler.plugins.podtopologyspread.policy import filter_constraints, owner_default_selector
from tests.builders import PodBuilder, make_node, make_pod
from tests.fwtest import filter_statuses, make_snapshot

OK = Status()
MISSING = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (pts.ERR_REASON_NODE_LABEL_NOT_MATCH,))
SKEW = Status(Code.UNSCHEDULABLE, (pts.ERR_REASON_CONSTRAINTS_NOT_MATCH,))
FOO = {"foo": ""}


def spread_pod(builder: PodBuilder, **fields: Any) -> Pod:
    """Build, setting extra fields (nodeAffinityPolicy, matchLabelKeys...) on every spread constraint."""
    obj = builder.obj()
    for c in obj["spec"].get("topologySpreadConstraints", []):
        c.update(fields)
    return parse_pod(obj)


def node(name: str, **labels: str) -> Node:
    return make_node(name).labels({"node": name, **labels}).build()


def existing(name: str, on: str, labels: Mapping[str, str] = FOO, namespace: str = "default") -> Pod:
    return make_pod(name, namespace).labels(labels).node(on).build()


def plugin(args: PodTopologySpreadArgs | None = None) -> pts.PodTopologySpread:
    return pts.from_args(args)


def run(
    pod: Pod, nodes: Sequence[Node], pods: Sequence[Pod] = (), p: pts.PodTopologySpread | None = None
) -> dict[str, Status]:
    return filter_statuses(p or plugin(), pod, make_snapshot(nodes, pods))


ZONED = [
    node("node-a", zone="zone1"),
    node("node-b", zone="zone1"),
    node("node-x", zone="zone2"),
    node("node-y", zone="zone2"),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want"),
    [
        pytest.param(
            make_pod("p").label("foo", "").spread(1, "zone", FOO).build(),
            ZONED,
            [],
            {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
            id="no-existing-pods-all-fit",
        ),
        pytest.param(
            make_pod("p").label("foo", "").spread(1, "zone", FOO).build(),
            ZONED,
            [existing("a1", "node-a", namespace="ns1"), existing("x1", "node-x", namespace="ns2")],
            {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
            id="pods-in-other-namespaces-do-not-count",
        ),
        pytest.param(
            # zone1 3, zone2 3: skew 3 + 1 - 3 = 1 <= 1 everywhere.
            make_pod("p").label("foo", "").spread(1, "zone", FOO).build(),
            ZONED,
            [
                existing("a1", "node-a"),
                existing("a2", "node-a"),
                existing("b1", "node-b"),
                existing("x1", "node-x"),
                existing("y1", "node-y"),
                existing("y2", "node-y"),
            ],
            {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
            id="spread-3-3-all-fit",
        ),
        pytest.param(
            # zone1 3, zone2 4: zone2 skew 4 + 1 - 3 = 2 > 1.
            make_pod("p").label("foo", "").spread(1, "zone", FOO).build(),
            ZONED,
            [
                existing("a1", "node-a"),
                existing("a2", "node-a"),
                existing("b1", "node-b"),
                existing("x1", "node-x"),
                existing("y1", "node-y"),
                existing("y2", "node-y"),
                existing("y3", "node-y"),
            ],
            {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW},
            id="spread-3-4-zone2-skew-2",
        ),
        pytest.param(
            # node-b lacks "zone": it is not a domain and its pod does not count; zone1 1, zone2 2.
            make_pod("p").label("foo", "").spread(1, "zone", FOO).build(),
            [
                node("node-a", zone="zone1"),
                node("node-b", zon="zone1"),
                node("node-x", zone="zone2"),
                node("node-y", zone="zone2"),
            ],
            [existing("a1", "node-a"), existing("b1", "node-b"), existing("x1", "node-x"), existing("y1", "node-y")],
            {"node-a": OK, "node-b": MISSING, "node-x": SKEW, "node-y": SKEW},
            id="missing-label-unresolvable-and-not-counted",
        ),
        pytest.param(
            # The incoming pod does not match its own selector: selfMatch 0. zone1 1, zone2 2:
            # zone2 skew 2 + 0 - 1 = 1 <= 1.
            make_pod("p").label("bar", "").spread(1, "zone", FOO).build(),
            ZONED,
            [existing("a1", "node-a"), existing("x1", "node-x"), existing("y1", "node-y")],
            {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
            id="self-match-0",
        ),
        pytest.param(
            # Hostname-like key "node": counts a 2, b 1, x 0, y 2; min 0 -> only x (0+1-0 = 1) fits.
            make_pod("p").label("foo", "").spread(1, "node", FOO).build(),
            ZONED,
            [
                existing("a1", "node-a"),
                existing("a2", "node-a"),
                existing("b1", "node-b"),
                existing("y1", "node-y"),
                existing("y2", "node-y"),
            ],
            {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
            id="per-node-key-min-0",
        ),
        pytest.param(
            # Two constraints: zone (maxSkew 1) then node (maxSkew 1). zone1 3, zone2 1 (min 1);
            # nodes a 2, b 1, x 0, y 1 (min 0). zone1 nodes fail the zone constraint; y fails node.
            make_pod("p").label("foo", "").spread(1, "zone", FOO).spread(1, "node", FOO).build(),
            ZONED,
            [existing("a1", "node-a"), existing("a2", "node-a"), existing("b1", "node-b"), existing("y1", "node-y")],
            {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
            id="two-constraints-both-checked",
        ),
        pytest.param(
            # Terminating pods are not counted: zone2 has 2 live + 2 terminating.
            make_pod("p").label("foo", "").spread(1, "zone", FOO).build(),
            ZONED,
            [existing("a1", "node-a"), existing("x1", "node-x"), existing("x2", "node-x")],
            {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW},
            id="zone2-one-more-skew-2",
        ),
    ],
)
def test_filter_table(pod: Pod, nodes: list[Node], pods: list[Pod], want: dict[str, Status]) -> None:
    assert run(pod, nodes, pods) == want


def test_terminating_pods_are_not_counted() -> None:
    obj = make_pod("x-dying").labels(FOO).node("node-x").obj()
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    dying = parse_pod(obj)
    pod = make_pod("p").label("foo", "").spread(1, "zone", FOO).build()
    # zone1 1, zone2 1 live (+1 terminating): zone2 skew 1 + 1 - 1 = 1 fits.
    got = run(pod, ZONED, [existing("a1", "node-a"), existing("x1", "node-x"), dying])
    assert got == {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}


def test_no_constraints_skips() -> None:
    state = CycleState()
    _, status = plugin().pre_filter(state, make_pod("p").build(), make_snapshot(ZONED))
    assert status.code == Code.SKIP


def test_schedule_anyway_only_skips_filter() -> None:
    pod = make_pod("p").label("foo", "").spread(1, "zone", FOO, when_unsatisfiable="ScheduleAnyway").build()
    _, status = plugin().pre_filter(CycleState(), pod, make_snapshot(ZONED))
    assert status.code == Code.SKIP


@pytest.mark.parametrize(
    ("min_domains", "want"),
    [
        # 2 domains (zone1 2 pods, zone2 2 pods). minDomains 3 > 2: global min 0, skew 2 + 1 - 0 = 3 > 2.
        pytest.param(
            3,
            {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW},
            id="min-domains-3-above-2-domains-global-min-0",
        ),
        # minDomains 2 == 2 domains: global min 2, skew 2 + 1 - 2 = 1 <= 2.
        pytest.param(
            2, {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}, id="min-domains-2-reached-global-min-2"
        ),
    ],
)
def test_min_domains(min_domains: int, want: dict[str, Status]) -> None:
    pod = make_pod("p").label("foo", "").spread(2, "zone", FOO, min_domains=min_domains).build()
    pods = [existing("a1", "node-a"), existing("b1", "node-b"), existing("x1", "node-x"), existing("y1", "node-y")]
    assert run(pod, ZONED, pods) == want


def test_node_affinity_policy_honor_excludes_nodes_from_domains() -> None:
    # The pod only selects zone1 nodes; with Honor zone2 is not a domain: only zone1 (1 pod) counts,
    # min 1, skew 1 + 1 - 1 = 1 fits; with Ignore zone2 (0 pods) is the min: 1 + 1 - 0 = 2 > 1.
    base = make_pod("p").label("foo", "").spread(1, "zone", FOO).node_affinity("zone", "In", ["zone1"])
    pods = [existing("a1", "node-a")]
    honor = run(spread_pod(base.copy(), nodeAffinityPolicy="Honor"), ZONED, pods)
    ignore = run(spread_pod(base.copy(), nodeAffinityPolicy="Ignore"), ZONED, pods)
    assert (honor["node-a"], honor["node-b"]) == (OK, OK)
    assert (ignore["node-a"], ignore["node-b"]) == (SKEW, SKEW)


def test_node_taints_policy_honor_excludes_tainted_nodes() -> None:
    # zone2 nodes are tainted: with Honor zone2 is no domain (min = zone1's 1); with the default
    # Ignore zone2 (0 pods) is the min and zone1 fails.
    nodes = [
        node("node-a", zone="zone1"),
        make_node("node-x").labels({"node": "node-x", "zone": "zone2"}).taint("t", "v").build(),
    ]
    base = make_pod("p").label("foo", "").spread(1, "zone", FOO)
    pods = [existing("a1", "node-a")]
    assert run(spread_pod(base.copy(), nodeTaintsPolicy="Honor"), nodes, pods)["node-a"] == OK
    assert run(base.build(), nodes, pods)["node-a"] == SKEW


def test_match_label_keys_narrow_the_selector() -> None:
    # Only pods with the same "rev" count: zone1 has 2 pods of rev 1, zone2 2 pods of rev 2.
    pods = [
        existing("a1", "node-a", {"foo": "", "rev": "1"}),
        existing("b1", "node-b", {"foo": "", "rev": "1"}),
        existing("x1", "node-x", {"foo": "", "rev": "2"}),
        existing("y1", "node-y", {"foo": "", "rev": "2"}),
    ]
    base = make_pod("p").labels({"foo": "", "rev": "2"}).spread(1, "zone", FOO)
    # Without matchLabelKeys: 2 and 2, all fit. With rev: zone1 0, zone2 2 -> zone2 skew 3 > 1.
    assert set(run(base.build(), ZONED, pods).values()) == {OK}
    got = run(spread_pod(base.copy(), matchLabelKeys=["rev"]), ZONED, pods)
    assert got == {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW}


def test_no_domain_at_all_uses_max_int32_minimum() -> None:
    # Every node fails the pod's node affinity: no domain, global min MaxInt32, nothing fails on skew.
    pod = make_pod("p").label("foo", "").spread(1, "zone", FOO).node_affinity("zone", "In", ["zone9"]).build()
    assert set(run(pod, ZONED, [existing("a1", "node-a")]).values()) == {OK}


def test_list_default_constraints_apply_to_controlled_pods() -> None:
    args = PodTopologySpreadArgs.model_validate(
        {
            "defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        }
    )
    p = plugin(args)
    rs_pods = [
        make_pod(f"w{i}").label("app", "web").owner("ReplicaSet", "web-1").node(n).build()
        for i, n in enumerate(["node-a", "node-b"])
    ]
    incoming = make_pod("w9").label("app", "web").owner("ReplicaSet", "web-1").build()
    # zone1 2 web pods, zone2 0: zone1 skew 2 + 1 - 0 = 3 > 1.
    assert run(incoming, ZONED, rs_pods, p) == {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK}
    # A bare pod (no controller) gets no default constraints.
    _, status = p.pre_filter(CycleState(), make_pod("bare").label("app", "web").build(), make_snapshot(ZONED))
    assert status.code == Code.SKIP


@pytest.mark.parametrize(
    ("builder", "want"),
    [
        pytest.param(make_pod("p").label("app", "x").owner("ReplicaSet", "rs"), {"app": "x"}, id="replicaset"),
        pytest.param(
            make_pod("p")
            .labels({"app": "db", "statefulset.kubernetes.io/pod-name": "p", "controller-revision-hash": "h"})
            .owner("StatefulSet", "db"),
            {"app": "db"},
            id="statefulset-drops-per-pod-labels",
        ),
        pytest.param(
            make_pod("p").label("app", "x").owner("ReplicationController", "rc", api_version="v1"),
            {"app": "x"},
            id="replicationcontroller",
        ),
        pytest.param(make_pod("p").label("app", "x").owner("Job", "j", api_version="batch/v1"), None, id="job-none"),
        pytest.param(
            make_pod("p").label("app", "x").owner("ReplicaSet", "rs", controller=False), None, id="not-controller-none"
        ),
        pytest.param(make_pod("p").label("app", "x"), None, id="bare-pod-none"),
    ],
)
def test_owner_default_selector(builder: PodBuilder, want: dict[str, str] | None) -> None:
    selector = owner_default_selector(builder.build())
    assert (dict(selector.match_labels) if selector is not None else None) == want


def test_add_and_remove_pod_update_a_cloned_state() -> None:
    p = plugin()
    snap = make_snapshot(ZONED, [existing("a1", "node-a"), existing("x1", "node-x")])
    pod = make_pod("p").label("foo", "").spread(1, "zone", FOO).build()
    state = CycleState()
    p.pre_filter(state, pod, snap)
    clone = state.clone()
    node_x = snap.node_info("node-x")
    assert node_x is not None
    ext = p.pre_filter_extensions()
    # zone2 becomes 2 vs zone1 1: zone2 skew 2 + 1 - 1 = 2 > 1.
    assert ext.add_pod(clone, pod, existing("x2", "node-x"), node_x).is_success
    positions = snap.node_order()
    after = p.filter_nodes(clone, pod, snap, positions)
    before = p.filter_nodes(state, pod, snap, positions)
    names = [snap.info(int(i)).name for i in positions]
    assert dict(zip(names, after.passed.tolist(), strict=True)) == {
        "node-a": True,
        "node-b": True,
        "node-x": False,
        "node-y": False,
    }
    assert before.passed.all()
    # Removing two zone2 pods makes zone2 the minimum (0) and zone1 skew 1 + 1 - 0 = 2 > 1.
    ext.remove_pod(clone, pod, existing("x2", "node-x"), node_x)
    ext.remove_pod(clone, pod, existing("x1", "node-x"), node_x)
    after = p.filter_nodes(clone, pod, snap, positions)
    assert dict(zip(names, after.passed.tolist(), strict=True)) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": True,
    }
    # Pods of another namespace are ignored.
    ext.add_pod(clone, pod, existing("o1", "node-a", namespace="other"), snap.node_info("node-a"))  # type: ignore[arg-type]
    assert p.filter_nodes(clone, pod, snap, positions).passed.tolist() == after.passed.tolist()


def test_filter_follows_a_relabelled_node_across_pods_of_one_burst() -> None:
    """The per-node domain slots are kept while the node order and the domains are the same objects; a
    node moving to another zone rebuilds the domains, and the next pod's answer follows it."""
    p = plugin()
    snap = make_snapshot(ZONED, [existing("e1", "node-a"), existing("e2", "node-a")])
    pod = make_pod("p").label("foo", "").spread(1, "zone", FOO).build()
    first = filter_statuses(p, pod, snap)
    assert first == {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK}
    assert filter_statuses(p, pod, snap) == first, "the same answer from the kept slots"
    snap.upsert_node(node("node-a", zone="zone2"))
    assert filter_statuses(p, pod, snap) == {"node-a": SKEW, "node-b": OK, "node-x": SKEW, "node-y": SKEW}


def test_constraints_without_match_label_keys_are_built_once_per_template() -> None:
    """Equal constraint lists without matchLabelKeys share one filtered tuple; with matchLabelKeys the
    answer depends on each pod's labels and is built for it."""
    a = make_pod("a").label("foo", "").label("rev", "1").spread(1, "zone", FOO).build()
    b = make_pod("b").label("foo", "").label("rev", "2").spread(1, "zone", FOO).build()
    assert a.topology_spread_constraints is not b.topology_spread_constraints
    first = filter_constraints(a.topology_spread_constraints, a.labels, "DoNotSchedule")
    assert filter_constraints(b.topology_spread_constraints, b.labels, "DoNotSchedule") is first
    assert filter_constraints(a.topology_spread_constraints, a.labels, "ScheduleAnyway") == ()
    keyed_a = spread_pod(
        make_pod("a").label("foo", "").label("rev", "1").spread(1, "zone", FOO), matchLabelKeys=["rev"]
    )
    keyed_b = spread_pod(
        make_pod("b").label("foo", "").label("rev", "2").spread(1, "zone", FOO), matchLabelKeys=["rev"]
    )
    sel_a = filter_constraints(keyed_a.topology_spread_constraints, keyed_a.labels, "DoNotSchedule")[0].selector
    sel_b = filter_constraints(keyed_b.topology_spread_constraints, keyed_b.labels, "DoNotSchedule")[0].selector
    assert sel_a is not None and sel_b is not None
    assert sel_a != sel_b, "each pod's own rev merged into its selector"
    assert sel_a.match_expressions[-1].values == ("1",) and sel_b.match_expressions[-1].values == ("2",)
