"""Reservation conditions merged by type, and the resourceVersion guard of the write."""

from typing import Any

import pytest

from apis.scheduling.conditions import conditions_patch, merge_conditions

SCHEDULED_FALSE = {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "bad"}
READY_INVALID = {"type": "Ready", "status": "False", "reason": "Invalid", "message": "bad ttl"}
SCHEDULED_TRUE = {"type": "Scheduled", "status": "True", "reason": "Scheduled"}


@pytest.mark.parametrize(
    ("existing", "updates", "want"),
    [
        pytest.param([], [SCHEDULED_FALSE], [SCHEDULED_FALSE], id="appended-to-none"),
        pytest.param([READY_INVALID], [SCHEDULED_FALSE], [READY_INVALID, SCHEDULED_FALSE], id="other-type-kept"),
        pytest.param(
            [SCHEDULED_TRUE, READY_INVALID], [SCHEDULED_FALSE], [SCHEDULED_FALSE, READY_INVALID], id="replaced-in-place"
        ),
        pytest.param(
            ["junk", SCHEDULED_TRUE], [READY_INVALID], [SCHEDULED_TRUE, READY_INVALID], id="non-object-dropped"
        ),
    ],
)
def test_merge_conditions(existing: list[Any], updates: list[dict[str, str]], want: list[dict[str, str]]) -> None:
    assert merge_conditions(existing, updates) == want


@pytest.mark.parametrize(
    ("reservation", "want"),
    [
        pytest.param(
            {"metadata": {"resourceVersion": "7"}, "status": {"phase": "Failed", "conditions": [READY_INVALID]}},
            {
                "metadata": {"resourceVersion": "7"},
                "status": {"phase": "Available", "conditions": [READY_INVALID, SCHEDULED_FALSE]},
            },
            id="guarded-by-the-copy's-version",
        ),
        pytest.param(
            {"metadata": {}, "status": {"conditions": [READY_INVALID]}},
            {"status": {"phase": "Available", "conditions": [READY_INVALID, SCHEDULED_FALSE]}},
            id="no-version-unguarded",
        ),
        pytest.param(
            None, {"status": {"phase": "Available", "conditions": [SCHEDULED_FALSE]}}, id="no-copy-just-the-update"
        ),
    ],
)
def test_conditions_patch(reservation: dict[str, Any] | None, want: dict[str, Any]) -> None:
    assert conditions_patch(reservation, [SCHEDULED_FALSE], status={"phase": "Available"}) == want
