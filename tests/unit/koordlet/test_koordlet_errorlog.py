"""Failures during an outage: one line per kind, rate limited, traceback only at debug level."""

from __future__ import annotations

import logging

import pytest

from apis.slo import NodeMetricStatus
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import CacheUsageSource
from koordlet.statesinformer import NodeMetricReporter, StatesInformer
from koordlet.system import CgroupDriver, CgroupFS, CgroupVersion
from koordlet.system.clock import FakeClock
from koordlet.system.errorlog import FailureLog, describe


class ApiError(Exception):
    """Shaped like kubernetes' ``ApiException`` (status, reason)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"({status})\nReason: {reason}\nHTTP response headers: ...\nbody")
        self.status = status
        self.reason = reason


def _retried() -> Exception:
    err = Exception("Max retries exceeded with url: /api/v1/nodes")
    err.reason = ConnectionRefusedError("refused")  # type: ignore[attr-defined]
    return err


@pytest.mark.parametrize(
    ("err", "want"),
    [
        pytest.param(ApiError(503, "Service Unavailable"), "HTTP 503 Service Unavailable", id="api-error"),
        pytest.param(ConnectionRefusedError(111, "Connection refused"), "ConnectionRefusedError: [Errno 111] "
                     "Connection refused", id="transport"),
        pytest.param(ValueError("first\nsecond"), "ValueError: first", id="first-line-only"),
        pytest.param(RuntimeError(), "RuntimeError", id="no-message"),
        pytest.param(_retried(), "ConnectionRefusedError: refused", id="retried-transport-error-unwrapped"),
    ],
)  # fmt: skip
def test_describe_is_one_line(err: BaseException, want: str) -> None:
    assert describe(err) == want


def test_rate_limit_counts_held_back_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(0.0)
    failures = FailureLog(logging.getLogger("test.errorlog"), interval=60.0, clock=clock)
    caplog.set_level(logging.INFO, "test.errorlog")
    for _ in range(5):
        failures.failed("NodeMetric status write", ApiError(503, "Service Unavailable"))
        clock.advance(10)
    clock.advance(20)  # 70 s after the first line
    failures.failed("NodeMetric status write", ApiError(503, "Service Unavailable"))
    failures.succeeded("NodeMetric status write")
    assert [r.getMessage() for r in caplog.records] == [
        "NodeMetric status write failed: HTTP 503 Service Unavailable",
        "NodeMetric status write failed: HTTP 503 Service Unavailable (4 more since the last report)",
        "NodeMetric status write works again",
    ]
    assert all(r.exc_info is None for r in caplog.records)


class DownWriter:
    def __init__(self) -> None:
        self.calls = 0

    def write_status(self, status: NodeMetricStatus) -> None:
        self.calls += 1
        raise ApiError(503, "Service Unavailable")


async def test_reporter_during_api_outage_logs_one_line(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    informer = StatesInformer("n", CgroupFS("/nonexistent", CgroupVersion.V1, CgroupDriver.CGROUPFS).layout)
    writer = DownWriter()
    reporter = NodeMetricReporter(informer, CacheUsageSource(MetricCache(clock=clock)), writer, clock=clock)
    caplog.set_level(logging.INFO)
    for _ in range(20):
        await reporter.report_once()
    assert writer.calls == 20 and reporter.failures == 20
    lines = [r for r in caplog.records if "NodeMetric" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None and "Traceback" not in caplog.text


async def test_traceback_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    informer = StatesInformer("n", CgroupFS("/nonexistent", CgroupVersion.V1, CgroupDriver.CGROUPFS).layout)
    reporter = NodeMetricReporter(informer, CacheUsageSource(MetricCache(clock=clock)), DownWriter(), clock=clock)
    caplog.set_level(logging.DEBUG)
    await reporter.report_once()
    records = [r for r in caplog.records if "NodeMetric" in r.getMessage()]
    assert len(records) == 1 and records[0].exc_info is not None
