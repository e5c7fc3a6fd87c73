"""Every range, count, duration and quantity a user can write is bounded before it is used: a cpuset of
four billion CPUs, a PodGroup timeout of 10^400 seconds, a NodeMetric report interval beyond int64 are
refused quickly with the object and the field named, never expanded, never a traceback."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from apis.extension.numa import MAX_CPUS, parse_cpuset, resource_status_of
from apis.scheduling.podgroup import parse_pod_group
from apis.slo.nodemetric_record import parse_node_metric
from koord_scheduler.app.cli import new_scheduler_command
from koord_scheduler.plugins.nodenumaresource.nrt import parse_node_resource_topology
from koordlet.system.resources import parse_cpuset as koordlet_parse_cpuset

REPO = Path(__file__).resolve().parents[3]
NOW = "2026-01-01T00:05:00Z"
GOOGOL_CUBED = 10**400


@pytest.mark.parametrize("parse", [parse_cpuset, koordlet_parse_cpuset], ids=["apis", "koordlet"])
@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("0-4000000000", "cpuset element '0-4000000000' goes beyond the largest CPU id 8191", id="range"),
        pytest.param("4000000000", "cpuset element '4000000000' goes beyond the largest CPU id 8191", id="single"),
        pytest.param("1" + "0" * 400, "goes beyond the largest CPU id 8191", id="400-digits"),
        pytest.param("5-3", "invalid cpuset range '5-3'", id="backwards"),
        pytest.param("-1", "invalid cpuset", id="negative"),
    ],
)
def test_a_cpuset_beyond_any_machine_is_refused_before_expansion(parse: Any, text: str, want: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ValueError, match="cpuset") as info:
        parse(text)
    assert want in str(info.value)
    assert time.perf_counter() - started < 0.1


def test_overlapping_ranges_cost_no_more_than_the_cpus() -> None:
    started = time.perf_counter()
    cpus = parse_cpuset(",".join([f"0-{MAX_CPUS - 1}"] * 20_000))  # 230 KB, under the annotation limit
    assert len(cpus) == MAX_CPUS
    assert time.perf_counter() - started < 1.0
    assert parse_cpuset("0-3, 2-5,9,9") == frozenset({0, 1, 2, 3, 4, 5, 9})


def test_resource_status_with_a_huge_cpuset_names_the_pod_and_annotation() -> None:
    annotations = {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "0-4000000000"})}
    with pytest.raises(ValueError) as info:
        resource_status_of(annotations, "pod ns/p")
    assert str(info.value).startswith(
        "pod ns/p: annotation scheduling.koordinator.sh/resource-status field cpuset: cpuset element"
    )


def test_nrt_reserved_cpus_beyond_any_machine_name_the_annotation() -> None:
    policy = json.dumps({"policy": "static", "reservedCPUs": "0-4000000000"})
    obj = {"metadata": {"name": "n1", "annotations": {"kubelet.koordinator.sh/cpu-manager-policy": policy}}}
    with pytest.raises(ValueError) as info:
        parse_node_resource_topology(obj)
    assert str(info.value).startswith(
        "NodeResourceTopology n1: annotation kubelet.koordinator.sh/cpu-manager-policy: cpuset element"
    )


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param(
            {"minMember": 2, "scheduleTimeoutSeconds": GOOGOL_CUBED},
            "PodGroup ns/g: spec.scheduleTimeoutSeconds: must fit a 32-bit integer (at most 2147483647), "
            "got 100000000000000000000000… (401 digits)",
            id="timeout-10^400",
        ),
        pytest.param({"minMember": 2**31}, "spec.minMember: must fit a 32-bit integer", id="min-member-2^31"),
        pytest.param({"minMember": -(10**30)}, "spec.minMember: must fit a 32-bit integer", id="min-member-negative"),
    ],
)
def test_pod_group_counts_and_durations_fit_their_int32_fields(spec: dict[str, Any], want: str) -> None:
    record = parse_pod_group({"metadata": {"name": "g", "namespace": "ns"}, "spec": spec})
    assert want in record.invalid, record.invalid


def test_node_metric_report_interval_beyond_int64_is_refused() -> None:
    obj = {"metadata": {"name": "n1"}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": GOOGOL_CUBED}}}
    with pytest.raises(ValueError, match=r"spec\.metricCollectPolicy\.reportIntervalSeconds"):
        parse_node_metric(obj)


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = new_scheduler_command().run(["simulate", "--now", NOW, "-o", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


POD_GROUP_CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: default}
spec: {minMember: 1, scheduleTimeoutSeconds: %d}
---
apiVersion: v1
kind: Pod
metadata: {name: member, namespace: default, labels: {pod-group.scheduling.sigs.k8s.io: g}}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: default}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
"""


