"""``simulate --report FILE.html``: one self-contained page (no script, nothing from the network) with a bar
per node for each resource, pending pods grouped by reason and the plugins' sections; opened in headless
Chromium it renders those bars and a screenshot of it is not blank."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from apis.config import load_scheduler_config
from koord_scheduler.app.cli import new_scheduler_command
from koord_scheduler.app.report_html import chart_resources, render_report
from koord_scheduler.app.simulate import NodeAllocation, PodPlacement, SimulationResult, run_simulation
from koord_scheduler.plugins.registry import in_tree_registry
from tests.chromium import dump_dom, png_pixels, screenshot

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = REPO / "config" / "simulate"
EXAMPLE_NODES = 5


def bars(page: str, resource: str) -> list[str]:
    return re.findall(rf'<g class="node-bar" data-node="([^"]+)" data-resource="{re.escape(resource)}"', page)


def test_the_cli_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "run.html"
    assert new_scheduler_command().run(["simulate", "-o", "json", "--report", str(report)]) == 0
    page = report.read_text()
    assert page.startswith("<!DOCTYPE html>")
    for resource in ("cpu", "memory", "nvidia.com/gpu"):
        assert bars(page, resource), resource
    assert len(bars(page, "cpu")) == EXAMPLE_NODES
    assert "Pending pods by reason" in page and "batch/huge-job" in page
    assert "Node load (LoadAwareScheduling" in page, "the example's NodeMetrics give the load columns"
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    assert capsys.readouterr().out.startswith("{"), "the JSON on stdout is unchanged"


def test_an_unwritable_report_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = new_scheduler_command().run(["simulate", "--report", str(tmp_path / "no" / "such" / "dir.html")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("koord-scheduler: --report ") and "Traceback" not in err


async def test_quotas_reservations_and_gangs_appear_when_the_run_has_them() -> None:
    for cluster, config, title in (
        ("elasticquota-cluster.yaml", "elasticquota-config.yaml", "Quotas (ElasticQuota)"),
        ("reservations.yaml", "scheduler-config.yaml", "<h2>Reservations</h2>"),
        ("gang-cluster.yaml", "scheduler-config.yaml", "Gangs (Coscheduling)"),
    ):
        result, _ = await run_simulation(
            EXAMPLES / cluster, load_scheduler_config(EXAMPLES / config), in_tree_registry(), now=1_800_000_000.0
        )
        page = render_report(result, source=cluster, now=1_800_000_000.0)
        assert title in page, cluster
        assert len(bars(page, "cpu")) == len(result.before)


def test_text_from_the_cluster_file_is_escaped() -> None:
    hostile = "<script>alert(1)</script>"
    result = SimulationResult(
        placements=[PodPlacement("ns", hostile, None, f"0/1 nodes are available: {hostile}")],
        before=[NodeAllocation(hostile, {"cpu": 1000}, {"cpu": 4000}, 1, 110)],
        after=[NodeAllocation(hostile, {"cpu": 2000}, {"cpu": 4000}, 2, 110)],
    )
    page = render_report(result, source=hostile, now=0.0)
    assert hostile not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize(
    ("before", "after", "want_added_width", "want_color"),
    [
        pytest.param(1000, 2000, "210.0", "#54aeff", id="half"),
        pytest.param(0, 0, "0.0", "#54aeff", id="empty"),
        pytest.param(1000, 5000, "420.0", "#cf222e", id="over-allocatable-capped-and-red"),
    ],
)
def test_bar_geometry(before: int, after: int, want_added_width: str, want_color: str) -> None:
    result = SimulationResult(
        before=[NodeAllocation("n", {"cpu": before}, {"cpu": 4000}, 0, 110)],
        after=[NodeAllocation("n", {"cpu": after}, {"cpu": 4000}, 0, 110)],
    )
    page = render_report(result, source="t", now=0.0)
    added = re.search(r'<rect class="added" x="150" y="3" width="([0-9.]+)" height="18" rx="3" fill="([^"]+)"', page)
    assert added is not None
    assert (added.group(1), added.group(2)) == (want_added_width, want_color)


def test_chart_resources_are_cpu_memory_and_gpu_counts() -> None:
    nodes = [
        NodeAllocation(
            "n",
            {},
            {
                "cpu": 1,
                "memory": 1,
                "nvidia.com/gpu": 4,
                "koordinator.sh/gpu-memory": 9,
                "koordinator.sh/gpu-core": 100,
                "pods": 110,
            },
            0,
            110,
        )
    ]
    assert chart_resources(nodes) == ["cpu", "memory", "koordinator.sh/gpu-core", "nvidia.com/gpu"]


def test_headless_chromium_renders_a_bar_per_node_and_a_screenshot_with_content(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    assert new_scheduler_command().run(["simulate", "--report", str(report)]) == 0
    dom = dump_dom(report, tmp_path / "profile")
    assert len(bars(dom, "cpu")) == EXAMPLE_NODES, "Chromium parsed one CPU bar per node"
    assert len(bars(dom, "memory")) == EXAMPLE_NODES
    png = tmp_path / "report.png"
    screenshot(report, tmp_path / "profile", png, width=900, height=700)
    width, height, pixels = png_pixels(png.read_bytes())
    assert (width, height) == (900, 700)
    colors = set(pixels)
    not_white = sum(1 for p in pixels if p != (255, 255, 255))
    assert len(colors) > 20, "text and bars, not a blank page"
    assert not_white > 0.02 * len(pixels)
    assert (9, 105, 218) in colors or (84, 174, 255) in colors, "the bars' blues are drawn"
