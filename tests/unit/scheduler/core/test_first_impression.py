"""The demo a new user runs first: ``./scripts/demo.sh`` installs pykoord and simulates the bundled cluster
without one warning they cannot act on, and the bundled cluster's NodeMetrics fill the load table (fresh:
``simulate`` runs at the newest NodeMetric ``updateTime`` unless ``--now`` is given)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from koord_scheduler.app.cli import new_scheduler_command
from koord_scheduler.app.cluster_file import parse_cluster_text
from koord_scheduler.app.simulate import snapshot_time

REPO = Path(__file__).resolve().parents[4]
SIMULATE = Path(sys.executable).parent / "koord-scheduler"


def test_the_bundled_example_prints_no_warning_and_a_fresh_load_table() -> None:
    result = subprocess.run([str(SIMULATE), "simulate"], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    table = result.stdout.split("Node load (LoadAwareScheduling", 1)[1].splitlines()[2:7]
    assert len(table) == 5
    for row in table:
        assert " fresh (" in row and "missing" not in row and " expired" not in row, row
    assert "Scheduled 6 of 8 pending pods." in result.stdout


def test_an_explicit_now_still_wins(capsys: pytest.CaptureFixture[str]) -> None:
    assert new_scheduler_command().run(["simulate", "--now", "2026-01-03T15:04:00Z"]) == 0
    out = capsys.readouterr().out
    assert "expired (86400s old)" in out


@pytest.mark.parametrize(
    ("documents", "want"),
    [
        pytest.param([], None, id="no-nodemetric"),
        pytest.param(
            ["2026-01-02T15:03:00Z", "2026-01-02T15:04:00Z", "2026-01-02T15:02:00Z"], 1767366240.0, id="newest-wins"
        ),
        pytest.param(["not a time", "2026-01-02T15:04:00Z"], 1767366240.0, id="unreadable-skipped"),
        pytest.param([None], None, id="no-update-time"),
    ],
)
def test_snapshot_time(documents: list[str | None], want: float | None) -> None:
    text = "\n---\n".join(
        f"apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeMetric\nmetadata: {{name: n{i}}}\n"
        + (f"status: {{updateTime: '{stamp}'}}\n" if stamp else "status: {}\n")
        for i, stamp in enumerate(documents)
    )
    cluster = parse_cluster_text(text or "{}")
    assert snapshot_time(cluster.report_times) == want


def test_nodemetrics_no_profile_reads_are_skipped_quietly() -> None:
    text = "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeMetric\nmetadata: {name: n}\nstatus: {}\n"
    assert parse_cluster_text(text).problems == []


@pytest.mark.slow
def test_demo_first_run_installs_and_runs_without_warnings(tmp_path: Path) -> None:
    """A fresh virtualenv, as a new user's first ``./scripts/demo.sh`` gets (pip from the shared cache)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "VIRTUAL_ENV")}
    env["PYKOORD_VENV"] = str(tmp_path / "venv")
    result = subprocess.run(
        [str(REPO / "scripts" / "demo.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == "", result.stderr[-3000:]
    assert "Scheduled 6 of 8 pending pods." in result.stdout
