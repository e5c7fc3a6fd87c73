"""SchedulerMetrics' cached label children record exactly what ``labels()`` would."""

from __future__ import annotations

from koord_scheduler.scheduler.metrics import SchedulerMetrics


def sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_record_attempt_counts_and_times_each_attempt() -> None:
    metrics = SchedulerMetrics()

    metrics.record_attempt("scheduled", "default-scheduler", 0.002)
    metrics.record_attempt("scheduled", "default-scheduler", 0.004)
    metrics.record_attempt("unschedulable", "default-scheduler", 0.001)

    got = (
        sample(metrics, "scheduler_schedule_attempts_total", result="scheduled", profile="default-scheduler"),
        sample(metrics, "scheduler_schedule_attempts_total", result="unschedulable", profile="default-scheduler"),
        sample(
            metrics,
            "scheduler_scheduling_attempt_duration_seconds_count",
            result="scheduled",
            profile="default-scheduler",
        ),
        sample(
            metrics,
            "scheduler_scheduling_attempt_duration_seconds_sum",
            result="scheduled",
            profile="default-scheduler",
        ),
    )
    assert got == (2.0, 1.0, 2.0, 0.006)


def test_child_is_looked_up_once_and_appears_only_when_used() -> None:
    metrics = SchedulerMetrics()
    assert sample(metrics, "scheduler_goroutines", operation="binding") is None

    first = metrics.child(metrics.bindings_in_flight, "binding")
    first.inc()

    assert metrics.child(metrics.bindings_in_flight, "binding") is first
    assert metrics.child(metrics.pending_pods, "binding") is not first, "children are per metric"
    assert sample(metrics, "scheduler_goroutines", operation="binding") == 1.0
