"""bench/e2e_round_robin.py ``--events`` on the real API server: the ``round-robin+events`` ceiling of
bench/e2e_throughput.py binds every pending pod and writes one ``Scheduled`` Event per bind, so it bounds
a scheduler whose Events keep up with its binds. (Its Event writer was once shadowed by a watch loop
variable: every write after the first watch batch failed, and a run of 3,000 pods wrote 6 Events.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from controlplane import ControlPlane
from kubesched import Scope, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
PODS = 60


def test_the_events_ceiling_writes_one_scheduled_event_per_bound_pod(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    scope = Scope.create(control_plane, "rr-events")
    for i in range(3):
        scope.add_node(f"n{i}", cpu="8", memory="16Gi")
    log = tmp_path / "binder.log"
    with log.open("wb") as out:
        binder = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "bench" / "e2e_round_robin.py"),
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "--events",
                "--namespace",
                scope.namespace,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        # Pods created after it started arrive through its watch (where the shadowing was).
        wait_until(lambda: binder.poll() is None, timeout=5, what="the binder running")
        scope.add_pods(scope.pod_body(f"p{i}") for i in range(PODS))
        pods = f"/api/v1/namespaces/{scope.namespace}/pods"
        events = f"/apis/events.k8s.io/v1/namespaces/{scope.namespace}/events"
        wait_until(
            lambda: sum(1 for p in scope.ok("GET", pods)["items"] if p["spec"].get("nodeName")) == PODS,
            timeout=60,
            what=f"{PODS} pods bound",
        )
        wait_until(lambda: len(scope.ok("GET", events)["items"]) >= PODS, timeout=30, what=f"{PODS} Events")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the binder's output:\n{log.read_text(errors='replace')[-3000:]}") from None
    finally:
        if binder.poll() is None:
            binder.terminate()
            binder.wait(10)
    written = scope.ok("GET", events)["items"]
    assert sorted(e["regarding"]["name"] for e in written) == sorted(f"p{i}" for i in range(PODS))
    assert {e["reason"] for e in written} == {"Scheduled"}