def test_simulate_reports_a_pod_group_timeout_of_10_to_the_400(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(POD_GROUP_CLUSTER % GOOGOL_CUBED)
    code, doc, err = simulate(capsys, "--cluster", str(cluster))
    assert "Traceback" not in err
    placed = {p["name"]: p["node"] for p in doc["pods"]}
    assert placed["plain"] == "n1" and not placed["member"]
    gang = {g["gang"]: g for g in doc["gangs"]}["default/g"]
    assert "spec.scheduleTimeoutSeconds: must fit a 32-bit integer" in gang["problem"]
    assert code in (0, 1)


def test_simulate_with_a_bound_pod_claiming_four_billion_cpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # A bound pod's resource-status is read for every cycle on its node: it must be refused quickly,
    # not expanded (4e9 ints: minutes and gigabytes), and cost only that pod's hold on the CPUs.
    base = (REPO / "config" / "simulate" / "numa-cluster.yaml").read_text()
    status = json.dumps({"cpuset": "0-4000000000"})
    bound = (
        "\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: claims-all, namespace: default, labels: "
        "{koordinator.sh/qosClass: LSR}, annotations: {scheduling.koordinator.sh/resource-status: '" + status + "'}}\n"
        "spec: {nodeName: numa-1, containers: [{name: c, image: app, resources: {requests: {cpu: '1'}, "
        "limits: {cpu: '1'}}}]}\n"
    )
    cluster = tmp_path / "c.yaml"
    cluster.write_text(base + bound)
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        code, doc, err = simulate(
            capsys,
            "--cluster",
            str(cluster),
            "--config",
            str(REPO / "config" / "simulate" / "numa-scheduler-config.yaml"),
        )
    assert time.perf_counter() - started < 15
    assert "Traceback" not in err and code in (0, 1)
    placed = {p["name"]: p["node"] for p in doc["pods"]}
    assert placed["lsr-a"] == "numa-1", placed
    assert any(
        r.getMessage().startswith(
            "pod default/claims-all: annotation scheduling.koordinator.sh/resource-status "
            "field cpuset: cpuset element '0-4000000000' goes beyond the largest CPU id 8191"
        )
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize(
    ("key", "doc", "want"),
    [
        pytest.param(
            "colocation-config",
            {"metricAggregateDurationSeconds": GOOGOL_CUBED},
            "metricAggregateDurationSeconds: 401 digits do not fit a 64-bit integer",
            id="duration-10^400",
        ),
        pytest.param(
            "colocation-config",
            {"degradeTimeMinutes": -GOOGOL_CUBED},
            "degradeTimeMinutes: 401 digits do not fit a 64-bit integer",
            id="negative-10^400",
        ),
        pytest.param(
            "resource-threshold-config",
            {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": GOOGOL_CUBED}},
            "clusterStrategy.cpuSuppressThresholdPercent: 401 digits do not fit a 64-bit integer",
            id="threshold-10^400",
        ),
    ],
)
def test_slo_config_numbers_beyond_int64_are_a_refused_key(key: str, doc: dict[str, Any], want: str) -> None:
    from apis.configuration import parse_slo_config

    config, problems = parse_slo_config({key: json.dumps(doc)}, None)
    assert [(p.key, p.message) for p in problems] == [(key, want)]
    assert config.keys[key] == parse_slo_config({}, None)[0].keys[key]  # the default stays
