"""Pod parsing: kube-scheduler's PodRequests / NonMissingContainerRequests / PodLimits, QoS, ports, fields."""

from typing import Any

import pytest

from apis.core.frozendict import FrozenDict
from apis.core.parse import parse_pod
from apis.core.types import HostPort, Pod, TaintEffect, Toleration
from tests.builders import PodBuilder, make_pod

GI = 2**30
MI = 2**20
DEFAULT_CPU = 100
DEFAULT_MEMORY = 200 * MI


@pytest.mark.parametrize(
    ("pod", "want_requests"),
    [
        pytest.param(make_pod("p"), {}, id="best-effort-requests-nothing"),
        pytest.param(make_pod("p").req(cpu="500m", memory="1Gi"), {"cpu": 500, "memory": GI}, id="one-container"),
        pytest.param(
            make_pod("p").req(cpu="1").container(requests={"cpu": "500m", "memory": "1Gi"}),
            {"cpu": 1500, "memory": GI},
            id="containers-summed",
        ),
        pytest.param(
            make_pod("p").limit(cpu="2", memory="1Gi"),
            {"cpu": 2000, "memory": GI},
            id="limits-default-requests",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").limit(cpu="2", memory="1Gi"),
            {"cpu": 1000, "memory": GI},
            id="explicit-request-beats-limit",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").init_container(requests={"cpu": "2"}),
            {"cpu": 2000},
            id="init-max-wins",
        ),
        pytest.param(
            make_pod("p").req(cpu="3").init_container(requests={"cpu": "2", "memory": "1Gi"}),
            {"cpu": 3000, "memory": GI},
            id="max-per-resource",
        ),
        pytest.param(
            make_pod("p")
            .req(cpu="1")
            .init_container(requests={"cpu": "500m"}, sidecar=True)
            .init_container(requests={"cpu": "1"}),
            {"cpu": 1500},
            id="sidecar-added-to-sum",
        ),
        pytest.param(
            make_pod("p")
            .req(cpu="100m")
            .init_container(requests={"cpu": "1"}, sidecar=True)
            .init_container(requests={"cpu": "2"}),
            {"cpu": 3000},
            id="init-after-sidecar-includes-it",
        ),
        pytest.param(
            make_pod("p")
            .req(cpu="100m")
            .init_container(requests={"cpu": "2"})
            .init_container(requests={"cpu": "1"}, sidecar=True),
            {"cpu": 2000},
            id="init-before-sidecar-excludes-it",
        ),
        pytest.param(
            make_pod("p").req(cpu="1", memory="1Gi").overhead(cpu="250m", memory="120Mi"),
            {"cpu": 1250, "memory": GI + 120 * MI},
            id="overhead-added",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").init_container(requests={"cpu": "2"}).overhead(cpu="100m"),
            {"cpu": 2100},
            id="overhead-after-init-max",
        ),
        pytest.param(
            make_pod("p").req(cpu="1", memory="1Gi").pod_resources(requests={"cpu": "4"}),
            {"cpu": 4000, "memory": GI},
            id="pod-level-request-overrides",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").pod_resources(limits={"cpu": "4", "memory": "2Gi"}),
            {"cpu": 1000, "memory": 2 * GI},
            id="pod-level-limits-default-missing-requests",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").pod_resources(requests={"cpu": "2"}).overhead(cpu="100m"),
            {"cpu": 2100},
            id="overhead-on-top-of-pod-level",
        ),
        pytest.param(
            make_pod("p").req({"nvidia.com/gpu": 1}, ephemeral_storage="1Gi"),
            {"nvidia.com/gpu": 1, "ephemeral-storage": GI},
            id="extended-and-ephemeral",
        ),
        pytest.param(
            make_pod("p").req(cpu="0.5m").container(requests={"cpu": "0.5m"}),
            {"cpu": 1},
            id="rounding-happens-on-the-total",
        ),
        pytest.param(make_pod("p").req(cpu=0), {"cpu": 0}, id="explicit-zero-kept"),
    ],
)
def test_pod_requests(pod: PodBuilder, want_requests: dict[str, int]) -> None:
    assert pod.build().requests == want_requests


