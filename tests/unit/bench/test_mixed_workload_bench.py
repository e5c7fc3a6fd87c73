"""bench/scheduler_throughput.py --workload mixed on a tiny cluster: the workload has the shapes it
claims, every pod is placed and every feasible node is scored."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from types import ModuleType

from tests.unit.bench.conftest import BENCH, load_bench


def _modules() -> tuple[ModuleType, ModuleType]:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return load_bench("mixed_workload"), load_bench("scheduler_throughput")


def test_mixed_pods_cover_sixteen_shapes_and_a_third_spread() -> None:
    mixed, _ = _modules()
    pods = mixed.pod_objs(0, 3000, seed=1)
    shapes = Counter(p["metadata"]["labels"]["shape"] for p in pods)
    assert len(shapes) == 16
    spread = sum(1 for p in pods if "topologySpreadConstraints" in p["spec"])
    assert 0.30 < spread / len(pods) < 0.37
    assert pods == mixed.pod_objs(0, 3000, seed=1)
    assert pods != mixed.pod_objs(0, 3000, seed=2)
    nodes = [mixed.node_obj(i) for i in range(12)]
    sizes_by_zone = Counter((n["metadata"]["labels"][mixed.ZONE_KEY], n["status"]["allocatable"]["cpu"]) for n in nodes)
    assert len(sizes_by_zone) == 12, "every node size appears in every zone"


def test_mixed_run_places_every_pod_and_scores_every_feasible_node() -> None:
    _, bench = _modules()
    config = bench.FULL_CONFIG.format(pct=100)
    result = asyncio.run(bench.run_once(60, 30, 200, config, workload="mixed", seed=3))
    assert result["bound"] == 200
    assert result["scored_percent"] == 100.0
    assert result["workload"] == "mixed"


def test_scale_run_reports_build_time_and_the_largest_allocation_sites() -> None:
    _, bench = _modules()
    config = bench.FULL_CONFIG.format(pct=100)
    result = asyncio.run(bench.run_once(40, 400, 50, config, report_rss=True, trace_memory=5))
    assert result["bound"] == 50
    assert result["rss_after_build_mb"] > 0
    for field in ("parse_seconds", "parse_cpu_seconds", "build_seconds", "build_cpu_seconds"):
        assert result[field] >= 0
    sites = result["top_allocations"]
    assert len(sites) == 6, "the five largest sites, then the total"
    assert sites[-1]["site"] == "(all traced)"
    assert sites[-1]["mb"] >= sum(s["mb"] for s in sites[:-1])
    assert [s["mb"] for s in sites[:-1]] == sorted((s["mb"] for s in sites[:-1]), reverse=True)
    assert sites[-1]["blocks"] > 400, "the 400 bound pods' objects are traced"


def test_plain_run_reports_neither_build_time_nor_allocations() -> None:
    _, bench = _modules()
    result = asyncio.run(bench.run_once(20, 10, 20, bench.FULL_CONFIG.format(pct=100)))
    assert "build_seconds" not in result
    assert "top_allocations" not in result
