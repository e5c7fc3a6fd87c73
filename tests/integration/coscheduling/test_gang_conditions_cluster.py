"""Why a gang member is pending, on the real API server: ``PodScheduled=False`` with the gang's reason
(GangPendingPodsConditionPatch), turned ``True`` when the members bind; and the scheduling monitor's warning
and counter for a member that waits at Permit past ``--scheduling-timeout``.

Every gang pod requests 3 cpu on 4-cpu nodes, so one member fits a node.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

ANN = "gang.scheduling.koordinator.sh/"


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "gangcond")
    yield s
    s.cleanup()


def start(scope: Scope, tmp_path: Path, *extra: str) -> SchedulerProcess:
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}
    return SchedulerProcess.start(scope.plane, config, tmp_path, extra_args=("--controllers=reservation", *extra))


def member(scope: Scope, name: str, min_available: int, **extra: str) -> dict[str, Any]:
    body = scope.pod_body(name, cpu="3")
    notes = {ANN + "name": "g", ANN + "min-available": str(min_available)}
    notes.update({ANN + k.replace("_", "-"): v for k, v in extra.items()})
    body["metadata"]["annotations"] = notes
    return body


def scheduled(scope: Scope, name: str) -> dict[str, Any] | None:
    """The pod's PodScheduled condition, if it has one."""
    for condition in scope.pod(name)["status"].get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return dict(condition)
    return None


def test_held_members_show_the_gangs_reason_until_they_bind(scope: Scope, tmp_path: Path) -> None:
    proc = start(scope, tmp_path)
    try:
        for n in ("n1", "n2", "n3"):
            scope.add_node(n)
        scope.add_pods([member(scope, "p1", 3), member(scope, "p2", 3)])
        want = (
            f"gangGroup [{scope.namespace}/g] basic check: memberGangs [{scope.namespace}/g] child pod not collect "
            f"enough, current gang: {scope.namespace}/g, podName: {scope.namespace}/p1"
        )
        try:
            wait_until(
                lambda: (scheduled(scope, "p1") or {}).get("message") == want,
                timeout=90,
                what="p1's PodScheduled condition",
            )
        except AssertionError:
            raise AssertionError(f"{scheduled(scope, 'p1')}\n{proc.log_tail()}") from None
        condition = scheduled(scope, "p1")
        assert condition is not None
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
        assert condition.get("lastTransitionTime")
        assert (scheduled(scope, "p2") or {}).get("status") == "False"
        # Koordinator's gang manual: curl <scheduler>/apis/v1/plugins/Coscheduling/gang/<namespace>/<name>
        status, text = proc.get(f"/apis/v1/plugins/Coscheduling/gang/{scope.namespace}/g")
        assert status == 200, text
        summary = json.loads(text)
        assert summary["minRequiredNumber"] == 3
        assert summary["pendingChildren"] == {f"{scope.namespace}/p1": {}, f"{scope.namespace}/p2": {}}
        scope.add_pods([member(scope, "p3", 3)])
        try:
            scope.wait_all_bound(3, timeout=90)
        except AssertionError:
            raise AssertionError(proc.log_tail()) from None
        for name in ("p1", "p2", "p3"):
            assert (scheduled(scope, name) or {}).get("status") == "True", "the API server sets it at binding"
    finally:
        proc.kill()


def test_every_member_of_a_failed_round_says_why(scope: Scope, tmp_path: Path) -> None:
    proc = start(scope, tmp_path)
    try:
        scope.add_node("n1")
        names = [f"p{i}" for i in range(5)]
        scope.add_pods([member(scope, n, 5) for n in names])
        rejected = f'GangGroup "{scope.namespace}/g" gets rejected due to member Pod'

        def messages() -> list[str]:
            return [(scheduled(scope, n) or {}).get("message", "") for n in names]

        def all_say_why() -> bool:
            found = messages()
            return sum(rejected in m for m in found) >= 4 and all(" nodes are available: " in m for m in found)

        try:
            wait_until(all_say_why, timeout=90, what="a gang reason on every member")
        except AssertionError:
            raise AssertionError(f"{messages()}\n{proc.log_tail()}") from None
        assert all((scheduled(scope, n) or {}).get("reason") == "Unschedulable" for n in names)
    finally:
        proc.kill()


def test_the_gate_off_leaves_held_members_without_a_condition(scope: Scope, tmp_path: Path) -> None:
    proc = start(scope, tmp_path, "--feature-gates=GangPendingPodsConditionPatch=false")
    try:
        scope.add_node("n1")
        scope.add_pods([member(scope, "p1", 3)])
        wait_until(lambda: bool(scope.events(reason="GangNotReady")), timeout=90, what="the GangNotReady Event")
        time.sleep(1)
        assert scheduled(scope, "p1") is None
    finally:
        proc.kill()


def test_a_member_waiting_at_permit_past_the_timeout_is_logged_and_counted_once(scope: Scope, tmp_path: Path) -> None:
    proc = start(scope, tmp_path, "--scheduling-timeout=1s", "--scheduler-monitor-period=200ms")
    try:
        scope.add_node("n1")
        scope.add_node("n2")
        held = member(scope, "p2", 2, waiting_time="20s")
        held["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        scope.add_pods([member(scope, "p1", 2, waiting_time="20s"), held])
        profile = scope.scheduler_name
        assert proc.metric("scheduler_scheduling_timeout_total", profile=profile) == 0.0
        wait_until(
            lambda: proc.metric("scheduler_scheduling_timeout_total", profile=profile) >= 1,
            timeout=90,
            what="the scheduling-timeout counter",
        )
        time.sleep(1.0)  # five more periods: the same attempt is not counted again
        assert proc.metric("scheduler_scheduling_timeout_total", profile=profile) == 1.0
        log = proc.log_tail(400)
        lines = [line for line in log.splitlines() if "!!!CRITICAL TIMEOUT!!!" in line]
        assert len(lines) == 1, log
        assert f"scheduling pod {scope.namespace}/p1(" in lines[0]
        assert "than the timeout 1s (stage: waiting on Permit)" in lines[0]
    finally:
        proc.kill()