@pytest.mark.parametrize(
    ("pod", "want_cpu", "want_memory"),
    [
        pytest.param(make_pod("p"), DEFAULT_CPU, DEFAULT_MEMORY, id="missing-gets-defaults"),
        pytest.param(make_pod("p").req(cpu="0", memory="0"), 0, 0, id="explicit-zero-kept"),
        pytest.param(make_pod("p").req(cpu="2"), 2000, DEFAULT_MEMORY, id="only-memory-defaulted"),
        pytest.param(
            make_pod("p").req(cpu="1").container(), 1000 + DEFAULT_CPU, 2 * DEFAULT_MEMORY, id="per-container"
        ),
        pytest.param(
            make_pod("p").req(cpu="1", memory="1Gi").init_container(),
            1000,
            GI,
            id="init-container-defaults-lose-to-sum",
        ),
        pytest.param(
            make_pod("p").req(cpu="50m", memory="1Mi").init_container(),
            DEFAULT_CPU,
            DEFAULT_MEMORY,
            id="init-container-defaults-win",
        ),
        pytest.param(
            make_pod("p").req(cpu="1", memory="1Gi").init_container(sidecar=True),
            1000 + DEFAULT_CPU,
            GI + DEFAULT_MEMORY,
            id="sidecar-defaults-added",
        ),
        pytest.param(
            make_pod("p").overhead(cpu="10m", memory="1Mi"),
            DEFAULT_CPU + 10,
            DEFAULT_MEMORY + MI,
            id="overhead-added",
        ),
        pytest.param(
            make_pod("p").pod_resources(requests={"cpu": "3", "memory": "1Gi"}),
            3000,
            GI,
            id="pod-level-overrides",
        ),
    ],
)
def test_non_zero_requests(pod: PodBuilder, want_cpu: int, want_memory: int) -> None:
    built = pod.build()
    assert (built.non_zero_cpu, built.non_zero_memory) == (want_cpu, want_memory)


@pytest.mark.parametrize(
    ("pod", "want_limits"),
    [
        pytest.param(make_pod("p"), {}, id="none"),
        pytest.param(
            make_pod("p").limit(cpu="1").container(limits={"cpu": "2", "memory": "1Gi"}),
            {"cpu": 3000, "memory": GI},
            id="summed",
        ),
        pytest.param(make_pod("p").limit(cpu="1").init_container(limits={"cpu": "4"}), {"cpu": 4000}, id="init-max"),
        pytest.param(
            make_pod("p").limit(cpu="1").overhead(cpu="100m", memory="1Mi"),
            {"cpu": 1100},
            id="overhead-only-where-limited",
        ),
        pytest.param(
            make_pod("p").limit(cpu="1").pod_resources(limits={"cpu": "3"}),
            {"cpu": 3000},
            id="pod-level-overrides",
        ),
    ],
)
def test_pod_limits(pod: PodBuilder, want_limits: dict[str, int]) -> None:
    assert pod.build().limits == want_limits


