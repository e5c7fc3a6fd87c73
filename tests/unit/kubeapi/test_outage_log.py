"""Reflector retries during an API-server outage: one warning per outage, the rest at debug level."""

from __future__ import annotations

import logging

import pytest

from koord_scheduler.framework.errors import ClusterError
from kubeapi.http import ApiConnectionError, ApiError
from kubeapi.outage_log import OutageLog
from kubeapi.reflector import _transient


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _levels(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.levelname for r in caplog.records]


def test_one_warning_per_outage_and_a_new_one_after_a_quiet_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    outages = OutageLog(60.0, clock=clock)
    log = logging.getLogger("test.outage")
    caplog.set_level(logging.DEBUG, logger="test.outage")
    for i in range(20):  # twenty watches fail within a second
        clock.now += 0.05
        outages.failure(log, f"watch kind{i} failed: refused; retrying in 1.0s", transient=True)
    assert _levels(caplog) == ["WARNING"] + ["DEBUG"] * 19
    assert "watch kind0 failed" in caplog.records[0].getMessage()
    assert "unreachable" in caplog.records[0].getMessage()
    assert outages.folded == 19
    clock.now += 30  # still the same outage: less than a quiet minute since the last failure
    outages.failure(log, "watch pods failed: refused", transient=True)
    assert _levels(caplog)[-1] == "DEBUG"
    clock.now += 61  # a minute without failures: the next one is a new outage
    outages.failure(log, "watch pods failed: refused", transient=True)
    assert _levels(caplog)[-1] == "WARNING"


def test_failures_that_are_not_an_outage_are_each_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    outages = OutageLog(60.0, clock=_Clock())
    log = logging.getLogger("test.outage2")
    caplog.set_level(logging.DEBUG, logger="test.outage2")
    outages.failure(log, "list pods failed: 403 Forbidden", transient=False)
    outages.failure(log, "list nodes failed: 403 Forbidden", transient=False)
    assert _levels(caplog) == ["WARNING", "WARNING"]
    assert outages.folded == 0


@pytest.mark.parametrize(
    ("err", "want"),
    [
        pytest.param(ApiConnectionError("GET /api/v1/pods: refused"), True, id="connection-refused"),
        pytest.param(ApiError(503, "ServiceUnavailable", "not ready"), True, id="503"),
        pytest.param(ApiError(429, "TooManyRequests", "slow down"), True, id="429"),
        pytest.param(ApiError(403, "Forbidden", "no"), False, id="403"),
        pytest.param(ClusterError("bad response"), False, id="other"),
        pytest.param(None, False, id="none"),
    ],
)
def test_which_failures_are_transient(err: ClusterError | None, want: bool) -> None:
    assert _transient(err) is want
