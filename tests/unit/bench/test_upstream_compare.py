"""bench/upstream_compare.py: parsing scheduler_perf's DataItems JSON, and the commands it runs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def throughput_item(name: str, average: Any = 412.5, unit: str = "pods/s") -> dict[str, Any]:
    return {
        "data": {"Average": average, "Perc50": 410.0, "Perc90": 450.0, "Perc95": 455.0, "Perc99": 460.0},
        "unit": unit,
        "labels": {"Metric": "SchedulingThroughput", "Name": name},
    }


# What scheduler_perf writes: the throughput item next to metric items of other units.
DATA_ITEMS = {
    "version": "v1",
    "dataItems": [
        throughput_item("BenchmarkPerfScheduling/TopologySpreading/1000Nodes"),
        {
            "data": {"Average": 1.2, "Perc50": 1.0, "Perc90": 2.0, "Perc95": 2.5, "Perc99": 3.0},
            "unit": "ms",
            "labels": {
                "Metric": "scheduler_framework_extension_point_duration_seconds",
                "Name": "BenchmarkPerfScheduling/TopologySpreading/1000Nodes",
                "extension_point": "Filter",
            },
        },
        {
            "data": {"Average": 100.0},
            "unit": "MB",
            "labels": {"Metric": "scheduler_heap_inuse", "Name": "BenchmarkPerfScheduling/TopologySpreading/1000Nodes"},
        },
    ],
}


def test_parse_data_items_keeps_only_scheduling_throughput(upstream_compare: ModuleType) -> None:
    got = upstream_compare.parse_data_items(DATA_ITEMS)
    want = {
        "TopologySpreading": upstream_compare.UpstreamThroughput(
            "TopologySpreading", "1000Nodes", 412.5, 410.0, 450.0, 460.0
        )
    }
    assert got == want


def test_parse_data_items_accepts_name_without_benchmark_prefix(upstream_compare: ModuleType) -> None:
    doc = {"version": "v1", "dataItems": [throughput_item("PreemptionBasic/1000Nodes")]}
    got = upstream_compare.parse_data_items(doc)
    assert list(got) == ["PreemptionBasic"]
    assert got["PreemptionBasic"].workload == "1000Nodes"


@pytest.mark.parametrize(
    ("doc", "want_field"),
    [
        pytest.param([], "dataItems", id="not-an-object"),
        pytest.param({"version": "v1"}, "dataItems", id="no-items"),
        pytest.param({"dataItems": ["x"]}, "dataItems[0]", id="item-not-object"),
        pytest.param(
            {"dataItems": [throughput_item("SchedulingBasic")]}, "dataItems[0].labels.Name", id="name-without-workload"
        ),
        pytest.param(
            {"dataItems": [throughput_item("SchedulingBasic/1000Nodes", average="fast")]},
            "dataItems[0].data.Average",
            id="average-not-number",
        ),
        pytest.param(
            {"dataItems": [throughput_item("SchedulingBasic/1000Nodes", average=float("nan"))]},
            "dataItems[0].data.Average",
            id="average-nan",
        ),
        pytest.param(
            {"dataItems": [throughput_item("SchedulingBasic/1000Nodes", unit="ms")]},
            "dataItems[0].unit",
            id="wrong-unit",
        ),
        pytest.param(
            {"dataItems": [{"labels": {"Metric": "SchedulingThroughput"}, "data": {}}]},
            "dataItems[0].labels.Name",
            id="missing-name",
        ),
    ],
)
def test_parse_data_items_rejects_malformed(upstream_compare: ModuleType, doc: Any, want_field: str) -> None:
    with pytest.raises(upstream_compare.UpstreamResultError, match=re.escape(want_field)):
        upstream_compare.parse_data_items(doc)


def test_read_data_items_dir_merges_files(upstream_compare: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "BenchmarkPerfScheduling_benchmark_pykoord_2026-01-01T00:00:00Z.json").write_text(
        json.dumps(DATA_ITEMS)
    )
    (tmp_path / "BenchmarkPerfScheduling_benchmark_pykoord_2026-01-01T00:01:00Z.json").write_text(
        json.dumps({"version": "v1", "dataItems": [throughput_item("SchedulingBasic/1000Nodes", average=300)]})
    )
    (tmp_path / "SchedulingBasic_1000Nodes_pykoord.dat").write_text("0.0s 0 0 0 0\n")
    got = upstream_compare.read_data_items_dir(tmp_path)
    assert {k: v.average for k, v in got.items()} == {"TopologySpreading": 412.5, "SchedulingBasic": 300.0}


def test_read_data_items_dir_names_the_bad_file(upstream_compare: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "BenchmarkPerfScheduling_benchmark_pykoord_x.json").write_text("{not json")
    with pytest.raises(upstream_compare.UpstreamResultError, match=re.escape("pykoord_x.json")):
        upstream_compare.read_data_items_dir(tmp_path)


@pytest.mark.parametrize(
    ("shape", "want_args"),
    [
        pytest.param(
            "SchedulingBasic",
            [
                "scheduler_throughput.py",
                "--profile",
                "full",
                "--nodes",
                "1000",
                "--placed",
                "1000",
                "--pods",
                "1000",
                "--percentage",
                "0",
            ],
            id="basic",
        ),
        pytest.param(
            "TopologySpreading",
            [
                "topology_spread.py",
                "--nodes",
                "1000",
                "--init-pods",
                "1000",
                "--measure-pods",
                "1000",
                "--percentage",
                "0",
            ],
            id="spread",
        ),
        pytest.param(
            "SchedulingPodAntiAffinity",
            [
                "pod_anti_affinity.py",
                "--nodes",
                "1000",
                "--init-pods",
                "200",
                "--measure-pods",
                "800",
                "--percentage",
                "0",
            ],
            id="anti",
        ),
        pytest.param("PreemptionBasic", ["preemption_basic.py", "--child", "--nodes", "1000"], id="preemption"),
    ],
)
def test_koord_command_runs_the_shape(upstream_compare: ModuleType, shape: str, want_args: list[str]) -> None:
    cmd = upstream_compare.koord_command(upstream_compare.SHAPES[shape])
    assert [Path(cmd[1]).name, *cmd[2:]] == want_args


def test_upstream_command_selects_one_workload(upstream_compare: ModuleType, tmp_path: Path) -> None:
    cmd = upstream_compare.upstream_command(Path("upstream.test"), "TopologySpreading", tmp_path)
    assert "-test.bench=^BenchmarkPerfScheduling$/^TopologySpreading$/^1000Nodes$" in cmd
    assert f"-data-items-dir={tmp_path}" in cmd
    assert "-test.run=^$" in cmd


def test_row_ratio(upstream_compare: ModuleType) -> None:
    row = upstream_compare.Row("SchedulingBasic", 300.0, 150.0, 1.0, 2.0, {})
    assert row.ratio == 2.0
    assert upstream_compare.Row("SchedulingBasic", 300.0, None, 1.0, None, {}).ratio is None
    table = upstream_compare.format_table([row])
    assert table.splitlines()[1].split() == ["SchedulingBasic", "300.0", "150.0", "2.00", "1.0", "2.0"]
