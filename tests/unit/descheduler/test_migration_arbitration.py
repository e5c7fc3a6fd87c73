"""Arbitration of PodMigrationJobs: the tables of Koordinator's ``arbitrator/filter_test.go`` and
``migration/util/util_test.go``, the eviction gates, and the object limiters."""

from __future__ import annotations

import pytest

from apis.config.descheduler import MigrationControllerArgs
from apis.config.descheduler_selectors import LabelSelector, Namespaces
from apis.core.types import Pod
from koord_scheduler.descheduler.evictor import eviction_filter
from koord_scheduler.descheduler.migration.arbitration import (
    Arbitrator,
    Limits,
    MigratingIndex,
    ObjectLimiter,
    ObjectLimiters,
    expected_replicas_reason,
    limit_reason,
    object_limiters,
    scaled_limit,
)
from tests.builders import PodBuilder, make_pod


def pod(name: str, *, workload: str = "ss-1", node: str = "node-a", ns: str = "default", ready: bool = True) -> Pod:
    b = make_pod(name, ns).owner("StatefulSet", workload).node(node).phase("Running")
    if ready:
        b = b.condition("Ready")
    return b.build()


def workload(n: int, name: str = "ss-1", *, unavailable: int = 0) -> list[Pod]:
    return [pod(f"{name}-{i}", workload=name, ready=i >= unavailable) for i in range(n)]


@pytest.mark.parametrize(
    ("replicas", "value", "want"),
    [
        (6, "80%", 4),  # Koordinator TestGetMaxUnavailable case1
        (6, "150%", 6),  # case2
        (6, 5, 5),  # case3
        (6, 7, 6),  # case4
        (6, None, 2),  # case5: unset, 4..10 replicas
        (50, "0%", 1),  # case6
        (6, 0, 1),  # case7: a given zero is one
        (100, None, 10),  # unset, above 10: 10%
        (3, None, 1),
        (1, None, 1),
    ],
)
def test_scaled_limit(replicas: int, value: int | str | None, want: int) -> None:
    assert scaled_limit(replicas, value) == want


@pytest.mark.parametrize(
    ("migrating", "cap", "same_pod", "want"),
    [
        (0, 1, False, True),
        (1, 1, True, True),  # the pod's own job is not counted
        (1, 1, False, False),
        (1, 2, False, True),
        (2, 2, False, False),
        (5, 0, False, True),  # 0: unlimited
    ],
)
def test_max_migrating_globally(migrating: int, cap: int, same_pod: bool, want: bool) -> None:
    target = pod("p", workload="w")
    others = [pod(f"o{i}", workload=f"w{i}", node=f"n{i}", ns=f"ns{i}") for i in range(migrating)]
    if same_pod and others:
        others[0] = target
    limits = Limits(max_migrating_globally=cap, max_migrating_per_node=None, max_unavailable_per_workload=100)
    assert (limit_reason(target, others, workload(20, "w"), limits) == "") is want


@pytest.mark.parametrize(
    ("on_same_node", "cap", "want"),
    [(0, 2, True), (1, 2, True), (2, 2, False), (2, 3, True), (1, 1, False)],
)
def test_max_migrating_per_node(on_same_node: int, cap: int, want: bool) -> None:
    target = pod("p", workload="w", node="node-a")
    others = [pod(f"o{i}", workload=f"w{i}", node="node-a") for i in range(on_same_node)]
    others += [pod(f"x{i}", workload=f"x{i}", node="node-b") for i in range(3)]
    limits = Limits(max_migrating_per_node=cap, max_unavailable_per_workload=100)
    assert (limit_reason(target, others, workload(20, "w"), limits) == "") is want


def test_max_migrating_per_node_defaults_to_two() -> None:
    limits = Limits.of(MigrationControllerArgs())
    target = pod("p", workload="w")
    two = [pod(f"o{i}", workload=f"w{i}") for i in range(2)]
    assert "maxMigratingPerNode is 2" in limit_reason(target, two, workload(20, "w"), limits)
    assert limit_reason(target, two[:1], workload(20, "w"), limits) == ""


@pytest.mark.parametrize(("in_namespace", "cap", "want"), [(0, 1, True), (1, 1, False), (1, 2, True), (2, 2, False)])
def test_max_migrating_per_namespace(in_namespace: int, cap: int, want: bool) -> None:
    target = pod("p", workload="w")
    others = [pod(f"o{i}", workload=f"w{i}", node=f"n{i}") for i in range(in_namespace)]
    others += [pod(f"x{i}", workload=f"x{i}", node=f"m{i}", ns="other") for i in range(3)]
    limits = Limits(max_migrating_per_node=None, max_migrating_per_namespace=cap, max_unavailable_per_workload=100)
    assert (limit_reason(target, others, workload(20, "w"), limits) == "") is want


