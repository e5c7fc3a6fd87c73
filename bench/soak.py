#!/usr/bin/env python3
"""Soak: pod churn under chaos against a real kube-apiserver + etcd, with two koord-scheduler replicas.

A control plane with ``--nodes`` kwok nodes (4 CPU, 32Gi, 110 pods, kept Ready by kwok) is started in a
temp dir; two ``.venv/bin/koord-scheduler`` replicas run with leader election (kube-scheduler's default
lease, 15s/10s/2s) and a profile with LoadAwareScheduling and Reservation on top of the defaults. Then,
for ``--minutes``:

- **churn**: ``--rate`` pods/s are created (100m / 64Mi, one container, ``nodeSelector: type=kwok``);
  a pod is deleted ``--lifetime`` seconds after creation once it is bound (an unbound pod is kept, so a
  scheduling failure cannot be hidden by the churn);
- **NodeMetrics** (as koordlet reports them): every ``--metric-every`` seconds each node's NodeMetric
  status is written with a usage of half the requests of the pods bound there and a fresh updateTime;
- **chaos**: every ``--chaos-every`` seconds the next action in turn: inject hostile objects of the
  real-API-server hostile suite (two per turn, in this order: a NodeMetric with an int64-overflowing
  cpu, a Node with an overflowing allocatable cpu, a Pod with an overflowing request, a Reservation with
  ``ttl: forever``, a NodeMetric with a negative cpu, a Reservation asking for 1e23 cpu), SIGKILL the
  leader (it is started again as the standby), or restart kube-apiserver (etcd keeps the objects). A
  replica that exits because an outage outlasted its lease's renewDeadline (kube-scheduler's reaction
  too) is started again, as a kubelet would, and counted apart;
- a watch of the namespace's pods records every node each pod is seen bound to, and each replica's RSS
  (``/proc/<pid>/status`` VmRSS) is sampled every ``--rss-every`` seconds, with whether it led.

At the end the churn stops and the remaining pods get ``--drain`` seconds. Invariants (exit 1 if one
fails): no pod seen bound to two nodes and no pod with two ``Scheduled`` Events; every schedulable pod
bound (the hostile pod excepted, which must stay pending); no pod on the hostile Node; no replica exited
unless the soak killed it; no ``Traceback`` in the replicas' logs (run at ``-v 0``). Reported: counts,
bind latency (creation to bound, seen by the watch), the longest gap between two binds while pods were
pending, and the RSS curve per replica process with its slope while leading (after its first minute).

``--actions`` picks the chaos actions taken in turn (default ``hostile,kill-leader,restart-apiserver``;
``outage`` keeps kube-apiserver down for ``--outage`` seconds, past renewDeadline by default, so the
leader must step down). ``--one-leader`` is the memory run: the chaos never kills the leader and only
restarts kube-apiserver (shorter than renewDeadline) and injects hostile objects, so one process leads
from start to end; its RSS is printed per minute with the slope, and a change of leader fails the run.

    .venv/bin/python bench/soak.py                                  # 3 minutes, chaos every 60 s
    .venv/bin/python bench/soak.py --minutes 30 --chaos-every 150   # the long run
    .venv/bin/python bench/soak.py --minutes 5 --chaos-every 30 --actions kill-leader,outage,hostile,restart-apiserver
    .venv/bin/python bench/soak.py --one-leader --minutes 30 --chaos-every 120   # one leader's RSS curve
        [--nodes 20] [--rate 4] [--lifetime 30] [--lease 15s,10s,2s] [--outage 15] [--work DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "tests" / "integration" / "scheduler"))
sys.path.insert(0, str(REPO / "bench"))

from controlplane import ControlPlane, running_control_plane  # noqa: E402
from soak_cluster import (  # noqa: E402
    CRDS,
    HOSTILE_CASES,
    PodLedger,
    Replicas,
    inject_hostile,
    install_crds,
    write_node_metrics,
)

CHAOS_ACTIONS = ("hostile", "kill-leader", "restart-apiserver", "outage")


@dataclass
class SoakOptions:
    minutes: float = 3.0
    rate: float = 4.0
    lifetime: float = 30.0
    chaos_every: float = 60.0
    metric_every: float = 10.0
    rss_every: float = 10.0
    drain: float = 90.0
    cpu: str = "100m"
    lease: tuple[str, str, str] = ("15s", "10s", "2s")
    actions: tuple[str, ...] = ("hostile", "kill-leader", "restart-apiserver")
    outage: float = 15.0
    one_leader: bool = False


@dataclass
class SoakReport:
    options: dict[str, Any]
    seconds: float
    namespace: str = ""
    created: int = 0
    create_failures: int = 0
    deleted: int = 0
    bound: int = 0
    chaos: list[tuple[float, str]] = field(default_factory=list)
    bound_twice: dict[str, list[str]] = field(default_factory=dict)
    scheduled_events_twice: dict[str, int] = field(default_factory=dict)
    unbound_at_end: list[str] = field(default_factory=list)
    hostile_pods_bound: list[str] = field(default_factory=list)
    on_hostile_node: list[str] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)
    lease_lost_restarts: list[str] = field(default_factory=list)
    tracebacks: dict[str, int] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    longest_bind_gap_s: float = 0.0
    rss: list[tuple[float, str, bool, float]] = field(default_factory=list)

    def leaders(self) -> list[str]:
        """The replica processes seen leading, in order."""
        return list(dict.fromkeys(name for _, name, leader, _ in self.rss if leader))

    def violations(self) -> list[str]:
        found = []
        if self.bound_twice:
            found.append(f"pods bound to two nodes: {self.bound_twice}")
        if self.scheduled_events_twice:
            found.append(f"pods with two Scheduled Events: {self.scheduled_events_twice}")
        if self.unbound_at_end:
            found.append(f"{len(self.unbound_at_end)} schedulable pods not bound: {self.unbound_at_end[:10]}")
        if self.hostile_pods_bound:
            found.append(f"hostile pods bound: {self.hostile_pods_bound}")
        if self.on_hostile_node:
            found.append(f"pods bound to the hostile Node: {self.on_hostile_node[:10]}")
        if self.unexpected_exits:
            found.append(f"replicas exited on their own: {self.unexpected_exits}")
        if any(self.tracebacks.values()):
            found.append(f"tracebacks in the logs: {self.tracebacks}")
        leaders = self.leaders()
        if self.options.get("one_leader") and (len(leaders) != 1 or self.lease_lost_restarts):
            found.append(
                f"--one-leader: the lead changed hands (leaders seen: {leaders}, "
                f"lease lost: {self.lease_lost_restarts})"
            )
        if self.created == 0 or self.bound == 0:
            found.append("nothing was created or bound")
        return found


def run_soak(plane: ControlPlane, nodes: list[str], work: Path, options: SoakOptions) -> SoakReport:
    """Run the soak on ``plane`` over ``nodes`` (Ready, labelled ``type=kwok``); the namespace, replicas,
    hostile objects and NodeMetrics it made are removed before it returns."""
    install_crds(plane)
    ledger = PodLedger.new(plane, prefix="soak")
    soak = Soak(
        plane,
        nodes,
        ledger,
        Replicas(plane, ledger, work, options.lease),
        options,
        SoakReport(options=asdict(options), seconds=options.minutes * 60, namespace=ledger.namespace),
    )
    try:
        with ledger.watching():
            soak.run()
            _collect(soak)
    finally:
        soak.chaos_stop.set()
        soak.stop.set()
        soak.replicas.stop_all()
        ledger.cleanup(soak.hostile, nodes)
    return soak.report


@dataclass
class Soak:
    plane: ControlPlane
    nodes: list[str]
    ledger: PodLedger
    replicas: Replicas
    options: SoakOptions
    report: SoakReport
    hostile: list[str] = field(default_factory=list)
    hostile_turns: int = 0
    started: float = field(default_factory=time.monotonic)
    stop: threading.Event = field(default_factory=threading.Event)
    chaos_stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        self.replicas.start_both()
        self.started = time.monotonic()
        chaos = threading.Thread(target=self.chaos_loop, daemon=True)
        helpers = [
            threading.Thread(target=self.metrics_loop, daemon=True),
            threading.Thread(target=self.rss_loop, daemon=True),
        ]
        for thread in (chaos, *helpers):
            thread.start()
        self.churn()
        self.chaos_stop.set()
        chaos.join(180)  # an action under way finishes before the drain
        self.drain()
        self.stop.set()
        for thread in helpers:
            thread.join(30)
        time.sleep(1)  # the watch catches up with the last bindings

    def churn(self) -> None:
        """Create ``rate`` pods/s (after a stall the schedule restarts from now: no burst to catch up) and
        delete the bound ones past their lifetime, until the soak's time is up."""
        end = self.started + self.options.minutes * 60
        next_create = self.started
        seq = 0
        while (now := time.monotonic()) < end:
            if self.ledger.create(f"c-{seq}", self.options.cpu):
                self.report.created += 1
            else:
                self.report.create_failures += 1
            seq += 1
            self.report.deleted += self.ledger.delete_expired(self.options.lifetime)
            self.replicas.check_alive()
            next_create = max(next_create + 1 / self.options.rate, now - 1)
            time.sleep(max(0.0, next_create - time.monotonic()))

    def chaos_loop(self) -> None:
        """One action every ``chaos_every`` seconds from the start (one that overran delays the next)."""
        turn = 0
        while not self.chaos_stop.wait(
            max(0.0, self.started + (turn + 1) * self.options.chaos_every - time.monotonic())
        ):
            at = time.monotonic() - self.started
            action = self.chaos(turn)
            self.report.chaos.append((round(at, 1), action))
            print(f"[{at:7.1f}s] chaos: {action}", flush=True)
            turn += 1

    def chaos(self, turn: int) -> str:
        actions = self.options.actions
        kind = actions[turn % len(actions)]
        if kind == "kill-leader":
            return self.replicas.kill_leader()
        if kind in ("restart-apiserver", "outage"):
            t0 = time.monotonic()
            if kind == "outage":  # kube-apiserver kept down for --outage seconds (etcd keeps the objects)
                self.plane.stop_apiserver()
                time.sleep(max(0.0, t0 + self.options.outage - time.monotonic()))
                self.plane.start_apiserver()
            else:
                self.plane.restart_apiserver()
            return f"{kind} ({time.monotonic() - t0:.1f}s down and back)"
        injected = []
        for i in range(2):  # two cases a turn: three hostile turns cover them all
            case = HOSTILE_CASES[(self.hostile_turns * 2 + i) % len(HOSTILE_CASES)]
            name = inject_hostile(self.plane, self.ledger, case, turn, self.nodes)
            self.hostile.append(name)
            injected.append(f"{case} ({name})")
        self.hostile_turns += 1
        return "hostile " + ", ".join(injected)

    def drain(self) -> None:
        deadline = time.monotonic() + self.options.drain
        while time.monotonic() < deadline and self.ledger.unbound_schedulable():
            self.replicas.check_alive()
            time.sleep(1)

    def metrics_loop(self) -> None:
        while not self.stop.wait(self.options.metric_every):
            write_node_metrics(self.plane, self.nodes, self.ledger)

    def rss_loop(self) -> None:
        while True:
            for name, leader, rss in self.replicas.sample_rss():
                self.report.rss.append((round(time.monotonic() - self.started, 1), name, leader, rss))
            if self.stop.wait(self.options.rss_every):
                return


