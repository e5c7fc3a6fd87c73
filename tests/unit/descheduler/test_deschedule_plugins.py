"""The Deschedule plugins (PodLifeTime, RemoveFailedPods, RemovePodsViolatingNodeTaints,
RemovePodsViolatingNodeAffinity): tables after kubernetes-sigs/descheduler's plugin tests, their args'
validation, and a descheduling round that runs them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apis.config.descheduler import parse_descheduler_config
from apis.config.descheduler_upstream import (
    UPSTREAM_ARGS,
    OwnerKinds,
    PodConditionFilter,
    PodLifeTimeArgs,
    RemoveDuplicatesArgs,
    RemoveFailedPodsArgs,
    RemovePodsHavingTooManyRestartsArgs,
    RemovePodsViolatingInterPodAntiAffinityArgs,
    RemovePodsViolatingNodeAffinityArgs,
    RemovePodsViolatingNodeTaintsArgs,
)
from apis.config.errors import ConfigError
from apis.core.parse import parse_pod
from apis.core.types import Node, Pod
from koord_scheduler.descheduler.deschedule_plugins import (
    PodLifeTime,
    RemoveFailedPods,
    RemovePodsHavingTooManyRestarts,
    RemovePodsViolatingInterPodAntiAffinity,
    RemovePodsViolatingNodeAffinity,
    RemovePodsViolatingNodeTaints,
)
from koord_scheduler.descheduler.evictor import EvictionFilter
from koord_scheduler.descheduler.lownodeload.plugin import ClusterView
from koord_scheduler.descheduler.remove_duplicates import RemoveDuplicates
from koord_scheduler.descheduler.round import Descheduler
from koord_scheduler.descheduler.upstream_registry import DESCHEDULE_PLUGINS
from tests.builders import PodBuilder, make_node, make_pod

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC).timestamp()
EVICTABLE = EvictionFilter()


def at(seconds_ago: int) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def web(name: str, node: str = "n1", *, age: int = 10, phase: str = "Running") -> PodBuilder:
    return make_pod(name).owner("ReplicaSet", "rs").node(node).phase(phase).created(at(age))


def view(nodes: list[Node], pods: list[Pod]) -> ClusterView:
    by_node: dict[str, list[Pod]] = {}
    for p in pods:
        by_node.setdefault(p.node_name, []).append(p)
    return ClusterView(nodes, by_node, {}, NOW)


def fits_anywhere(pod: Pod, node: str) -> bool:
    return True


def fits_nowhere(pod: Pod, node: str) -> bool:
    return False


NODES = [make_node("n1").build(), make_node("n2").build()]


@pytest.mark.parametrize(
    ("args", "pods", "want"),
    [
        # Upstream "Two pods in the `dev` Namespace, 1 is new and 1 very is old. 1 should be evicted."
        (PodLifeTimeArgs(max_pod_life_time_seconds=600), [web("old", age=1200), web("new", age=60)], ["old"]),
        (PodLifeTimeArgs(max_pod_life_time_seconds=600), [web("edge", age=600)], []),  # not more than the limit
        # The oldest first.
        (
            PodLifeTimeArgs(max_pod_life_time_seconds=60),
            [web("b", age=120), web("a", "n2", age=3600), web("c", age=600)],
            ["a", "c", "b"],
        ),
        (
            PodLifeTimeArgs(max_pod_life_time_seconds=0, states=["Pending"]),
            [web("p", phase="Pending"), web("r")],
            ["p"],
        ),
        (
            PodLifeTimeArgs(max_pod_life_time_seconds=60, owner_kinds=OwnerKinds(exclude=["ReplicaSet"])),
            [web("old", age=1200)],
            [],
        ),
        (
            PodLifeTimeArgs(conditions=[PodConditionFilter(type="Ready", status="False")]),
            [web("unready").condition("Ready", "False").build(), web("ready").condition("Ready").build()],
            ["unready"],
        ),
    ],
)
def test_pod_life_time(args: PodLifeTimeArgs, pods: list[Pod | PodBuilder], want: list[str]) -> None:
    built = [p.build() if isinstance(p, PodBuilder) else p for p in pods]
    got = PodLifeTime(args).deschedule(view(NODES, built), evictable=EVICTABLE, fits=fits_anywhere)
    assert [e.pod.name for e in got] == want


def test_pod_life_time_respects_the_eviction_filter_and_its_own_namespaces() -> None:
    bare = make_pod("bare").node("n1").created(at(1200)).build()
    other = make_pod("other", "kube-system").owner("ReplicaSet", "rs").node("n1").created(at(1200)).build()
    args = PodLifeTimeArgs(max_pod_life_time_seconds=60, namespaces={"exclude": ["kube-system"]})  # type: ignore[arg-type]
    got = PodLifeTime(args).deschedule(view(NODES, [bare, other]), evictable=EVICTABLE, fits=fits_anywhere)
    assert got == []


@pytest.mark.parametrize(
    ("args", "pods", "want"),
    [
        (RemoveFailedPodsArgs(), [web("f", age=7200, phase="Failed"), web("r", age=7200)], ["f"]),
        (RemoveFailedPodsArgs(), [web("young", age=60, phase="Failed")], []),  # minPodLifetimeSeconds 3600
        (RemoveFailedPodsArgs(min_pod_lifetime_seconds=0), [web("young", age=60, phase="Failed")], ["young"]),
        (
            RemoveFailedPodsArgs(min_pod_lifetime_seconds=0, exclude_owner_kinds=["ReplicaSet"]),
            [web("f", phase="Failed")],
            [],
        ),
    ],
)
def test_remove_failed_pods(args: RemoveFailedPodsArgs, pods: list[PodBuilder], want: list[str]) -> None:
    got = RemoveFailedPods(args).deschedule(
        view(NODES, [p.build() for p in pods]), evictable=EVICTABLE, fits=fits_anywhere
    )
    assert [e.pod.name for e in got] == want


def restarted(name: str, restarts: int, init: int = 0, node: str = "n1", phase: str = "Running") -> Pod:
    raw = web(name, node, phase=phase).obj()
    raw["status"]["containerStatuses"] = [{"name": "c", "restartCount": restarts}]
    raw["status"]["initContainerStatuses"] = [{"name": "i", "restartCount": init}]
    return parse_pod(raw)


@pytest.mark.parametrize(
    ("args", "pods", "want"),
    [
        # Upstream: threshold 3 evicts the pods with 3 or more restarts, the most restarted first on a node.
        (
            RemovePodsHavingTooManyRestartsArgs(pod_restart_threshold=3),
            [restarted("two", 2), restarted("three", 3), restarted("nine", 9), restarted("other", 5, node="n2")],
            ["nine", "three", "other"],
        ),
        (RemovePodsHavingTooManyRestartsArgs(pod_restart_threshold=3), [restarted("init", 1, init=5)], []),
        (
            RemovePodsHavingTooManyRestartsArgs(pod_restart_threshold=3, including_init_containers=True),
            [restarted("init", 1, init=5)],
            ["init"],
        ),
        (
            RemovePodsHavingTooManyRestartsArgs(pod_restart_threshold=1, states=["Running"]),
            [restarted("pending", 4, phase="Pending"), restarted("running", 4)],
            ["running"],
        ),
    ],
)
def test_too_many_restarts(args: RemovePodsHavingTooManyRestartsArgs, pods: list[Pod], want: list[str]) -> None:
    got = RemovePodsHavingTooManyRestarts(args).deschedule(view(NODES, pods), evictable=EVICTABLE, fits=fits_anywhere)
    assert [e.pod.name for e in got] == want


TAINTED = [
    make_node("n1").taint("dedicated", "db", "NoSchedule").build(),
    make_node("n2").taint("soft", "", "PreferNoSchedule").build(),
]


@pytest.mark.parametrize(
    ("args", "pods", "want"),
    [
        (
            RemovePodsViolatingNodeTaintsArgs(),
            [web("p1"), web("p2").toleration("dedicated", "db", "NoSchedule")],
            ["p1"],
        ),
        (RemovePodsViolatingNodeTaintsArgs(), [web("soft", "n2")], []),
        (RemovePodsViolatingNodeTaintsArgs(include_prefer_no_schedule=True), [web("soft", "n2")], ["soft"]),
        (RemovePodsViolatingNodeTaintsArgs(excluded_taints=["dedicated"]), [web("p1")], []),
        (RemovePodsViolatingNodeTaintsArgs(excluded_taints=["dedicated=db"]), [web("p1")], []),
        (RemovePodsViolatingNodeTaintsArgs(excluded_taints=["dedicated=web"]), [web("p1")], ["p1"]),
        (RemovePodsViolatingNodeTaintsArgs(included_taints=["other"]), [web("p1")], []),
        (RemovePodsViolatingNodeTaintsArgs(included_taints=["dedicated=db"]), [web("p1")], ["p1"]),
        (RemovePodsViolatingNodeTaintsArgs(), [web("any").toleration()], []),  # tolerates everything
    ],
)
def test_node_taints(args: RemovePodsViolatingNodeTaintsArgs, pods: list[PodBuilder], want: list[str]) -> None:
    got = RemovePodsViolatingNodeTaints(args).deschedule(
        view(TAINTED, [p.build() for p in pods]), evictable=EVICTABLE, fits=fits_anywhere
    )
    assert [e.pod.name for e in got] == want
    if got:
        assert "does not tolerate taint" in got[0].reason


LABELLED = [make_node("n1").label("disk", "hdd").build(), make_node("n2").label("disk", "ssd").build()]
REQUIRED = RemovePodsViolatingNodeAffinityArgs(node_affinity_type=["requiredDuringSchedulingIgnoredDuringExecution"])
PREFERRED = RemovePodsViolatingNodeAffinityArgs(node_affinity_type=["preferredDuringSchedulingIgnoredDuringExecution"])


@pytest.mark.parametrize(
    ("args", "pod", "fits", "want"),
    [
        (REQUIRED, web("ssd-only").node_affinity("disk", "In", ["ssd"]), fits_anywhere, True),
        (REQUIRED, web("ssd-only").node_affinity("disk", "In", ["ssd"]), fits_nowhere, False),  # nowhere to go
        (REQUIRED, web("hdd-ok").node_affinity("disk", "In", ["hdd"]), fits_anywhere, False),
        (REQUIRED, web("plain"), fits_anywhere, False),  # no node affinity
        (REQUIRED, web("selector").node_selector(disk="ssd"), fits_anywhere, False),  # nodeSelector alone: no
        (PREFERRED, web("likes-ssd").preferred_node_affinity(10, "disk", "In", ["ssd"]), fits_anywhere, True),
        (PREFERRED, web("likes-hdd").preferred_node_affinity(10, "disk", "In", ["hdd"]), fits_anywhere, False),
        (PREFERRED, web("likes-ssd").preferred_node_affinity(10, "disk", "In", ["ssd"]), fits_nowhere, False),
        (REQUIRED, web("likes-ssd").preferred_node_affinity(10, "disk", "In", ["ssd"]), fits_anywhere, False),
    ],
)
def test_node_affinity(args: RemovePodsViolatingNodeAffinityArgs, pod: PodBuilder, fits: object, want: bool) -> None:
    got = RemovePodsViolatingNodeAffinity(args).deschedule(
        view(LABELLED, [pod.build()]),
        evictable=EVICTABLE,
        fits=fits,  # type: ignore[arg-type]
    )
    assert bool(got) is want


ZONES = [
    make_node("n1").label("zone", "a").build(),
    make_node("n2").label("zone", "a").build(),
    make_node("n3").label("zone", "b").build(),
]


def anti(name: str, node: str, *, app: str, avoid: str, key: str = "kubernetes.io/hostname", prio: int = 0) -> Pod:
    return web(name, node).label("app", app).priority(prio).pod_affinity(key, {"app": avoid}, anti=True).build()


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        # Upstream: p1 (anti-affinity to app=db) shares its node with a db pod: p1 goes.
        ([anti("p1", "n1", app="web", avoid="db"), web("db", "n1").label("app", "db").build()], ["p1"]),
        ([anti("p1", "n1", app="web", avoid="db"), web("db", "n2").label("app", "db").build()], []),  # other node
        # By zone: n1 and n2 share zone a.
        ([anti("p1", "n1", app="web", avoid="db", key="zone"), web("db", "n2").label("app", "db").build()], ["p1"]),
        ([anti("p1", "n1", app="web", avoid="db", key="zone"), web("db", "n3").label("app", "db").build()], []),
        # Two pods avoiding each other: the lower priority one goes, and then the other no longer violates.
        (
            [
                anti("high", "n1", app="x", avoid="x", prio=100),
                anti("low", "n1", app="x", avoid="x", prio=1),
            ],
            ["low"],
        ),
        # Another namespace does not match a term without namespaces.
        (
            [
                anti("p1", "n1", app="web", avoid="db"),
                make_pod("db", "other").owner("ReplicaSet", "rs").node("n1").label("app", "db").build(),
            ],
            [],
        ),
    ],
)
def test_inter_pod_anti_affinity(pods: list[Pod], want: list[str]) -> None:
    got = RemovePodsViolatingInterPodAntiAffinity(RemovePodsViolatingInterPodAntiAffinityArgs()).deschedule(
        view(ZONES, pods), evictable=EVICTABLE, fits=fits_anywhere
    )
    assert [e.pod.name for e in got] == want


HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"


def deschedule_config(plugin: str, args: str = "") -> str:
    text = HEAD + f"profiles:\n- name: p\n  plugins:\n    deschedule:\n      enabled:\n      - name: {plugin}\n"
    if args:
        text += f"  pluginConfig:\n  - name: {plugin}\n    args:\n" + "".join(
            f"      {line}\n" for line in args.split(";")
        )
    return text


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (deschedule_config("PodLifeTime"), "profiles[0].pluginConfig[PodLifeTime].args: Required value"),
        (
            deschedule_config("PodLifeTime", "states: [CrashLoopBackOff]"),
            "profiles[0].pluginConfig[0].args.states[0]: Forbidden: CrashLoopBackOff",
        ),
        (
            deschedule_config("PodLifeTime", "maxPodLifeTimeSeconds: 60;exitCodes: [1]"),
            "profiles[0].pluginConfig[0].args.exitCodes: Forbidden",
        ),
        (
            deschedule_config("RemovePodsViolatingNodeAffinity"),
            "profiles[0].pluginConfig[RemovePodsViolatingNodeAffinity].args.nodeAffinityType: Required value",
        ),
        (
            deschedule_config("RemovePodsViolatingNodeTaints", "includedTaints: [a];excludedTaints: [b]"),
            "profiles[0].pluginConfig[0].args.includedTaints: Forbidden",
        ),
        (
            deschedule_config("RemoveFailedPods", "reasons: [OOMKilled]"),
            "profiles[0].pluginConfig[0].args.reasons: Forbidden",
        ),
        (
            HEAD + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled:\n      - name: PodLifeTime\n",
            'profiles[0].plugins.balance.enabled[0].name: Invalid value: "PodLifeTime": a deschedule plugin',
        ),
        (deschedule_config("PodLifeTime", "maxPodLifeTime: 60"), "maxPodLifeTime: Unknown field"),
        (
            deschedule_config("RemovePodsHavingTooManyRestarts"),
            "profiles[0].pluginConfig[RemovePodsHavingTooManyRestarts].args.podRestartThreshold: Invalid value: 0",
        ),
        (
            deschedule_config("RemovePodsHavingTooManyRestarts", "podRestartThreshold: 3;states: [CrashLoopBackOff]"),
            "profiles[0].pluginConfig[0].args.states[0]: Forbidden",
        ),
    ],
)
def test_args_refused_with_path(text: str, want: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_descheduler_config(text)
    assert want in str(info.value)


def test_round_runs_deschedule_plugins_before_balance_ones() -> None:
    text = deschedule_config("PodLifeTime", "maxPodLifeTimeSeconds: 600").replace(
        "      - name: PodLifeTime\n", "      - name: PodLifeTime\n      - name: RemovePodsViolatingNodeTaints\n"
    )
    config, args = parse_descheduler_config(text)
    descheduler = Descheduler(config, args, clock=lambda: NOW)
    pods = [web("old", age=1200).build(), web("new", "n2", age=60).build()]
    nodes = [make_node("n1").build(), make_node("n2").taint("gpu", "", "NoSchedule").build()]
    plan = descheduler.plan(view(nodes, pods))
    assert [(m.name, m.plugin, m.node) for m in plan.migrations] == [
        ("old", "PodLifeTime", "n1"),
        ("new", "RemovePodsViolatingNodeTaints", "n2"),
    ]
    assert plan.migrations[0].reason == "pod is older than 600s"


def test_the_loader_and_the_round_know_the_same_plugins() -> None:
    assert {name: spec.args_model for name, spec in DESCHEDULE_PLUGINS.items()} == UPSTREAM_ARGS


def dup(name: str, node: str = "n1", *, image: str = "nginx", owner: str = "rs") -> Pod:
    return make_pod(name).owner("ReplicaSet", owner).node(node).phase("Running").image(image).build()


@pytest.mark.parametrize(
    ("args", "nodes", "pods", "want"),
    [
        # Three pods of one ReplicaSet on n1 of two nodes: at most ceil(3/2) = 2 stay, the third moves.
        (RemoveDuplicatesArgs(), NODES, [dup("a"), dup("b"), dup("c")], ["c"]),
        # Four on n1, none on n2: 2 move.
        (RemoveDuplicatesArgs(), NODES, [dup("a"), dup("b"), dup("c"), dup("d")], ["c", "d"]),
        # One node only: nowhere to spread to.
        (RemoveDuplicatesArgs(), NODES[:1], [dup("a"), dup("b"), dup("c")], []),
        # Other images are no duplicates; nor are other owners.
        (RemoveDuplicatesArgs(), NODES, [dup("a"), dup("b", image="redis"), dup("c", owner="other")], []),
        (RemoveDuplicatesArgs(exclude_owner_kinds=["ReplicaSet"]), NODES, [dup("a"), dup("b"), dup("c")], []),
        # n2 has a taint the pods do not tolerate: they can run on n1 only.
        (
            RemoveDuplicatesArgs(),
            [make_node("n1").build(), make_node("n2").taint("gpu", "", "NoSchedule").build()],
            [dup("a"), dup("b"), dup("c")],
            [],
        ),
    ],
)
def test_remove_duplicates(args: RemoveDuplicatesArgs, nodes: list[Node], pods: list[Pod], want: list[str]) -> None:
    got = RemoveDuplicates(args).deschedule(view(nodes, pods), evictable=EVICTABLE, fits=fits_anywhere)
    assert [e.pod.name for e in got] == want


def test_remove_duplicates_is_a_balance_plugin() -> None:
    with pytest.raises(ConfigError) as info:
        parse_descheduler_config(deschedule_config("RemoveDuplicates"))
    assert 'profiles[0].plugins.deschedule.enabled[0].name: Invalid value: "RemoveDuplicates": a balance plugin' in str(
        info.value
    )
    text = HEAD + "profiles:\n- name: p\n  plugins:\n    balance:\n      enabled:\n      - name: RemoveDuplicates\n"
    config, args = parse_descheduler_config(text)
    plan = Descheduler(config, args, clock=lambda: NOW).plan(view(NODES, [dup("a"), dup("b"), dup("c")]))
    assert [(m.name, m.plugin) for m in plan.migrations] == [("c", "RemoveDuplicates")]
