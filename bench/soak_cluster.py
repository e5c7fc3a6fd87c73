"""The soak's cluster side (bench/soak.py): the pod ledger and its watch, the two koord-scheduler
replicas, NodeMetric writes as koordlet makes them, and the hostile objects."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import ssl
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane
from kubesched import SchedulerProcess, scheduler_config, wait_until

REPO = Path(__file__).resolve().parents[1]
CRD_DIR = REPO / "deploy" / "crds"
NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
CRDS = (CRD_DIR / "slo.koordinator.sh_nodemetrics.yaml", CRD_DIR / "scheduling.koordinator.sh_reservations.yaml")
HUGE = "99999999999999999999999"
# In the order a short run meets them: the ones that once stopped a whole function come first.
HOSTILE_CASES = (
    "nodemetric-overflow",
    "node-overflow",
    "pod-overflow",
    "reservation-ttl",
    "nodemetric-negative",
    "reservation-huge-cpu",
)
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
MERGE_PATCH = "application/merge-patch+json"


def install_crds(plane: ControlPlane) -> None:
    for crd in CRDS:
        doc = next(d for d in yaml.safe_load_all(crd.read_text()) if d)
        result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
        assert result.status in (201, 409), result.body[:300]
    for path in (NODEMETRICS, RESERVATIONS):
        wait_until(lambda path=path: plane.request("GET", path).status == 200, timeout=30, what=f"{path} served")


def _call(plane: ControlPlane, method: str, path: str, body: Any = None, **kw: Any) -> int:
    """The HTTP status, or 0 when the API server cannot be reached (it may be restarting)."""
    try:
        return plane.request(method, path, body, timeout=10, **kw).status
    except OSError:
        return 0


class PodLedger:
    """The soak's namespace: the pods it created, and what a watch of them saw (the first time each pod
    was seen bound, and every node it was seen on)."""

    def __init__(self, plane: ControlPlane, name: str) -> None:
        self.plane = plane
        self.name = name
        self.created: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.nodes_seen: dict[str, list[str]] = {}
        self.deleted: set[str] = set()
        self.hostile: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    @classmethod
    def new(cls, plane: ControlPlane, *, prefix: str) -> PodLedger:
        ledger = cls(plane, f"{prefix}-{uuid.uuid4().hex[:6]}")
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ledger.namespace}}
        assert plane.request("POST", "/api/v1/namespaces", body).status == 201
        return ledger

    # The attributes kubesched.scheduler_config reads.
    @property
    def namespace(self) -> str:
        return self.name

    @property
    def scheduler_name(self) -> str:
        return f"koord-{self.name}"

    def pod_body(self, name: str, cpu: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {"app": "soak"}},
            "spec": {
                "schedulerName": self.scheduler_name,
                "nodeSelector": {"type": "kwok"},
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                    }
                ],
            },
        }

    def create(self, name: str, cpu: str, *, hostile: bool = False) -> bool:
        status = _call(self.plane, "POST", f"/api/v1/namespaces/{self.namespace}/pods", self.pod_body(name, cpu))
        if status != 201:
            return False
        with self._lock:
            self.created[name] = time.monotonic()
            if hostile:
                self.hostile.add(name)
        return True

    def delete_expired(self, lifetime: float) -> int:
        """Delete the bound pods created over ``lifetime`` seconds ago; return how many went."""
        now = time.monotonic()
        with self._lock:
            due = [
                n
                for n, t in self.created.items()
                if now - t >= lifetime and n in self.bound_at and n not in self.deleted
            ]
        gone = 0
        for name in due:
            path = f"/api/v1/namespaces/{self.namespace}/pods/{name}?gracePeriodSeconds=0"
            if _call(self.plane, "DELETE", path) in (200, 202, 404):
                with self._lock:
                    self.deleted.add(name)
                gone += 1
        return gone

    # ----- the watch -----

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        ready = threading.Event()
        thread = threading.Thread(target=self._watch, args=(ready,), daemon=True)
        thread.start()
        assert ready.wait(30), "the pod watch did not start"
        try:
            yield
        finally:
            self._stop.set()
            thread.join(15)

    def _observe(self, pod: dict[str, Any]) -> None:
        name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
        if not node:
            return
        with self._lock:
            seen = self.nodes_seen.setdefault(name, [])
            if not seen or seen[-1] != node:
                seen.append(node)
            self.bound_at.setdefault(name, time.monotonic())

    def _watch(self, ready: threading.Event) -> None:
        base = f"/api/v1/namespaces/{self.namespace}/pods"
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    listing = self.plane.request("GET", base, timeout=30).json()
                    for pod in listing["items"]:
                        self._observe(pod)
                    rv = listing["metadata"]["resourceVersion"]
                request = urllib.request.Request(
                    f"{self.plane.server}{base}?watch=1&resourceVersion={rv}&timeoutSeconds=10&allowWatchBookmarks=1",
                    headers={"Authorization": f"Bearer {self.plane.token}"},
                )
                context = ssl.create_default_context(cafile=str(self.plane.ca_file))
                with urllib.request.urlopen(request, context=context, timeout=20) as resp:
                    ready.set()
                    for line in resp:
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            rv = ""  # expired (410): list again
                            break
                        rv = event["object"]["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._observe(event["object"])
            except (OSError, ValueError, KeyError):
                time.sleep(0.5)  # the API server is restarting; resume from rv

    # ----- what it saw -----

    def unbound_schedulable(self) -> list[str]:
        with self._lock:
            return [n for n in self.created if n not in self.bound_at and n not in self.hostile]

    def bound_count(self) -> int:
        with self._lock:
            return len(self.bound_at)

    def rebound(self) -> dict[str, list[str]]:
        with self._lock:
            return {n: list(nodes) for n, nodes in self.nodes_seen.items() if len(nodes) > 1}

    def hostile_pods_bound(self) -> list[str]:
        with self._lock:
            return [n for n in self.hostile if n in self.bound_at]

    def pods_on(self, nodes: set[str]) -> list[str]:
        names = {n.split("/", 1)[1] for n in nodes}
        with self._lock:
            return [p for p, seen in self.nodes_seen.items() if names & set(seen)]

    def requests_on(self) -> dict[str, int]:
        """Milli-CPU requested by the live pods bound to each node (every soak pod asks the same)."""
        with self._lock:
            live = [seen[-1] for n, seen in self.nodes_seen.items() if n not in self.deleted and seen]
        per_node: dict[str, int] = {}
        for node in live:
            per_node[node] = per_node.get(node, 0) + 100
        return per_node

    def latencies_ms(self) -> list[float]:
        with self._lock:
            return [max(0.0, (self.bound_at[n] - t) * 1000) for n, t in self.created.items() if n in self.bound_at]

    def longest_bind_gap(self) -> float:
        """The longest time no pod was bound while a schedulable pod was waiting: for each gap between two
        consecutive binds, the part of it after the earliest creation among the pods still unbound at
        its end."""
        with self._lock:
            binds = sorted(self.bound_at.values())
            waits = [(t, self.bound_at.get(n, float("inf"))) for n, t in self.created.items() if n not in self.hostile]
        longest = 0.0
        for before, after in itertools.pairwise(binds):
            if after - before <= max(longest, 1.0):
                continue
            waiting = [c for c, b in waits if c < after and b >= after]
            if waiting:
                longest = max(longest, after - max(before, min(waiting)))
        return longest

    def scheduled_event_dupes(self) -> dict[str, int]:
        """Pods with more than one ``Scheduled`` Event."""
        counts: dict[str, int] = {}
        cont = ""
        while True:
            result = self.plane.request(
                "GET", f"/apis/events.k8s.io/v1/namespaces/{self.namespace}/events?limit=2000&continue={cont}"
            )
            body = result.json()
            for event in body["items"]:
                if event.get("reason") == "Scheduled":
                    uid = event["regarding"].get("uid") or event["regarding"]["name"]
                    counts[uid] = counts.get(uid, 0) + 1
            cont = body["metadata"].get("continue") or ""
            if not cont:
                return {uid: c for uid, c in counts.items() if c > 1}

    def cleanup(self, hostile_objects: list[str], nodes: list[str]) -> None:
        for ref in hostile_objects:
            kind, name = ref.split("/", 1)
            if kind == "node":
                _call(self.plane, "DELETE", f"/api/v1/nodes/{name}")
            elif kind == "reservation":
                _call(self.plane, "DELETE", f"{RESERVATIONS}/{name}")
        for node in nodes:
            _call(self.plane, "DELETE", f"{NODEMETRICS}/{node}")
        _call(self.plane, "DELETE", f"/api/v1/namespaces/{self.namespace}/pods?gracePeriodSeconds=0")
        _call(self.plane, "DELETE", f"/api/v1/namespaces/{self.namespace}")


def write_node_metrics(plane: ControlPlane, nodes: list[str], ledger: PodLedger, cpu: str | None = None) -> None:
    """Each node's NodeMetric status as koordlet reports it: usage half the live pods' requests plus a
    base of 200m, a fresh updateTime. ``cpu`` overrides the usage (a hostile report)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    requests = ledger.requests_on()
    for node in nodes:
        usage = cpu or f"{200 + requests.get(node, 0) // 2}m"
        status = {
            "status": {"updateTime": now, "nodeMetric": {"nodeUsage": {"resources": {"cpu": usage, "memory": "1Gi"}}}}
        }
        path = f"{NODEMETRICS}/{node}/status"
        if _call(plane, "PATCH", path, status, content_type=MERGE_PATCH) == 404:
            _call(
                plane,
                "POST",
                NODEMETRICS,
                {
                    "apiVersion": "slo.koordinator.sh/v1alpha1",
                    "kind": "NodeMetric",
                    "metadata": {"name": node},
                    "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
                },
            )
            _call(plane, "PATCH", path, status, content_type=MERGE_PATCH)