@pytest.mark.parametrize(
    ("pod", "want_qos"),
    [
        pytest.param(make_pod("p"), "BestEffort", id="nothing-set"),
        pytest.param(make_pod("p").req(cpu="1"), "Burstable", id="request-only"),
        pytest.param(make_pod("p").limit(cpu="1", memory="1Gi"), "Guaranteed", id="limits-only-default-requests"),
        pytest.param(make_pod("p").req(cpu="1", memory="1Gi").limit(cpu="1", memory="1Gi"), "Guaranteed", id="equal"),
        pytest.param(
            make_pod("p").req(cpu="500m", memory="1Gi").limit(cpu="1", memory="1Gi"),
            "Burstable",
            id="unequal",
        ),
        pytest.param(make_pod("p").limit(cpu="1"), "Burstable", id="cpu-only-guaranteed-container"),
        pytest.param(
            make_pod("p").limit(cpu="1", memory="1Gi").container(),
            "Burstable",
            id="guaranteed-plus-best-effort",
        ),
        pytest.param(
            make_pod("p").limit(cpu="1", memory="1Gi").init_container(limits={"cpu": "1", "memory": "1Gi"}),
            "Guaranteed",
            id="init-containers-count",
        ),
        pytest.param(make_pod("p").req(ephemeral_storage="1Gi"), "BestEffort", id="only-non-qos-resources"),
        pytest.param(make_pod("p").req(cpu="1").qos("Guaranteed"), "Guaranteed", id="status-wins"),
        pytest.param(
            make_pod("p").req(cpu="500m").pod_resources(limits={"cpu": "1", "memory": "1Gi"}),
            "Burstable",
            id="pod-level-request-defaults-from-containers",
        ),
        pytest.param(
            make_pod("p").pod_resources(limits={"cpu": "1", "memory": "1Gi"}),
            "Guaranteed",
            id="pod-level-limits-only",
        ),
    ],
)
def test_qos_class(pod: PodBuilder, want_qos: str) -> None:
    assert pod.build().qos_class == want_qos


def _port(host_port: int, **extra: Any) -> dict[str, Any]:
    return {"containerPort": 80, "hostPort": host_port, **extra}


@pytest.mark.parametrize(
    ("containers", "init_containers", "want_ports"),
    [
        pytest.param([{"name": "a", "ports": [{"containerPort": 80}]}], [], (), id="no-host-port"),
        pytest.param([{"name": "a", "ports": [_port(0)]}], [], (), id="zero-host-port-ignored"),
        pytest.param([{"name": "a", "ports": [_port(8080)]}], [], (HostPort(8080, "TCP", "0.0.0.0"),), id="defaults"),
        pytest.param(
            [{"name": "a", "ports": [_port(53, protocol="UDP", hostIP="10.0.0.1")]}],
            [],
            (HostPort(53, "UDP", "10.0.0.1"),),
            id="explicit",
        ),
        pytest.param(
            [{"name": "a", "ports": [_port(1)]}, {"name": "b", "ports": [_port(2), _port(3)]}],
            [],
            (HostPort(1), HostPort(2), HostPort(3)),
            id="all-containers-in-order",
        ),
        pytest.param(
            [{"name": "a"}],
            [
                {"name": "i", "ports": [_port(7)]},
                {"name": "s", "restartPolicy": "Always", "ports": [_port(9)]},
            ],
            (HostPort(9),),
            id="sidecar-ports-only",
        ),
    ],
)
def test_host_ports(
    containers: list[dict[str, Any]], init_containers: list[dict[str, Any]], want_ports: tuple[HostPort, ...]
) -> None:
    obj = {"metadata": {"name": "p"}, "spec": {"containers": containers, "initContainers": init_containers}}
    assert parse_pod(obj).host_ports == want_ports


