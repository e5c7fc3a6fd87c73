"""koord-scheduler replicas through kube-apiserver outages, at default verbosity.

An outage shorter than renewDeadline must leave the leader leading; a longer one makes the leader exit
(as kube-scheduler does) with one clear line, and a replica started again takes over. In both cases no
log holds a traceback: an unreachable API server is an expected condition, reported in one line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane
from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

TRACEBACK = "Traceback (most recent call last)"
LOST = "leader election lost; exiting"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
# The soak's profile: LoadAwareScheduling and Reservation on top of the defaults, so NodeMetric reads,
# Reservation binds and the Reservation controller's status writes are all under way when the API server goes.
PLUGINS = {
    "multiPoint": {"enabled": [{"name": "LoadAwareScheduling", "weight": 10}]},
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}


@pytest.fixture
def scope(control_plane: ControlPlane) -> Iterator[Scope]:
    s = Scope.create(control_plane, "outage")
    yield s
    for name in _reservations(s):
        _call(control_plane, "DELETE", f"{RESERVATIONS}/{name}")
    s.cleanup()


@pytest.fixture
def processes() -> Iterator[list[SchedulerProcess]]:
    started: list[SchedulerProcess] = []
    yield started
    for proc in started:
        if proc.alive:
            proc.kill()


def _call(plane: ControlPlane, method: str, path: str, body: Any = None) -> int:
    try:
        return plane.request(method, path, body, timeout=5).status
    except OSError:
        return 0


def _reservations(scope: Scope) -> list[str]:
    return [f"{scope.name}-r{i}" for i in range(3)]


def _add_reservations(scope: Scope) -> None:
    for name in _reservations(scope):
        body = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": name},
            "spec": {
                "template": scope.pod_body(name, cpu="100m"),
                "owners": [{"labelSelector": {"matchLabels": {"app": name}}}],
                "ttl": "1h",
            },
        }
        assert _call(scope.plane, "POST", RESERVATIONS, body) == 201


class Churn:
    """Creates pods at a steady rate from a thread (creation fails quietly while the API server is down)."""

    def __init__(self, scope: Scope, rate: float) -> None:
        self.scope, self.rate = scope, rate
        self.created: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        seq = 0
        path = f"/api/v1/namespaces/{self.scope.namespace}/pods"
        while not self._stop.wait(1 / self.rate):
            name = f"c{seq}"
            seq += 1
            if _call(self.scope.plane, "POST", path, self.scope.pod_body(name)) == 201:
                self.created.append(name)


def _start(
    scope: Scope, processes: list[SchedulerProcess], work: Path, name: str, lease: tuple[str, str, str]
) -> SchedulerProcess:
    config = scheduler_config(scope, leader_elect=True, lease=lease, qps=20, burst=5)
    config["profiles"][0]["plugins"] = PLUGINS
    proc = SchedulerProcess.start(scope.plane, config, work, name=name, verbosity=0, wait_ready=False)
    processes.append(proc)
    return proc


def _leader(scope: Scope, procs: list[SchedulerProcess]) -> SchedulerProcess | None:
    want = f'leader_election_master_status{{name="{scope.scheduler_name}"}} 1'
    for proc in procs:
        status, text = proc.get("/metrics")
        if status == 200 and any(line.startswith(want) for line in text.splitlines()):
            return proc
    return None


def _no_tracebacks(procs: list[SchedulerProcess]) -> None:
    for proc in procs:
        text = proc.log_path.read_text(errors="replace")
        assert TRACEBACK not in text, f"{proc.log_path.name} holds a traceback:\n{text[-6000:]}"


def _setup(
    scope: Scope, processes: list[SchedulerProcess], work: Path, lease: tuple[str, str, str]
) -> tuple[SchedulerProcess, SchedulerProcess]:
    for i in range(4):
        scope.add_node(f"n{i}", cpu="64", pods="500")
    _add_reservations(scope)
    a = _start(scope, processes, work, "a", lease)
    b = _start(scope, processes, work, "b", lease)
    wait_until(lambda: _leader(scope, [a, b]) is not None, timeout=60, what="a leader")
    return a, b


def test_outage_longer_than_renew_deadline_exits_in_one_line_and_a_replica_takes_over(
    control_plane: ControlPlane, scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    lease = ("4s", "3s", "500ms")
    a, b = _setup(scope, processes, tmp_path, lease)
    with Churn(scope, rate=10) as churn:
        wait_until(lambda: scope.bound_count() >= 20, timeout=60, what="first bindings")
        leader = _leader(scope, [a, b])
        assert leader is not None
        control_plane.stop_apiserver()
        try:
            time.sleep(8)  # well past renewDeadline: the leader cannot renew and must step down
        finally:
            control_plane.start_apiserver()
        time.sleep(5)
    procs = list(processes)
    exited = [p for p in procs if not p.alive]
    for proc in exited:
        log = proc.log_path.read_text(errors="replace")
        rc = proc.process.returncode
        assert LOST in log, f"{proc.log_path.name} exited (rc {rc}) without '{LOST}':\n{log[-3000:]}"
        proc.terminate()
    # As a kubelet would: every replica that exited is started again; one of them (or the one that stayed) leads.
    restarted = [_start(scope, processes, tmp_path, f"{proc.log_path.stem}-again", lease) for proc in exited]
    live = [p for p in procs if p.alive] + restarted
    wait_until(lambda: _leader(scope, live) is not None, timeout=60, what="a leader after the outage")
    scope.wait_all_bound(len(churn.created), timeout=90)
    _no_tracebacks(list(processes))


def test_outage_shorter_than_renew_deadline_keeps_the_leader(
    control_plane: ControlPlane, scope: Scope, processes: list[SchedulerProcess], tmp_path: Path
) -> None:
    lease = ("30s", "25s", "2s")
    a, b = _setup(scope, processes, tmp_path, lease)
    with Churn(scope, rate=10) as churn:
        wait_until(lambda: scope.bound_count() >= 20, timeout=60, what="first bindings")
        leader = _leader(scope, [a, b])
        assert leader is not None
        control_plane.stop_apiserver()
        try:
            time.sleep(4)
        finally:
            control_plane.start_apiserver()
        time.sleep(5)
    scope.wait_all_bound(len(churn.created), timeout=90)
    assert a.alive and b.alive, f"a replica exited:\n{a.log_tail()}\n{b.log_tail()}"
    assert _leader(scope, [a, b]) is leader
    _no_tracebacks([a, b])