def inject_hostile(plane: ControlPlane, ledger: PodLedger, case: str, turn: int, nodes: list[str]) -> str:
    """Create one hostile object (the CRD or API schema accepts it); return ``kind/name``."""
    if case in ("nodemetric-overflow", "nodemetric-negative"):
        node = nodes[turn % len(nodes)]
        write_node_metrics(plane, [node], ledger, cpu=HUGE if case == "nodemetric-overflow" else "-400")
        return f"nodemetric/{node}"
    if case == "node-overflow":
        name = f"{ledger.name}-hostile-{turn}"
        resources = {"cpu": HUGE, "memory": "32Gi", "pods": "110"}
        _call(
            plane,
            "POST",
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"type": "kwok"}},
                "status": {
                    "capacity": resources,
                    "allocatable": resources,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                },
            },
        )
        return f"node/{name}"
    if case == "pod-overflow":
        name = f"hostile-{turn}"
        ledger.create(name, HUGE, hostile=True)
        return f"pod/{name}"
    name = f"{ledger.name}-{case}-{turn}"
    _call(
        plane,
        "POST",
        RESERVATIONS,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "metadata": {"namespace": ledger.namespace},
                    "spec": {
                        "schedulerName": ledger.scheduler_name,
                        "nodeSelector": {"type": "kwok"},
                        "containers": [
                            {
                                "name": "c",
                                "resources": {
                                    "requests": {
                                        "cpu": "1e23" if case == "reservation-huge-cpu" else "100m",
                                        "memory": "10Mi",
                                    }
                                },
                            }
                        ],
                    },
                },
                "owners": [{"labelSelector": {"matchLabels": {"app": name}}}],
                "ttl": "forever" if case == "reservation-ttl" else "1h",
            },
        },
    )
    return f"reservation/{name}"


