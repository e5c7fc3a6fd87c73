"""The Reservation controller's sweep handles each Reservation on its own: a malformed one is marked
Failed with the field in the reason, and every other one still expires."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from koord_scheduler.controllers.reservation import ClusterView, ControllerOptions, Reconciler
from koord_scheduler.controllers.reservation.decide import decide
from koord_scheduler.scheduler.object_errors import ObjectErrors

CREATED = 1_800_000_000.0
CREATED_TEXT = "2027-01-15T08:00:00Z"
TEMPLATE = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def reservation(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": CREATED_TEXT},
        "spec": {"template": TEMPLATE, "owners": [{"object": {"name": "p"}}], "ttl": "1h", **spec},
        "status": {"phase": "Pending"},
    }


class Writer:
    def __init__(self, fail_on: str = "") -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.fail_on = fail_on

    async def patch_status(self, name: str, patch: Mapping[str, Any]) -> None:
        if name == self.fail_on:
            raise RuntimeError("apiserver said no")
        self.calls.append(("patch", name, dict(patch)))

    async def delete(self, name: str) -> None:
        self.calls.append(("delete", name, None))


@pytest.mark.parametrize(
    ("spec", "want_in_message"),
    [
        pytest.param({"ttl": "forever"}, 'spec.ttl: invalid duration "forever"', id="ttl-forever"),
        pytest.param({"expires": "soon"}, "spec.expires: invalid RFC 3339 timestamp", id="expires-garbage"),
        pytest.param(
            {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e23"}}}]}}},
            "spec.template.spec.containers[0].resources.requests.cpu",
            id="template-1e23-cpu",
        ),
        pytest.param({"template": "oops"}, "spec.template: expected an object, got string", id="template-string"),
    ],
)
def test_malformed_reservation_is_marked_failed_with_the_field(spec: dict[str, Any], want_in_message: str) -> None:
    decision = decide(reservation("bad", **spec), [], node_exists=True, now=CREATED + 1)
    assert decision.status_patch is not None
    status = decision.status_patch["status"]
    assert status["phase"] == "Failed"
    (ready,) = status["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "Invalid")
    assert want_in_message in ready["message"]


async def test_one_bad_reservation_does_not_stop_the_others_expiring(caplog: pytest.LogCaptureFixture) -> None:
    errors = ObjectErrors()
    writer = Writer(fail_on="unwritable")
    reconciler = Reconciler(ControllerOptions(), writer, clock=lambda: CREATED + 7200, object_errors=errors)
    view = ClusterView(owners={}, nodes={})
    broken_status = reservation("weird-status")
    broken_status["status"] = {"phase": "Pending", "conditions": 5}
    for body in (
        reservation("a-expired"),
        reservation("bad-ttl", ttl="forever"),
        broken_status,
        reservation("unwritable"),
        reservation("z-expired"),
    ):
        reconciler.observe_reservation("ADDED", body, view)
    with caplog.at_level(logging.WARNING):
        decisions = reconciler.decide_due(full=True)
        await reconciler.apply(decisions)
        # the next sweep reports nothing new
        await reconciler.apply(reconciler.decide_due(full=True))
    phases = {name: patch["status"]["phase"] for _, name, patch in writer.calls}
    assert phases == {"a-expired": "Failed", "bad-ttl": "Failed", "z-expired": "Failed"}
    assert "spec.ttl" in writer.calls[1][2]["status"]["conditions"][0]["message"]
    assert errors.count("Reservation", "Invalid") == 1
    assert errors.count("Reservation", "ReconcileError") == 2  # weird-status (decide), unwritable (apply)
    assert not any(r.exc_info for r in caplog.records), "no traceback at default verbosity"
    logged = sorted(r.getMessage() for r in caplog.records)
    assert len(logged) == 3, logged
    assert any(m.startswith("Reservation bad-ttl ignored (Invalid)") and "spec.ttl" in m for m in logged)
    assert any(m.startswith("Reservation weird-status ignored (ReconcileError)") for m in logged)