def test_full_pod_fields() -> None:
    obj = (
        make_pod("web-1", namespace="shop")
        .label("app", "web")
        .annotation("a", "b")
        .created("2024-05-01T10:00:00Z")
        .owner("ReplicaSet", "web-abc")
        .priority(1000, "high")
        .preemption_policy("Never")
        .scheduler("koord-scheduler")
        .node("n1")
        .node_selector({"disk": "ssd"})
        .toleration("dedicated", "web", "NoSchedule")
        .toleration(seconds=30, effect="NoExecute")
        .gate("wait")
        .pvc("data")
        .ephemeral_volume("scratch")
        .image("nginx:1.25")
        .init_container("setup", image="busybox")
        .nominated("n2")
        .phase("Running")
        .condition("PodScheduled", "True")
        .obj()
    )
    pod = parse_pod(obj)
    assert (pod.key, pod.uid, pod.labels, pod.annotations) == (
        "shop/web-1",
        "uid-shop-web-1",
        {"app": "web"},
        {"a": "b"},
    )
    assert pod.meta.creation_timestamp == 1714557600.0
    assert [(r.kind, r.name, r.controller) for r in pod.meta.owner_references] == [("ReplicaSet", "web-abc", True)]
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == (1000, "high", "Never")
    assert (pod.scheduler_name, pod.node_name, pod.nominated_node_name) == ("koord-scheduler", "n1", "n2")
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.tolerations == (
        Toleration("dedicated", "Equal", "web", TaintEffect.NO_SCHEDULE),
        Toleration("", "Exists", "", TaintEffect.NO_EXECUTE, 30),
    )
    assert pod.scheduling_gates == ("wait",)
    assert pod.pvc_names == ("data", "web-1-scratch")
    assert pod.images == ("busybox", "nginx:1.25")
    assert (pod.phase, pod.conditions, pod.is_terminal) == ("Running", {"PodScheduled": "True"}, False)


def test_defaults_for_a_minimal_pod() -> None:
    pod = parse_pod({"metadata": {"name": "p"}}, require_containers=False)
    assert pod == Pod(meta=pod.meta, qos_class="BestEffort", non_zero_cpu=0, non_zero_memory=0)
    assert (pod.namespace, pod.scheduler_name, pod.priority, pod.phase, pod.node_selector) == (
        "default",
        "default-scheduler",
        0,
        "Pending",
        None,
    )


def test_parsed_pod_is_hashable_and_immutable() -> None:
    pod = make_pod("p").req(cpu="1").label("a", "b").node_selector(x="y").build()
    assert hash(pod) == hash(make_pod("p").req(cpu="1").label("a", "b").node_selector(x="y").build())
    assert isinstance(pod.requests, FrozenDict)
    with pytest.raises(TypeError):
        pod.labels["a"] = "c"  # type: ignore[index]


def test_parse_does_not_mutate_input() -> None:
    obj = make_pod("p").limit(cpu="1").obj()
    before = make_pod("p").limit(cpu="1").obj()
    parse_pod(obj)
    assert obj == before


def test_condition_transition_times() -> None:
    obj = make_pod("p").obj()
    obj["status"] = {
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"},
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00+00:00"},
            {"type": "Ready", "status": "False"},
        ]
    }
    pod = parse_pod(obj)
    assert dict(pod.conditions) == {"PodScheduled": "True", "Initialized": "True", "Ready": "False"}
    assert dict(pod.condition_times) == {"PodScheduled": 1767225610.0, "Initialized": 1767225660.0}


def test_bad_condition_transition_time_names_the_field() -> None:
    obj = make_pod("p").obj()
    obj["status"] = {"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "yesterday"}]}
    with pytest.raises(ValueError) as err:
        parse_pod(obj)
    assert "status.conditions[0].lastTransitionTime" in str(err.value)


def test_restart_counts_are_summed_per_kind_of_container() -> None:
    raw = make_pod("p").obj()
    raw["status"] = {
        "containerStatuses": [{"name": "a", "restartCount": 3}, {"name": "b", "restartCount": 4}],
        "initContainerStatuses": [{"name": "i", "restartCount": 2}],
    }
    pod = parse_pod(raw)
    assert (pod.restart_count, pod.init_restart_count) == (7, 2)
    plain = parse_pod(make_pod("q").obj())
    assert (plain.restart_count, plain.init_restart_count) == (0, 0)


def test_a_bad_restart_count_is_refused_with_its_path() -> None:
    raw = make_pod("p").obj()
    raw["status"] = {"containerStatuses": [{"name": "a", "restartCount": "many"}]}
    with pytest.raises(ValueError) as err:
        parse_pod(raw)
    assert "status.containerStatuses[0].restartCount" in str(err.value)