class Replicas:
    """Two koord-scheduler replicas with leader election (kube-scheduler's default lease 15s/10s/2s unless
    told), at verbosity 0; a killed one is started again (a new process: ``a1``, ``a2``, ...)."""

    def __init__(
        self, plane: ControlPlane, ledger: PodLedger, work: Path, lease: tuple[str, str, str] = ("15s", "10s", "2s")
    ) -> None:
        self.plane = plane
        self.ledger = ledger
        self.work = work
        config = scheduler_config(ledger, leader_elect=True, lease=lease)  # type: ignore[arg-type]
        config["profiles"][0]["plugins"] = PLUGINS
        self.config = config
        self.current: dict[str, SchedulerProcess] = {}
        self.names: dict[str, str] = {}
        self.every: list[SchedulerProcess] = []
        self.unexpected_exits: list[str] = []
        self.lease_lost: list[str] = []
        self._incarnation = {"a": 0, "b": 0}
        self._killed: set[int] = set()
        self._lock = threading.Lock()

    def _start(self, slot: str) -> SchedulerProcess:
        """Start the slot's next process without waiting for it (a kubelet restarting a container)."""
        self._incarnation[slot] += 1
        name = f"{slot}{self._incarnation[slot]}"
        proc = SchedulerProcess.start(
            self.plane,
            self.config,
            self.work,
            name=name,
            verbosity=0,
            wait_ready=False,
            extra_args=["--controllers=reservation"],
        )
        with self._lock:
            self.current[slot] = proc
            self.names[slot] = name
            self.every.append(proc)
        return proc

    def start_both(self) -> None:
        procs = [self._start("a"), self._start("b")]
        wait_until(
            lambda: all(p.get("/readyz")[0] == 200 or not p.alive for p in procs),
            timeout=90,
            what="both replicas ready",
        )
        assert all(p.alive for p in procs), "a replica exited at start:\n" + "\n".join(p.log_tail() for p in procs)

    def is_leader(self, proc: SchedulerProcess) -> bool:
        status, text = proc.get("/metrics")  # (0, "") while a process starts or is gone
        want = f'leader_election_master_status{{name="{self.ledger.scheduler_name}"}} 1'
        return status == 200 and any(line.startswith(want) for line in text.splitlines())

    def kill_leader(self) -> str:
        leader = ""
        with contextlib.suppress(AssertionError):
            wait_until(lambda: any(self.is_leader(p) for p in self.current.values()), timeout=20, what="a leader")
        for slot, proc in list(self.current.items()):
            if self.is_leader(proc):
                leader = slot
        if not leader:
            return "kill-leader: no leader found"
        name = self.names[leader]
        with self._lock:
            self._killed.add(self.current[leader].process.pid)
            self.current[leader].kill()
        self._start(leader)
        return f"kill-leader {name}; {self.names[leader]} started"

    def check_alive(self) -> None:
        """Start again a replica that exited by itself. Exiting when the lease could not be renewed in
        time (an API-server outage longer than renewDeadline) is the designed reaction, as kube-scheduler's,
        and is counted apart; any other exit is a failure."""
        with self._lock:
            dead = [s for s, p in self.current.items() if not p.alive and p.process.pid not in self._killed]
        for slot in dead:
            proc = self.current[slot]
            proc.terminate()  # closes its log
            note = f"{self.names[slot]} (exit {proc.process.returncode})"
            if "leader election lost; exiting" in proc.log_path.read_text(errors="replace"):
                self.lease_lost.append(note)
            else:
                self.unexpected_exits.append(note)
            self._start(slot)

    def sample_rss(self) -> list[tuple[str, bool, float]]:
        with self._lock:
            procs = [(self.names[s], p) for s, p in self.current.items()]
        samples = []
        for name, proc in procs:
            try:
                text = Path(f"/proc/{proc.process.pid}/status").read_text()
            except OSError:
                continue
            match = re.search(r"VmRSS:\s+(\d+) kB", text)
            if match and proc.alive:
                samples.append((name, self.is_leader(proc), int(match.group(1)) / 1024))
        return samples

    def tracebacks(self) -> dict[str, int]:
        return {p.log_path.stem: p.log_path.read_text(errors="replace").count("Traceback") for p in self.every}

    def stop_all(self) -> None:
        # Every process, alive or not: terminate() also closes its log (a replica that exited by itself
        # since the last check_alive would otherwise leave its log file open).
        for proc in self.every:
            proc.terminate()
