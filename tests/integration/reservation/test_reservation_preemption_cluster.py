"""Reservations making room against the real API server: with ``enablePreemption`` and the Reservation as
the only PostFilter, a Reservation evicts a lower-priority pod and becomes Available, and a
``reservation-ignored`` pod is never its victim; with ``spec.preAllocation`` and no PostFilter, a
Reservation adopts the running pod instead."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "preemption"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until
from test_preemption_cluster import LOW, gone, kwok_node, pod
from test_reservation_cluster import (
    ALLOCATED,
    PLUGINS,
    QUICK_GC,
    RESERVATIONS,
    get_reservation,
    phase,
    reservation,
)
from test_reservation_cluster import scope as reservation_scope  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration


@pytest.fixture
def scope(reservation_scope: Scope) -> Scope:  # noqa: F811
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": LOW}, "value": 10}
    result = reservation_scope.plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
    assert result.status in (201, 409), result.body[:300]
    return reservation_scope


@pytest.fixture
def scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    config = scheduler_config(scope)
    plugins = copy.deepcopy(PLUGINS)
    plugins["postFilter"] = {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}]}
    config["profiles"][0]["plugins"] = plugins
    config["profiles"][0]["pluginConfig"] = [{"name": "Reservation", "args": {"enablePreemption": True, **QUICK_GC}}]
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def test_reservation_preempts_a_lower_priority_pod_and_becomes_available(
    scope: Scope, scheduler: SchedulerProcess
) -> None:
    node = kwok_node(scope, "n1", cpu="2")
    scope.add_pods([pod(scope, "low", cpu="1500m", priority_class=LOW)])
    scope.wait_all_bound(1, timeout=30)
    scope.ok("POST", RESERVATIONS, reservation(scope, "big", cpu="1500m", app="web"))
    wait_until(lambda: gone(scope, "low"), timeout=60, what="the victim deleted")
    wait_until(lambda: phase(scope, "big") == "Available", timeout=60, what="reservation Available")
    assert get_reservation(scope, "big")["status"]["nodeName"] == node  # type: ignore[index]
    assert [e["regarding"]["name"] for e in scope.events(reason="Preempted")] == ["low"]


def test_reservation_ignored_pod_is_not_a_victim(scope: Scope, scheduler: SchedulerProcess) -> None:
    kwok_node(scope, "n1", cpu="2")
    ignored = {"scheduling.koordinator.sh/reservation-ignored": "true"}
    scope.add_pods([pod(scope, "low", cpu="1500m", priority_class=LOW, labels=ignored)])
    scope.wait_all_bound(1, timeout=30)
    scope.ok("POST", RESERVATIONS, reservation(scope, "big", cpu="1500m", app="web"))

    def scheduled_condition() -> dict[str, Any] | None:
        status = (get_reservation(scope, "big") or {}).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == "Scheduled"), None)

    wait_until(lambda: scheduled_condition() is not None, timeout=60, what="the reservation's failure recorded")
    condition = scheduled_condition()
    assert condition is not None and condition["status"] == "False", condition
    assert "preemption: " in condition["message"], condition
    assert not gone(scope, "low") and phase(scope, "big") in (None, "Pending")


@pytest.fixture
def plain_scheduler(scope: Scope, tmp_path: Path) -> Iterator[SchedulerProcess]:
    """Reservation plugins, no PostFilter at all: a reservation can only make room by pre-allocation."""
    config = scheduler_config(scope)
    plugins = copy.deepcopy(PLUGINS)
    plugins["postFilter"] = {"disabled": [{"name": "*"}]}
    config["profiles"][0]["plugins"] = plugins
    config["profiles"][0]["pluginConfig"] = [{"name": "Reservation", "args": QUICK_GC}]
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    yield proc
    if proc.alive:
        proc.kill()


def test_pre_allocation_reservation_adopts_a_running_pod(scope: Scope, plain_scheduler: SchedulerProcess) -> None:
    node = kwok_node(scope, "n1", cpu="2")
    scope.add_pods([pod(scope, "web-0", cpu="1500m", priority_class=LOW, labels={"app": "web"})])
    scope.wait_all_bound(1, timeout=30)
    body = reservation(scope, "adopt", cpu="1500m", app="web", allocate_once=False)
    body["spec"].update({"allocatePolicy": "Restricted", "preAllocation": True})
    scope.ok("POST", RESERVATIONS, body)
    wait_until(lambda: phase(scope, "adopt") == "Available", timeout=60, what="reservation Available")
    assert get_reservation(scope, "adopt")["status"]["nodeName"] == node  # type: ignore[index]
    annotation = scope.pod("web-0")["metadata"]["annotations"][ALLOCATED]
    assert json.loads(annotation)["name"] == f"{scope.name}-adopt"

    def owners() -> list[str]:
        status = (get_reservation(scope, "adopt") or {}).get("status") or {}
        return [o["name"] for o in status.get("currentOwners") or []]

    wait_until(lambda: owners() == ["web-0"], timeout=30, what="the adopted pod recorded as owner")
    assert not gone(scope, "web-0")