# Koordinator TestFilterMaxMigratingPerWorkload: totalReplicas=10.
@pytest.mark.parametrize(
    ("migrating", "cap", "same_pod", "same_workload", "want"),
    [
        (0, 1, False, False, True),
        (1, 1, True, True, True),
        (1, 1, False, True, False),
        (1, 1, False, False, True),
        (2, 2, True, True, True),
        (2, 2, False, True, False),
        (2, 2, False, False, True),
    ],
)
def test_max_migrating_per_workload(migrating: int, cap: int, same_pod: bool, same_workload: bool, want: bool) -> None:
    pods = workload(10, "ss-1")
    target = pods[-1]
    if same_workload:
        others = pods[:migrating]
        if same_pod:
            others[0] = target
    else:
        others = workload(migrating, "ss-2")
    limits = Limits(max_migrating_per_node=None, max_migrating_per_workload=cap, max_unavailable_per_workload=10)
    assert (limit_reason(target, others, pods, limits) == "") is want


# Koordinator TestFilterMaxUnavailablePerWorkload: totalReplicas=10.
@pytest.mark.parametrize(
    ("unavailable", "migrating", "cap", "same_workload", "want"),
    [
        (0, 0, 1, True, True),
        (1, 0, 1, True, False),
        (0, 1, 1, True, False),
        (1, 1, 1, True, False),
        (0, 0, 2, True, True),
        (1, 0, 2, True, True),
        (0, 1, 2, True, True),
        (1, 1, 2, True, False),
        (0, 2, 2, False, True),
    ],
)
def test_max_unavailable_per_workload(
    unavailable: int, migrating: int, cap: int, same_workload: bool, want: bool
) -> None:
    pods = workload(10, "ss-1", unavailable=unavailable)
    target = pods[-1]
    # Migrating pods are Ready ones other than the target (and the unavailable ones).
    others = pods[unavailable : unavailable + migrating] if same_workload else workload(migrating, "ss-2")
    limits = Limits(max_migrating_per_node=None, max_migrating_per_workload=10, max_unavailable_per_workload=cap)
    assert (limit_reason(target, others, pods, limits) == "") is want


# Koordinator TestFilterExpectedReplicas.
@pytest.mark.parametrize(
    ("replicas", "max_unavailable", "skip", "want"),
    [(1, 1, False, False), (100, 100, False, False), (100, 10, False, True), (1, 1, True, True)],
)
def test_expected_replicas(replicas: int, max_unavailable: int, skip: bool, want: bool) -> None:
    pods = workload(replicas)
    limits = Limits(max_unavailable_per_workload=max_unavailable, skip_check_expected_replicas=skip)
    assert (expected_replicas_reason(pods[0], pods, limits) == "") is want


def test_skipped_gates_let_the_pod_through() -> None:
    pods = workload(10)
    others = pods[:3]
    args = MigrationControllerArgs(
        max_migrating_globally=1,
        max_unavailable_per_workload=1,
        skip_eviction_gates=["MaxMigratingGlobally", "MaxMigratingPerNode", "MaxUnavailablePerWorkload"],
        max_migrating_per_workload=5,
    )
    assert limit_reason(pods[-1], others, pods, Limits.of(args)) == ""
    assert "maxMigratingGlobally" in limit_reason(
        pods[-1], others, pods, Limits.of(args.model_copy(update={"skip_eviction_gates": None}))
    )


LOCAL_STORAGE = "mounts local storage (emptyDir or hostPath)"


def _owned(name: str) -> PodBuilder:
    return make_pod(name).owner("ReplicaSet", "r").node("n")


def _bare(name: str, phase: str = "Running") -> Pod:
    return make_pod(name).node("node-a").phase(phase).build()


