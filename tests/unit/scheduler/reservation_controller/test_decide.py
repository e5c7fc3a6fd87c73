from typing import Any

import pytest

from koord_scheduler.controllers.reservation import ControllerOptions, Decision, OwnerPod, decide

CREATED = 1_800_000_000.0  # 2027-01-15T08:00:00Z
CREATED_TEXT = "2027-01-15T08:00:00Z"


def res(
    phase: str = "Available",
    *,
    ttl: str | None = "1h",
    expires: str | None = None,
    allocate_once: bool | None = None,
    owners: list[dict[str, str]] | None = None,
    allocated: dict[str, str] | None = None,
    ready_since: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {}, "owners": [{"object": {"name": "p"}}]}
    if ttl is not None:
        spec["ttl"] = ttl
    if expires is not None:
        spec["expires"] = expires
    if allocate_once is not None:
        spec["allocateOnce"] = allocate_once
    status: dict[str, Any] = {
        "phase": phase,
        "nodeName": "n1" if phase != "Pending" else None,
        "allocatable": {"cpu": "2", "memory": "1Gi"},
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}],
    }
    status = {k: v for k, v in status.items() if v is not None}
    if owners is not None:
        status["currentOwners"] = owners
    if allocated is not None:
        status["allocated"] = allocated
    if ready_since is not None:
        status["conditions"].append(
            {
                "type": "Ready",
                "status": "False",
                "reason": "Expired",
                "lastProbeTime": ready_since,
                "lastTransitionTime": ready_since,
            }
        )
    return {"metadata": {"name": "r", "uid": "ru", "creationTimestamp": CREATED_TEXT}, "spec": spec, "status": status}


P1 = OwnerPod("default", "p1", "u1", {"cpu": 500, "memory": 100, "example.com/gpu": 1})
P2 = OwnerPod("default", "p2", "u0", {"cpu": 1000})
EXPIRED_READY = {"type": "Ready", "status": "False", "reason": "Expired"}


def _ready(decision: Decision) -> dict[str, Any]:
    assert decision.status_patch is not None
    conds = decision.status_patch["status"]["conditions"]
    ready = next(c for c in conds if c["type"] == "Ready")
    return {k: ready[k] for k in ("type", "status", "reason")}


@pytest.mark.parametrize(
    ("reservation", "owners", "node_exists", "now", "want_phase", "want_reason"),
    [
        pytest.param(res(), [], True, CREATED + 3601, "Failed", "Expired", id="ttl-expired"),
        pytest.param(res("Pending"), [], True, CREATED + 3601, "Failed", "Expired", id="pending-ttl-expired"),
        pytest.param(res(ttl="0s"), [], True, CREATED + 10**6, None, None, id="ttl-zero-never"),
        pytest.param(
            res(ttl=None, expires="2027-01-15T08:10:00Z"), [], True, CREATED + 601, "Failed", "Expired", id="expires"
        ),
        pytest.param(res(), [], False, CREATED + 1, "Failed", "Expired", id="node-gone"),
        pytest.param(res(allocate_once=False), [P1], True, CREATED + 1, None, None, id="owners-no-phase-change"),
        pytest.param(res(), [P1], True, CREATED + 1, "Succeeded", "Succeeded", id="allocate-once-succeeded"),
    ],
)
def test_phase_decisions(
    reservation: dict[str, Any],
    owners: list[OwnerPod],
    *,
    node_exists: bool,
    now: float,
    want_phase: str | None,
    want_reason: str | None,
) -> None:
    d = decide(reservation, owners, node_exists=node_exists, now=now)
    phase = (d.status_patch or {}).get("status", {}).get("phase")
    assert phase == want_phase
    if want_reason is not None:
        assert _ready(d) == {"type": "Ready", "status": "False", "reason": want_reason}
        kept = [c["type"] for c in d.status_patch["status"]["conditions"]]  # type: ignore[index]
        assert kept == ["Scheduled", "Ready"]


def test_owners_and_allocated_recomputed_sorted_and_masked() -> None:
    d = decide(res(allocate_once=False), [P1, P2], node_exists=True, now=CREATED + 1)
    assert d.status_patch == {
        "status": {
            "currentOwners": [
                {"namespace": "default", "name": "p2", "uid": "u0"},
                {"namespace": "default", "name": "p1", "uid": "u1"},
            ],
            "allocated": {"cpu": "1500m", "memory": "100"},
        }
    }


