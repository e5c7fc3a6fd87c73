"""Helpers for koord-scheduler integration tests against the test run's real kube-apiserver.

Every test works in its own :class:`Scope`: a namespace, a node label value and a schedulerName of its
own, so tests never see each other's pods and a leftover from one cannot confuse another. Nodes are
created directly with status (no kubelet): they stay Ready and untainted, as in scheduler_perf.

:class:`SchedulerProcess` runs ``.venv/bin/koord-scheduler`` as a real subprocess (for SIGKILL,
restarts, two replicas); :class:`PodWatch` follows pod changes in a namespace from a thread, to prove
what happened over time (no pod ever re-bound).
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml
from controlplane import ControlPlane, free_port

from apis.core.quantity import quantity_nanos

REPO = Path(__file__).resolve().parents[3]
KOORD_SCHEDULER = REPO / ".venv" / "bin" / "koord-scheduler"
TEST_LABEL = "pykoord.test/scope"


def wait_until(check: Callable[[], bool], *, timeout: float, interval: float = 0.2, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Scope:
    """One test's namespace, node label and scheduler name on the shared cluster."""

    plane: ControlPlane
    name: str
    nodes: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, plane: ControlPlane, prefix: str) -> Scope:
        scope = cls(plane, f"{prefix}-{uuid.uuid4().hex[:6]}")
        scope.ok(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": scope.namespace}},
        )
        return scope

    @property
    def namespace(self) -> str:
        return self.name

    @property
    def scheduler_name(self) -> str:
        return f"koord-{self.name}"

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        result = self.plane.request(method, path, body)
        if result.status >= 300:
            raise AssertionError(f"{method} {path}: {result.status} {result.body[:300]!r}")
        return result.json() if result.body else None

    # ----- objects -----

    def node_body(self, name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110") -> dict[str, Any]:
        resources = {"cpu": cpu, "memory": memory, "pods": pods}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {TEST_LABEL: self.name, "kubernetes.io/hostname": name}},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        }

    def add_node(self, name: str, **resources: str) -> str:
        return self.add_node_body(self.node_body(f"{self.name}-{name}", **resources))

    def add_node_body(self, body: dict[str, Any]) -> str:
        self.ok("POST", "/api/v1/nodes", body)
        self.nodes.append(body["metadata"]["name"])
        return str(body["metadata"]["name"])

    def pod_body(
        self, name: str, *, cpu: str = "100m", memory: str = "100Mi", scheduler_name: str | None = None
    ) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "schedulerName": scheduler_name or self.scheduler_name,
                "nodeSelector": {TEST_LABEL: self.name},
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    }
                ],
            },
        }

    def add_pods(self, bodies: Iterable[dict[str, Any]]) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda body: self.ok("POST", path, body), bodies))

    def pods(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.ok("GET", f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        return items

    def pod(self, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = self.ok("GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        return pod

    def bound_count(self) -> int:
        return sum(1 for p in self.pods() if p["spec"].get("nodeName"))

    def wait_all_bound(self, want: int, *, timeout: float) -> list[dict[str, Any]]:
        wait_until(
            lambda: self.bound_count() >= want,
            timeout=timeout,
            interval=0.5,
            what=f"{want} pods bound in {self.namespace}",
        )
        return self.pods()

    def events(self, *, reason: str | None = None) -> list[dict[str, Any]]:
        items = self.ok("GET", f"/apis/events.k8s.io/v1/namespaces/{self.namespace}/events")["items"]
        return [e for e in items if reason is None or e.get("reason") == reason]

    def cleanup(self) -> None:
        for node in self.nodes:
            self.plane.request("DELETE", f"/api/v1/nodes/{node}")
        self.plane.request("DELETE", f"/api/v1/namespaces/{self.namespace}/pods?gracePeriodSeconds=0")

    # ----- checks -----

    def assert_within_capacity(self, pods: list[dict[str, Any]]) -> None:
        """No node is over its allocatable cpu, memory or pod count (the NodeResourcesFit rule)."""
        nodes = {n: self.ok("GET", f"/api/v1/nodes/{n}") for n in self.nodes}
        used: dict[str, dict[str, int]] = {}
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if not node:
                continue
            assert node in nodes, f"{pod['metadata']['name']} was bound to {node}, outside its selector"
            totals = used.setdefault(node, {"cpu": 0, "memory": 0, "pods": 0})
            requests = pod["spec"]["containers"][0]["resources"]["requests"]
            totals["cpu"] += quantity_nanos(requests["cpu"])
            totals["memory"] += quantity_nanos(requests["memory"])
            totals["pods"] += quantity_nanos("1")
        for node, totals in used.items():
            allocatable = nodes[node]["status"]["allocatable"]
            for resource, amount in totals.items():
                assert amount <= quantity_nanos(allocatable[resource]), f"{node} is over its {resource}"


def scheduler_config(
    scope: Scope,
    *,
    leader_elect: bool = False,
    qps: float = 5000,
    burst: int = 5000,
    lease: tuple[str, str, str] = ("15s", "10s", "2s"),
    extra_profiles: Iterable[str] = (),
) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": qps, "burst": burst},
        "leaderElection": {
            "leaderElect": leader_elect,
            "resourceName": scope.scheduler_name,
            "resourceNamespace": scope.namespace,
            "leaseDuration": lease[0],
            "renewDeadline": lease[1],
            "retryPeriod": lease[2],
        },
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 2,
        "profiles": [{"schedulerName": name} for name in (scope.scheduler_name, *extra_profiles)],
    }


@dataclass
class SchedulerProcess:
    """``koord-scheduler --config ... --kubeconfig ...`` as a subprocess, with its log in ``log_path``."""

    process: subprocess.Popen[bytes]
    log_path: Path
    port: int
    _log: IO[bytes]

    @classmethod
    def start(
        cls,
        plane: ControlPlane,
        config: dict[str, Any],
        work: Path,
        *,
        name: str = "koord",
        wait_ready: bool = True,
        verbosity: int = 2,
        extra_args: Sequence[str] = ("--controllers=reservation",),
    ) -> SchedulerProcess:
        """``extra_args`` default to the Reservation controller only: the colocation controllers act on
        every node of the shared cluster, so only the tests about them turn them on."""
        work.mkdir(parents=True, exist_ok=True)
        config_path = work / f"{name}.yaml"
        config_path.write_text(yaml.safe_dump(config))
        log_path = work / f"{name}.log"
        port = free_port()
        log = log_path.open("ab")
        process = subprocess.Popen(
            [
                str(KOORD_SCHEDULER),
                "--config",
                str(config_path),
                "--kubeconfig",
                str(plane.kubeconfig),
                "--metrics-port",
                str(port),
                "--bind-address",
                "127.0.0.1",
                "-v",
                str(verbosity),
                *extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        proc = cls(process, log_path, port, log)
        if wait_ready:
            wait_until(lambda: proc.get("/readyz")[0] == 200 or not proc.alive, timeout=30, what="readyz")
            assert proc.alive, f"koord-scheduler exited early:\n{proc.log_tail()}"
        return proc

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except OSError:
            return 0, ""

    def metric(self, name: str, /, **labels: str) -> float:
        """One sample's value from /metrics (0 when absent)."""
        status, text = self.get("/metrics")
        assert status == 200
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def terminate(self, timeout: float = 20) -> int:
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.alive:
            self.process.kill()
        self.process.wait(10)
        self._log.close()

    def log_tail(self, lines: int = 60) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class PodWatch:
    """Follows pods of one namespace from a thread, recording every node a pod was seen bound to."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.namespace = namespace
        self.nodes_seen: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def __enter__(self) -> PodWatch:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        listing = self.plane.request("GET", f"/api/v1/namespaces/{self.namespace}/pods").json()
        rv = listing["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            path = f"/api/v1/namespaces/{self.namespace}/pods?watch=1&resourceVersion={rv}&timeoutSeconds=5"
            request = urllib.request.Request(
                self.plane.server + path, headers={"Authorization": f"Bearer {self.plane.token}"}
            )
            try:
                context = ssl.create_default_context(cafile=str(self.plane.ca_file))
                with urllib.request.urlopen(request, context=context, timeout=10) as resp:
                    self._ready.set()
                    for line in resp:
                        event = json.loads(line)
                        obj = event["object"]
                        if event["type"] == "ERROR":
                            break
                        rv = obj["metadata"]["resourceVersion"]
                        node = obj["spec"].get("nodeName")
                        seen = self.nodes_seen.setdefault(obj["metadata"]["name"], [])
                        if node and (not seen or seen[-1] != node):
                            seen.append(node)
            except (OSError, ValueError):
                time.sleep(0.5)  # the API server is restarting; resume from rv

    def rebound(self) -> dict[str, list[str]]:
        """Pods seen on more than one node (must be empty)."""
        return {name: nodes for name, nodes in self.nodes_seen.items() if len(nodes) > 1}