@pytest.mark.parametrize(
    ("args", "target", "want"),
    [
        (MigrationControllerArgs(), _bare("b"), "no controller (a bare pod)"),
        (MigrationControllerArgs(evict_all_bare_pods=True), _bare("b"), ""),
        (MigrationControllerArgs(evict_failed_bare_pods=True), _bare("b"), "no controller (a bare pod)"),
        (MigrationControllerArgs(evict_failed_bare_pods=True), _bare("b", "Failed"), ""),
        (MigrationControllerArgs(skip_eviction_gates=["BarePods"]), _bare("b"), ""),
        (
            MigrationControllerArgs(),
            make_pod("c").owner("ReplicaSet", "r").node("n").priority(2_000_000_000).build(),
            "system-critical",
        ),
        (
            MigrationControllerArgs(evict_system_critical_pods=True),
            make_pod("c").owner("ReplicaSet", "r").node("n").priority(2_000_000_000).build(),
            "",
        ),
        (
            MigrationControllerArgs(priority_threshold={"value": 100}),
            make_pod("c").owner("ReplicaSet", "r").node("n").priority(100).build(),
            "priority 100 is not under the threshold 100",
        ),
        (
            MigrationControllerArgs(priority_threshold={"value": 100}),
            make_pod("c").owner("ReplicaSet", "r").node("n").priority(99).build(),
            "",
        ),
        (
            MigrationControllerArgs(ignore_pvc_pods=True),
            make_pod("v").owner("ReplicaSet", "r").node("n").pvc("data").build(),
            "mounts a PersistentVolumeClaim",
        ),
        (
            MigrationControllerArgs(ignore_pvc_pods=True, skip_eviction_gates=["PVC"]),
            make_pod("v").owner("ReplicaSet", "r").node("n").pvc("data").build(),
            "",
        ),
        (MigrationControllerArgs(), make_pod("v").owner("ReplicaSet", "r").node("n").pvc("data").build(), ""),
        (
            MigrationControllerArgs(label_selector=LabelSelector(match_labels={"app": "web"})),
            make_pod("l").owner("ReplicaSet", "r").node("n").label("app", "db").build(),
            "does not match the labelSelector",
        ),
        (
            MigrationControllerArgs(label_selector=LabelSelector(match_labels={"app": "web"})),
            make_pod("l").owner("ReplicaSet", "r").node("n").label("app", "web").build(),
            "",
        ),
        (
            MigrationControllerArgs(namespaces=Namespaces(exclude=["default"])),
            make_pod("n").owner("ReplicaSet", "r").node("n").build(),
            "namespace default is excluded",
        ),
        (
            MigrationControllerArgs(namespaces=Namespaces(exclude=["default"]), skip_eviction_gates=["Namespaces"]),
            make_pod("n").owner("ReplicaSet", "r").node("n").build(),
            "",
        ),
        (
            MigrationControllerArgs(),
            make_pod("e")
            .owner("ReplicaSet", "r")
            .node("n")
            .annotation("scheduling.koordinator.sh/eviction-cost", "2147483647")
            .build(),
            "its eviction cost is the maximum",
        ),
        (MigrationControllerArgs(), _owned("s").inline_volume("cache", "emptyDir").build(), LOCAL_STORAGE),
        (
            MigrationControllerArgs(),
            _owned("s").inline_volume("logs", "hostPath", path="/var/log").build(),
            LOCAL_STORAGE,
        ),
        (
            MigrationControllerArgs(evict_local_storage_pods=True),
            _owned("s").inline_volume("c", "emptyDir").build(),
            "",
        ),
        (
            MigrationControllerArgs(skip_eviction_gates=["LocalStorage"]),
            _owned("s").inline_volume("c", "emptyDir").build(),
            "",
        ),
        (MigrationControllerArgs(), _owned("s").inline_volume("conf", "configMap", name="c").build(), ""),
        (
            MigrationControllerArgs(scheduler_names=["koord-scheduler"]),
            _owned("k").build(),
            "its scheduler default-scheduler is not one of schedulerNames",
        ),
        (
            MigrationControllerArgs(scheduler_names=["koord-scheduler"]),
            _owned("k").scheduler("koord-scheduler").build(),
            "",
        ),
        (  # Koordinator checks schedulerNames only for ReservationFirst jobs
            MigrationControllerArgs(scheduler_names=["koord-scheduler"], default_job_mode="EvictDirectly"),
            _owned("k").build(),
            "",
        ),
    ],
)
def test_eviction_gates(args: MigrationControllerArgs, target: Pod, want: str) -> None:
    assert eviction_filter(args).reason(target) == want


