"""bench/soak.py's report: the RSS table and slopes, the stall measure and the invariants (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.bench.conftest import load_bench


@pytest.fixture(scope="module")
def soak() -> Any:
    return load_bench("soak")


def report(soak: Any, **fields: Any) -> Any:
    return soak.SoakReport(**{"options": {}, "seconds": 60, "created": 10, "bound": 10, **fields})


def test_a_clean_report_has_no_violations(soak: Any) -> None:
    assert report(soak).violations() == []


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        pytest.param({"bound_twice": {"c-1": ["n1", "n2"]}}, "two nodes", id="bound-twice"),
        pytest.param({"scheduled_events_twice": {"uid": 2}}, "two Scheduled", id="two-events"),
        pytest.param({"unbound_at_end": ["c-9"]}, "not bound", id="unbound"),
        pytest.param({"hostile_pods_bound": ["hostile-3"]}, "hostile pods bound", id="hostile-bound"),
        pytest.param({"on_hostile_node": ["c-2"]}, "hostile Node", id="on-hostile-node"),
        pytest.param({"unexpected_exits": ["a1 (exit 1)"]}, "exited on their own", id="exit"),
        pytest.param({"tracebacks": {"a1": 1}}, "tracebacks", id="traceback"),
        pytest.param({"created": 0}, "nothing", id="nothing-created"),
    ],
)
def test_each_violation_is_reported(soak: Any, fields: dict[str, Any], needle: str) -> None:
    r = report(soak)
    for key, value in fields.items():
        setattr(r, key, value)
    (violation,) = r.violations()
    assert needle in violation


def test_lease_lost_restarts_are_not_violations(soak: Any) -> None:
    assert report(soak, lease_lost_restarts=["a1 (exit 1)"]).violations() == []


def test_rss_slope_only_while_leading_after_a_minute(soak: Any) -> None:
    # a1 leads from 0 s and grows 1 MiB a minute; b1 only stands by; a2 leads too briefly to count.
    rss = [(t, "a1", True, 100 + t / 60) for t in range(0, 301, 10)]
    rss += [(t, "b1", False, 90.0) for t in range(0, 301, 10)]
    rss += [(t, "a2", True, 80.0) for t in range(300, 361, 10)]
    slopes = soak.rss_slopes(report(soak, rss=rss))
    assert set(slopes) == {"a1"}
    first, last, slope = slopes["a1"]
    assert (first, last) == (101.0, 105.0)
    assert slope == pytest.approx(1.0)


def test_rss_table_one_row_per_minute_marks_the_leader(soak: Any) -> None:
    rss = [(0.0, "a1", True, 100.0), (5.0, "b1", False, 90.0), (61.0, "a1", True, 101.5)]
    lines = soak.rss_table(report(soak, rss=rss))
    assert lines[0].split() == ["t(s)", "a1", "b1"]
    assert lines[1].split() == ["0", "100.0*", "90.0"]
    assert lines[2].split() == ["60", "101.5*"]


def test_stall_counts_from_the_first_waiting_pod(soak: Any) -> None:
    ledger = load_bench("soak_cluster").PodLedger(None, "ns")
    # Binds every 0.25 s until 10 s, then none until 25 s; the first pod left waiting was created at 12 s.
    for i in range(41):
        ledger.created[f"c-{i}"] = i * 0.25 - 0.01
        ledger.bound_at[f"c-{i}"] = i * 0.25
    ledger.created["late"] = 12.0
    ledger.bound_at["late"] = 25.0
    ledger.created["hostile-1"] = 1.0  # never bound, and not counted
    ledger.hostile.add("hostile-1")
    assert ledger.longest_bind_gap() == pytest.approx(13.0)
    assert ledger.unbound_schedulable() == []


def test_one_leader_run_fails_when_the_lead_changes_hands(soak: Any) -> None:
    steady = [(float(t), "a1", True, 100.0) for t in range(0, 181, 10)] + [(0.0, "b1", False, 90.0)]
    assert report(soak, options={"one_leader": True}, rss=steady).violations() == []
    handed = [*steady, (190.0, "b1", True, 95.0)]
    (violation,) = report(soak, options={"one_leader": True}, rss=handed).violations()
    assert "lead changed hands" in violation and "['a1', 'b1']" in violation
    lost = report(soak, options={"one_leader": True}, rss=steady, lease_lost_restarts=["a1 (exit 1)"])
    (violation,) = lost.violations()
    assert "lease lost" in violation
    # Without --one-leader a change of leader is what the chaos is for.
    assert report(soak, rss=handed).violations() == []


def test_leader_curve_is_the_first_sample_of_each_minute_while_leading(soak: Any) -> None:
    rss = [
        (0.0, "a1", False, 90.0),
        (10.0, "a1", True, 100.0),
        (50.0, "a1", True, 101.0),
        (65.0, "a1", True, 102.0),
        (70.0, "b1", True, 50.0),
        (125.0, "a1", True, 103.5),
    ]
    assert soak.leader_curve(report(soak, rss=rss), "a1") == [(0, 100.0), (1, 102.0), (2, 103.5)]


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--one-leader", "--actions", "kill-leader"], id="one-leader-kill"),
        pytest.param(["--one-leader", "--actions", "hostile,outage"], id="one-leader-outage"),
        pytest.param(["--actions", "hostile,explode"], id="unknown-action"),
        pytest.param(["--outage", "0"], id="outage-zero"),
    ],
)
def test_refused_chaos_flags(soak: Any, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        soak.main(argv)
    assert exited.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