def _collect(soak: Soak) -> None:
    ledger, replicas, report, hostile = soak.ledger, soak.replicas, soak.report, soak.hostile
    report.bound = ledger.bound_count()
    report.bound_twice = ledger.rebound()
    report.scheduled_events_twice = ledger.scheduled_event_dupes()
    report.unbound_at_end = sorted(ledger.unbound_schedulable())
    report.hostile_pods_bound = sorted(ledger.hostile_pods_bound())
    report.on_hostile_node = sorted(ledger.pods_on({h for h in hostile if h.startswith("node/")}))
    report.unexpected_exits = list(replicas.unexpected_exits)
    report.lease_lost_restarts = list(replicas.lease_lost)
    report.tracebacks = replicas.tracebacks()
    latencies = ledger.latencies_ms()
    if latencies:
        cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
        report.latency_ms = {"p50": round(cuts[49], 1), "p99": round(cuts[98], 1), "max": round(max(latencies), 1)}
    report.longest_bind_gap_s = round(ledger.longest_bind_gap(), 1)


def rss_table(report: SoakReport, step: float = 60.0) -> list[str]:
    """One line per ``step`` seconds: each replica process's RSS in MiB (``*`` marks the leader)."""
    names = list(dict.fromkeys(name for _, name, _, _ in report.rss))
    lines = ["   t(s)  " + "  ".join(f"{n:>9}" for n in names)]
    rows: dict[int, dict[str, str]] = {}
    for t, name, leader, rss in report.rss:
        rows.setdefault(int(t // step), {})[name] = f"{rss:8.1f}{'*' if leader else ' '}"
    for bucket in sorted(rows):
        cells = "  ".join(rows[bucket].get(n, " " * 9) for n in names)
        lines.append(f"{bucket * step:7.0f}  {cells}")
    return lines


def rss_slopes(report: SoakReport, warmup: float = 60.0) -> dict[str, tuple[float, float, float]]:
    """Per replica process that led for over two minutes past its first ``warmup`` seconds as leader:
    (first MiB, last MiB, least-squares slope in MiB/min) over those samples as leader."""
    series: dict[str, list[tuple[float, float]]] = {}
    for t, name, leader, rss in report.rss:
        if leader:
            series.setdefault(name, []).append((t, rss))
    slopes = {}
    for name, samples in series.items():
        points = [(t, r) for t, r in samples if t >= samples[0][0] + warmup]
        if len(points) < 3 or points[-1][0] - points[0][0] < 120:
            continue
        xs, ys = [t / 60 for t, _ in points], [r for _, r in points]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        slopes[name] = (ys[0], ys[-1], slope)
    return slopes


def leader_curve(report: SoakReport, name: str, step: float = 60.0) -> list[tuple[int, float]]:
    """``name``'s RSS while leading, one point per ``step`` seconds of the run: (minute, MiB of the
    first sample in that minute)."""
    points: dict[int, float] = {}
    for t, who, leader, rss in report.rss:
        if who == name and leader:
            points.setdefault(int(t // step), rss)
    return sorted(points.items())


def print_report(report: SoakReport) -> None:
    print(f"\nsoak: {report.seconds / 60:.1f} min, {len(report.chaos)} chaos actions")
    for t, action in report.chaos:
        print(f"  {t:7.1f}s  {action}")
    print(
        f"pods: created {report.created} (create failures {report.create_failures}), bound {report.bound}, "
        f"deleted {report.deleted}"
    )
    print(f"replicas: exited after a lost lease and restarted: {report.lease_lost_restarts or 'none'}")
    print(f"bind latency ms: {report.latency_ms}; longest gap between binds: {report.longest_bind_gap_s}s")
    print("RSS MiB per replica process (* = leader at the sample):")
    for line in rss_table(report):
        print("  " + line)
    if report.options.get("one_leader"):
        for name in report.leaders():
            curve = leader_curve(report, name)
            print(f"  {name} as leader, per minute (minute MiB): " + ", ".join(f"{m} {r:.1f}" for m, r in curve))
    for name, (first, last, slope) in rss_slopes(report).items():
        print(f"  {name} as leader, after its first minute: {first:.1f} -> {last:.1f} MiB, slope {slope:+.2f} MiB/min")
    violations = report.violations()
    print("invariants: " + ("all held" if not violations else "FAILED"))
    for violation in violations:
        print("  - " + violation)


@contextlib.contextmanager
def kwok_cluster(nodes: int) -> Iterator[tuple[ControlPlane, list[str]]]:
    with (
        tempfile.TemporaryDirectory(prefix="pykoord-soak-") as tmp,
        running_control_plane(Path(tmp) / "cluster", kwok_nodes=nodes) as plane,
    ):
        yield plane, [f"kwok-node-{i}" for i in range(nodes)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    defaults = SoakOptions()
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--rate", type=float, default=defaults.rate, help="pods created per second")
    parser.add_argument("--lifetime", type=float, default=defaults.lifetime, help="seconds a bound pod lives")
    parser.add_argument("--chaos-every", type=float, default=defaults.chaos_every)
    parser.add_argument("--metric-every", type=float, default=defaults.metric_every)
    parser.add_argument("--rss-every", type=float, default=defaults.rss_every)
    parser.add_argument("--drain", type=float, default=defaults.drain)
    parser.add_argument("--lease", default="15s,10s,2s", help="leaseDuration,renewDeadline,retryPeriod")
    parser.add_argument(
        "--actions",
        default=None,
        help="the chaos actions taken in turn (default hostile,kill-leader,restart-apiserver; "
        "with --one-leader hostile,restart-apiserver), from: " + ", ".join(CHAOS_ACTIONS),
    )
    parser.add_argument(
        "--outage", type=float, default=defaults.outage, help="seconds kube-apiserver stays down in an 'outage' action"
    )
    parser.add_argument(
        "--one-leader",
        action="store_true",
        help="the memory run: chaos only restarts "
        "kube-apiserver and injects hostile objects, so one replica leads throughout",
    )
    parser.add_argument("--json", type=Path, help="write the report as JSON here")
    parser.add_argument(
        "--work",
        type=Path,
        help="where the replicas' configs and logs go (default: a new temp dir); kept after the run",
    )
    ns = parser.parse_args(argv)
    for flag in ("minutes", "rate", "lifetime", "chaos_every", "metric_every", "rss_every", "drain"):
        if getattr(ns, flag) <= 0:
            parser.error(f"--{flag.replace('_', '-')} must be > 0")
    if ns.nodes < 1:
        parser.error("--nodes must be >= 1")
    if ns.actions is None:
        ns.actions = "hostile,restart-apiserver" if ns.one_leader else ",".join(defaults.actions)
    actions = tuple(a.strip() for a in ns.actions.split(",") if a.strip())
    if ns.one_leader and {"kill-leader", "outage"} & set(actions):
        parser.error(
            "--one-leader: the chaos may not kill the leader or outlast renewDeadline "
            "(use hostile and restart-apiserver)"
        )
    unknown = [a for a in actions if a not in CHAOS_ACTIONS]
    if unknown or not actions:
        parser.error(f"--actions: unknown {unknown or 'empty list'}; choose from {', '.join(CHAOS_ACTIONS)}")
    if ns.outage <= 0:
        parser.error("--outage must be > 0")
    lease = tuple(ns.lease.split(","))
    if len(lease) != 3:
        parser.error("--lease takes three durations: leaseDuration,renewDeadline,retryPeriod")
    options = SoakOptions(
        minutes=ns.minutes,
        rate=ns.rate,
        lifetime=ns.lifetime,
        chaos_every=ns.chaos_every,
        metric_every=ns.metric_every,
        rss_every=ns.rss_every,
        drain=ns.drain,
        lease=lease,
        actions=actions,
        outage=ns.outage,
        one_leader=ns.one_leader,
    )  # type: ignore[arg-type]
    print(f"soak: {ns.nodes} kwok nodes, CRDs {', '.join(p.name for p in CRDS)}", flush=True)
    work = ns.work or Path(tempfile.mkdtemp(prefix="pykoord-soak-logs-"))
    print(f"soak: replica configs and logs in {work} (kept)", flush=True)
    with kwok_cluster(ns.nodes) as (plane, nodes):
        report = run_soak(plane, nodes, work, options)
        print_report(report)
        if ns.json:
            ns.json.write_text(json.dumps(asdict(report), indent=1))
    return 1 if report.violations() else 0


if __name__ == "__main__":
    sys.exit(main())