def test_verdict_fails_gates_waits_on_limits_and_honours_the_evict_annotation() -> None:
    arbitrator = Arbitrator.of(MigrationControllerArgs(max_migrating_globally=1))
    pods = workload(10)
    assert arbitrator.verdict(pods[0], migrating=[], workload=pods, now=0).fail == ""
    assert (
        "maxMigratingGlobally"
        in arbitrator.verdict(pods[0], migrating=[pod("o", workload="w2")], workload=pods, now=0).wait
    )
    single = workload(1, "lonely")
    assert "expects 1 replicas" in arbitrator.verdict(single[0], migrating=[], workload=single, now=0).fail
    annotated = (
        make_pod("a")
        .owner("StatefulSet", "lonely")
        .node("n")
        .annotation("descheduler.alpha.kubernetes.io/evict", "true")
        .build()
    )
    assert arbitrator.verdict(
        annotated, migrating=[pod("o", workload="w2")], workload=single, now=0
    ) == arbitrator.verdict(pods[0], migrating=[], workload=pods, now=0)


def test_object_limiters_default_to_a_workload_limiter_over_five_minutes() -> None:
    assert object_limiters(MigrationControllerArgs()) == {"workload": ObjectLimiter(300.0)}
    given = MigrationControllerArgs(object_limiters={"namespace": {"duration": "1m", "maxMigrating": 2, "burst": 2}})
    assert object_limiters(given) == {"namespace": ObjectLimiter(60.0, 2, 2)}


def test_workload_limiter_spaces_evictions_of_one_workload() -> None:
    # 10 replicas, maxMigratingPerWorkload unset: 2 per 300 s, burst 1 -> one eviction per 150 s.
    limiters = ObjectLimiters({"workload": ObjectLimiter(300.0)})
    pods = workload(10)
    other = workload(10, "ss-2")
    assert limiters.exceeded(pods[0], replicas=10, now=0) == ""
    limiters.track(pods[0], replicas=10, now=0)
    assert limiters.exceeded(pods[1], replicas=10, now=1) == "workload"
    assert limiters.exceeded(other[0], replicas=10, now=1) == "", "another workload has its own bucket"
    assert limiters.exceeded(pods[1], replicas=10, now=149) == "workload"
    assert limiters.exceeded(pods[1], replicas=10, now=151) == ""
    limiters.track(pods[1], replicas=10, now=151)
    assert limiters.exceeded(pods[2], replicas=10, now=152) == "workload"
    assert limiters.exceeded(pods[2], replicas=10, now=151 + 451) == "", "forgotten after 1.5 x duration"


def test_namespace_limiter_takes_an_integer_and_zero_duration_disables() -> None:
    limiters = ObjectLimiters({"namespace": ObjectLimiter(60.0, 1, 1), "workload": ObjectLimiter(0.0)})
    a, b = pod("a", workload="w1"), pod("b", workload="w2")
    limiters.track(a, replicas=10, now=0)
    assert limiters.exceeded(b, replicas=10, now=30) == "namespace"
    assert limiters.exceeded(b, replicas=10, now=61) == ""


def test_migrating_index_kept_up_to_date_counts_as_one_built_afresh() -> None:
    a, b, c = pod("a", node="n1"), pod("b", node="n1", workload="w2"), pod("c", node="n2", ns="other")
    index = MigratingIndex()
    index.put("job-a", a)
    index.put("job-b", b)
    index.put("job-c", c)
    index.put("job-b", None)  # finished
    index.put("job-a2", a)  # a second job for the same pod
    fresh = MigratingIndex.of([a, c, a])
    target = pod("t", node="n1")
    for got in (index, fresh):
        assert (got.total(target), got.on_node(target), got.in_namespace(target)) == (3, 2, 2)
        assert (got.total(a), got.on_node(a), got.in_namespace(a)) == (1, 0, 0)  # its own jobs are not counted
        assert got.of_workload(target, "uid-ss-1") == {"default/a"}
        assert got.of_workload(a, "uid-ss-1") == set()
    index.put("job-a", None)
    index.put("job-a2", None)
    index.put("job-c", None)
    assert index.pods == {} and index.by_workload == {} and index.total(target) == 0


def test_arbitration_does_not_check_scheduler_names() -> None:
    """Koordinator's ``reservationFilter`` runs when a plugin asks to evict, not in the arbitration of jobs."""
    arbitrator = Arbitrator.of(MigrationControllerArgs(scheduler_names=["koord-scheduler"]))
    assert arbitrator.gates.reason(_owned("k").build()) == ""
    assert eviction_filter(MigrationControllerArgs(scheduler_names=["koord-scheduler"])).reason(_owned("k").build())