def test_no_patch_when_status_true() -> None:
    r = res(
        allocate_once=False,
        owners=[{"namespace": "default", "name": "p1", "uid": "u1"}],
        allocated={"cpu": "500m", "memory": "100"},
    )
    assert decide(r, [P1], node_exists=True, now=CREATED + 1).status_patch is None


def test_owner_deleted_clears_status() -> None:
    r = res(
        allocate_once=False, owners=[{"namespace": "default", "name": "p1", "uid": "u1"}], allocated={"cpu": "500m"}
    )
    d = decide(r, [], node_exists=True, now=CREATED + 1)
    assert d.status_patch == {"status": {"currentOwners": None, "allocated": None}}


@pytest.mark.parametrize(
    ("reservation", "node_exists", "now", "options", "want_delete"),
    [
        pytest.param(
            res("Failed", ready_since=CREATED_TEXT),
            True,
            CREATED + 86399,
            ControllerOptions(),
            False,
            id="failed-young",
        ),
        pytest.param(
            res("Failed", ready_since=CREATED_TEXT), True, CREATED + 86400, ControllerOptions(), True, id="failed-gc"
        ),
        pytest.param(
            res("Succeeded", ready_since=CREATED_TEXT),
            True,
            CREATED + 5,
            ControllerOptions(gc_duration_seconds=5),
            True,
            id="succeeded-short-gc",
        ),
        pytest.param(
            res("Failed", ready_since=CREATED_TEXT),
            False,
            CREATED + 1,
            ControllerOptions(),
            True,
            id="node-gone-gc-at-once",
        ),
        pytest.param(
            res("Failed", ready_since=CREATED_TEXT),
            False,
            CREATED + 10**6,
            ControllerOptions(disable_garbage_collection=True),
            False,
            id="gc-disabled",
        ),
    ],
)
def test_garbage_collection(
    reservation: dict[str, Any], node_exists: bool, now: float, options: ControllerOptions, want_delete: bool
) -> None:
    d = decide(reservation, [], node_exists=node_exists, now=now, options=options)
    assert d.delete is want_delete and d.status_patch is None


def test_requeue_clamped() -> None:
    assert decide(res(), [], node_exists=True, now=CREATED + 3599).requeue_after == 3.0
    assert decide(res(), [], node_exists=True, now=CREATED).requeue_after == 15.0


def _failed_with_conditions(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    body = res("Failed", ttl=None)
    body["status"]["conditions"] = conditions
    return body


@pytest.mark.parametrize(
    ("conditions", "now", "want_delete"),
    [
        # The scheduler's merge patch replaced the list: only its Scheduled=False is left, stamped now.
        pytest.param(
            [{"type": "Scheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": CREATED_TEXT}],
            CREATED + 5,
            False,
            id="ready-replaced-by-a-stamped-condition-is-kept",
        ),
        pytest.param(
            [{"type": "Scheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": CREATED_TEXT}],
            CREATED + 86400,
            True,
            id="collected-a-gc-duration-after-that-stamp",
        ),
        pytest.param(
            [{"type": "Scheduled", "status": "False", "reason": "Unschedulable"}],
            CREATED + 5,
            True,
            id="no-stamp-at-all-collected-now",
        ),
        pytest.param(
            [
                {"type": "Scheduled", "status": "True", "lastTransitionTime": CREATED_TEXT},
                {"type": "Ready", "status": "False", "lastTransitionTime": "not a time"},
            ],
            CREATED + 5,
            False,
            id="unreadable-ready-stamp-falls-back-to-the-others",
        ),
    ],
)
def test_garbage_collection_without_a_ready_stamp(
    conditions: list[dict[str, Any]], now: float, want_delete: bool
) -> None:
    decision = decide(_failed_with_conditions(conditions), [], node_exists=True, now=now, options=ControllerOptions())
    assert decision.delete is want_delete


def test_failed_keeps_the_plugins_conditions_and_is_guarded_by_the_resource_version() -> None:
    r = res("Pending", ttl="forever")
    r["metadata"]["resourceVersion"] = "7"
    r["status"]["conditions"] = [{"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "m"}]
    patch = decide(r, [], node_exists=True, now=CREATED + 1).status_patch
    assert patch is not None
    assert patch["metadata"] == {"resourceVersion": "7"}
    want = [("Scheduled", "False", "Unschedulable"), ("Ready", "False", "Invalid")]
    assert [(c["type"], c["status"], c["reason"]) for c in patch["status"]["conditions"]] == want
