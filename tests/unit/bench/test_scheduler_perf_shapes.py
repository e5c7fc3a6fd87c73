"""The scheduler_perf shapes (bench/topology_common.py SHAPES) against bench/upstream/performance-config.yaml
and its templates, so our in-process benches, e2e_throughput.py --shape and the upstream harness cannot
drift apart silently; and e2e_throughput.py's API bodies for them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

SHAPE_NAMES = ["SchedulingBasic", "TopologySpreading", "SchedulingPodAntiAffinity", "PreemptionBasic"]


def upstream_cases(upstream_dir: Path) -> dict[str, dict[str, Any]]:
    cases = yaml.safe_load((upstream_dir / "performance-config.yaml").read_text())
    return {case["name"]: case for case in cases}


def create_pods_ops(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for op in case["workloadTemplate"] if op["opcode"] == "createPods"]


def template(upstream_dir: Path, case: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    path = op.get("podTemplatePath") or case["defaultPodTemplatePath"]
    doc: dict[str, Any] = yaml.safe_load((upstream_dir / path).read_text())
    return doc


def test_upstream_config_has_exactly_our_shapes(topology_common: ModuleType, upstream_dir: Path) -> None:
    assert sorted(upstream_cases(upstream_dir)) == sorted(SHAPE_NAMES)
    assert sorted(topology_common.SHAPES) == sorted(SHAPE_NAMES)


@pytest.mark.parametrize("name", SHAPE_NAMES)
def test_counts_match_upstream_config(topology_common: ModuleType, upstream_dir: Path, name: str) -> None:
    case = upstream_cases(upstream_dir)[name]
    (workload,) = case["workloads"]
    shape = topology_common.SHAPES[name]
    assert workload["name"] == "1000Nodes"
    assert workload["labels"] == ["performance"]
    assert workload["params"] == {
        "initNodes": shape.nodes,
        "initPods": shape.init_pods,
        "measurePods": shape.measure_pods,
    }
    init_op, measure_op = create_pods_ops(case)
    assert (init_op["countParam"], measure_op["countParam"]) == ("$initPods", "$measurePods")
    assert measure_op.get("collectMetrics") is True
    assert not init_op.get("collectMetrics")


@pytest.mark.parametrize("name", SHAPE_NAMES)
def test_pod_templates_match_upstream(topology_common: ModuleType, upstream_dir: Path, name: str) -> None:
    case = upstream_cases(upstream_dir)[name]
    shape = topology_common.SHAPES[name]
    init_op, measure_op = create_pods_ops(case)
    for op, ours in ((init_op, shape.init_objs()[0]), (measure_op, shape.measure_objs()[0])):
        want = template(upstream_dir, case, op)
        assert ours["spec"] == want["spec"]
        assert ours["metadata"]["labels"] == want["metadata"].get("labels", {})
        assert ours["metadata"]["namespace"] == op.get("namespace", "default")


@pytest.mark.parametrize("name", SHAPE_NAMES)
def test_nodes_match_upstream(topology_common: ModuleType, upstream_dir: Path, name: str) -> None:
    case = upstream_cases(upstream_dir)[name]
    (create_nodes,) = [op for op in case["workloadTemplate"] if op["opcode"] == "createNodes"]
    want = yaml.safe_load((upstream_dir / create_nodes["nodeTemplatePath"]).read_text())
    shape = topology_common.SHAPES[name]
    nodes = shape.node_objs()
    assert len(nodes) == shape.nodes
    for key in ("capacity", "conditions", "phase"):
        assert nodes[0]["status"][key] == want["status"][key]
    strategy = create_nodes.get("labelNodePrepareStrategy")
    zones = [n["metadata"]["labels"].get(topology_common.ZONE_KEY) for n in nodes[:4]]
    if strategy is None:
        assert zones == [None] * 4
    else:  # upstream's LabelNodePrepareStrategy assigns the values round-robin
        values = strategy["labelValues"]
        assert strategy["labelKey"] == topology_common.ZONE_KEY
        assert zones == [values[i % len(values)] for i in range(4)]


def test_anti_affinity_fits_one_pod_per_node(topology_common: ModuleType) -> None:
    shape = topology_common.SHAPES["SchedulingPodAntiAffinity"]
    assert shape.init_pods + shape.measure_pods <= shape.nodes


def test_preemption_basic_needs_preemption(topology_common: ModuleType) -> None:
    """4 low-priority pods per node leave 4 - 4 x 0.9 = 0.4 CPU: every preemptor (3 CPU) must evict 3."""
    shape = topology_common.SHAPES["PreemptionBasic"]
    assert shape.init_pods == 4 * shape.nodes
    assert shape.measure_pods == shape.nodes
    low = shape.init_objs()[0]["spec"]
    high = shape.measure_objs()[0]["spec"]
    assert (low.get("priority", 0), high["priority"]) == (0, 10)


# ----- e2e_throughput.py --shape -----


@pytest.mark.parametrize(
    ("obj_name", "node", "want_spec_extra"),
    [
        pytest.param("measure", "", {"priorityClassName": "bench-high"}, id="preemptor-pending"),
        pytest.param(
            "init",
            "bench-node-3",
            {"priorityClassName": "bench-low", "nodeName": "bench-node-3"},
            id="victim-bound-at-creation",
        ),
    ],
)
def test_e2e_pod_body_priority_classes(
    e2e_throughput: ModuleType, topology_common: ModuleType, obj_name: str, node: str, want_spec_extra: dict[str, str]
) -> None:
    shape = topology_common.SHAPES["PreemptionBasic"]
    obj = shape.measure_objs()[0] if obj_name == "measure" else shape.init_objs()[0]
    body = json.loads(e2e_throughput.shape_pod_body(obj, node=node, priority_classes=True))
    want_spec = {k: v for k, v in obj["spec"].items() if k != "priority"} | want_spec_extra
    assert body["spec"] == want_spec
    assert body["metadata"] == {
        "name": obj["metadata"]["name"],
        "namespace": "bench",
        "labels": obj["metadata"]["labels"],
    }


def test_e2e_pod_body_keeps_anti_affinity_namespaces(e2e_throughput: ModuleType, topology_common: ModuleType) -> None:
    obj = topology_common.SHAPES["SchedulingPodAntiAffinity"].measure_objs()[0]
    body = json.loads(e2e_throughput.shape_pod_body(obj))
    assert body["metadata"]["namespace"] == "sched-1"
    assert body["spec"] == obj["spec"]


def e2e_args(e2e_throughput: ModuleType, argv: list[str]) -> tuple[Any, str]:
    ns = argparse.Namespace(shape="SchedulingBasic", nodes=1000, pods=None, timeout=None, only=None, controllers=[])
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        setattr(ns, flag.lstrip("-").replace("-", "_"), value)
    error = e2e_throughput.shape_arguments(ns)
    return ns, error


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param(
            [],
            {"pods": 5000, "only": ["round-robin", "koord-scheduler", "kube-scheduler"]},
            id="basic-defaults-unchanged",
        ),
        pytest.param(["--shape", "TopologySpreading"], {"pods": 1000, "init": 1000}, id="spread"),
        pytest.param(
            ["--shape", "PreemptionBasic"],
            {"pods": 1000, "init": 4000, "only": ["koord-scheduler", "kube-scheduler"], "timeout": 1200.0},
            id="preemption-no-ceiling",
        ),
        pytest.param(["--shape", "PreemptionBasic", "--nodes", 100], {"pods": 100, "init": 400}, id="scaled"),
        pytest.param(
            ["--controllers", ["reservation", "nodeslo,noderesource,nodemetric,reservation"]],
            {
                "pods": 5000,
                "only": [
                    "koord-scheduler[reservation]",
                    "koord-scheduler[nodeslo,noderesource,nodemetric,reservation]",
                ],
            },
            id="controllers-variants-only",
        ),
        pytest.param(
            ["--controllers", ["*", "-nodeslo"], "--only", ["koord-scheduler", "kube-scheduler"]],
            {"pods": 5000, "only": ["koord-scheduler[*]", "koord-scheduler[-nodeslo]", "kube-scheduler"]},
            id="controllers-with-others",
        ),
    ],
)
def test_e2e_shape_arguments(e2e_throughput: ModuleType, argv: list[Any], want: dict[str, Any]) -> None:
    args, error = e2e_args(e2e_throughput, argv)
    assert error == ""
    got = {"pods": args.pods}
    if "init" in want:
        got["init"] = args.shape_plan.init_pods
    if "only" in want:
        got["only"] = args.only
    if "timeout" in want:
        got["timeout"] = args.timeout
    assert got == want


@pytest.mark.parametrize(
    ("argv", "want_flag"),
    [
        pytest.param(["--shape", "SchedulingPodAntiAffinity", "--pods", 900], "--pods", id="anti-too-many-pods"),
        pytest.param(["--shape", "TopologySpreading", "--pods", 0], "--pods", id="zero-pods"),
        pytest.param(["--shape", "TopologySpreading", "--nodes", 0], "--nodes", id="zero-nodes"),
        pytest.param(["--only", ["koord-scheduler", "volcano"]], "--only", id="unknown-contender"),
        pytest.param(
            ["--only", ["kube-scheduler"], "--controllers", ["reservation"]],
            "--controllers",
            id="controllers-without-koord",
        ),
    ],
)
def test_e2e_shape_arguments_errors_name_the_flag(e2e_throughput: ModuleType, argv: list[Any], want_flag: str) -> None:
    _, error = e2e_args(e2e_throughput, argv)
    assert error.startswith(f"{want_flag}:")


@pytest.mark.parametrize(
    ("values", "want"),
    [
        pytest.param(["reservation"], False, id="reservation-only"),
        pytest.param(["reservation", "nodeslo,reservation"], True, id="one-value-with-nodeslo"),
        pytest.param(["*"], True, id="star"),
        pytest.param(["*,-nodeslo,-noderesource,-nodemetric"], False, id="star-without-colocation"),
        pytest.param(["noderesource,-noderesource"], False, id="negated-wins"),
        pytest.param(["reservation,migration,descheduler"], True, id="descheduler-reads-nodemetrics"),
    ],
)
def test_e2e_needs_colocation(e2e_throughput: ModuleType, values: list[str], want: bool) -> None:
    assert e2e_throughput.e2e_colocation.needs_colocation(values) is want


def test_e2e_controllers_summary(e2e_throughput: ModuleType) -> None:
    def result(name: str, rate: float, cpu: float) -> Any:
        return e2e_throughput.Result(name, 1000, rate, rate, 1.0, 1.0, cpu, cpu, 0, None, cpu)

    off, on = "koord-scheduler[reservation]", "koord-scheduler[nodeslo,reservation]"
    summary = e2e_throughput.summarize(
        [result(off, 1000, 1.0), result(on, 950, 1.2), result(on, 900, 1.2), result(off, 1000, 1.0)]
    )
    assert summary["controllers_vs_first"] == {
        on: {"rate_ratio": 0.925, "cpu_ratio": 1.2, "rate_ratio_per_round": [0.95, 0.9]}
    }
