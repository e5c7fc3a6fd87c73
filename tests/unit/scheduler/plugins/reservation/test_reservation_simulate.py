"""``koord-scheduler simulate`` with the shipped reservations example."""

import json
from pathlib import Path

import pytest

from koord_scheduler.app.cli import new_scheduler_command

REPO = Path(__file__).resolve().parents[5]


def test_simulate_reservations_example(capsys: pytest.CaptureFixture[str]) -> None:
    code = new_scheduler_command().run(
        [
            "simulate",
            "--cluster",
            str(REPO / "config/simulate/reservations.yaml"),
            "--output",
            "json",
            "--now",
            "2026-01-01T00:00:00Z",
        ]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    placed = {p["name"]: p["node"] for p in doc["pods"]}
    assert placed["web-0"] == placed["web-1"] == "node-1"
    assert placed["batch-0"] is not None
    assert sum(1 for n, node in placed.items() if n.startswith("filler") and node) == 3
    rows = {r["reservation"]: r for r in doc["Reservations"]}
    assert rows["web-pool"]["node"] == "node-1" and rows["web-pool"]["phase"] == "Available"
    assert rows["web-pool"]["owners"] == ["default/web-0", "default/web-1"]
    assert rows["batch-0-slot"]["owners"] == ["default/batch-0"]
    assert rows["broken"]["phase"] == "Invalid"
