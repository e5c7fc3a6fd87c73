"""Helpers to install deploy/ on the test run's API server and run the two binaries as their own
ServiceAccounts (tokens from the TokenRequest API), as the Deployment and DaemonSet would.

Used by tests/integration/deploy/ and tests/e2e/.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml
from controlplane import ControlPlane, free_port

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
NAMESPACE = "koordinator-system"
BIN = Path(sys.executable).parent
CRDS = (
    "clustercolocationprofiles.config.koordinator.sh",
    "reservations.scheduling.koordinator.sh",
    "podgroups.scheduling.sigs.k8s.io",
    "elasticquotas.scheduling.sigs.k8s.io",
    "nodemetrics.slo.koordinator.sh",
    "nodeslos.slo.koordinator.sh",
)


def wait_for(check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll ``check`` until it returns something truthy (returned) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def kubectl(plane: ControlPlane, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(plane.binaries.kubectl), f"--kubeconfig={plane.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def apply_deploy(plane: ControlPlane) -> str:
    """``kubectl apply --server-side -k deploy/`` (what docs/install.md tells admins); returns stdout once
    the CRDs are established."""
    result = kubectl(plane, "apply", "--server-side", "--force-conflicts", "-k", str(DEPLOY))
    assert result.returncode == 0, result.stderr
    for crd in CRDS:
        wait = kubectl(plane, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
        assert wait.returncode == 0, wait.stderr
    return result.stdout


def service_account_token(plane: ControlPlane, name: str, *, namespace: str = NAMESPACE) -> str:
    """A bound token for ServiceAccount ``namespace/name`` from the TokenRequest API (1 hour)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    result = plane.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body)
    assert result.status == 201, result.body[:300]
    token: str = result.json()["status"]["token"]
    return token


def service_account_kubeconfig(plane: ControlPlane, name: str, path: Path) -> tuple[Path, str]:
    """A kubeconfig that authenticates as the ServiceAccount (no client certificate: not admin)."""
    token = service_account_token(plane, name)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": plane.server, "certificate-authority": str(plane.ca_file)}}
        ],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": "local", "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config))
    return path, token


def deployed_koordlet_config(path: Path) -> Path:
    """deploy/koordlet/configmap.yaml's koordlet-config.yaml (the feature gates) as a file."""
    configmap = yaml.safe_load((DEPLOY / "koordlet" / "configmap.yaml").read_text())
    path.write_text(configmap["data"]["koordlet-config.yaml"])
    return path


@dataclass
class Process:
    """A binary running in the background with its output in ``log_path``."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes] = field(repr=False)

    @classmethod
    def start(cls, name: str, argv: list[str], work: Path, *, env: dict[str, str] | None = None) -> Process:
        work.mkdir(parents=True, exist_ok=True)
        log_path = work / f"{name}.log"
        log = log_path.open("ab")
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,
        )
        return cls(name, process, log_path, log)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def stop(self, timeout: float = 20) -> int:
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)
        finally:
            self._log.close()


def start_koord_scheduler(plane: ControlPlane, work: Path, *, kubeconfig: Path, config: Path) -> tuple[Process, int]:
    """``koord-scheduler --config ... --kubeconfig ...`` (leader election as configured); waits for /readyz."""
    import urllib.request

    port = free_port()
    proc = Process.start(
        "koord-scheduler",
        [
            str(BIN / "koord-scheduler"),
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-port",
            str(port),
            "--bind-address",
            "127.0.0.1",
            "-v",
            "2",
        ],
        work,
    )

    def ready() -> bool:
        assert proc.alive, f"koord-scheduler exited:\n{proc.log_tail()}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    try:
        wait_for(ready, timeout=60, what="koord-scheduler /readyz")
    except BaseException:
        proc.stop()
        raise AssertionError(f"koord-scheduler not ready:\n{proc.log_tail()}") from None
    return proc, port


@dataclass
class FakeNodeRoot:
    """A node's /proc and kubepods cgroup tree (cgroupfs driver, v1 files) that a thread keeps moving:
    node CPU busy at ``cpu_cores`` (of ``num_cpus``), memory at ``memory_percent`` of ``memory_bytes``,
    and pods' memory as set by :meth:`add_pod`."""

    root: Path
    num_cpus: int = 4
    memory_bytes: int = 8 << 30
    cpu_cores: float = 0.4
    memory_percent: int = 25
    pods: dict[str, tuple[str, int]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def cgroup(self) -> Path:
        return self.root / "cgroup"

    @property
    def proc(self) -> Path:
        return self.root / "proc"

    @property
    def sys(self) -> Path:
        return self.root / "sys"

    def add_pod(self, uid: str, kube_qos_dir: str, memory: int) -> None:
        """``kube_qos_dir``: "" (guaranteed), "burstable" or "besteffort"."""
        rel = "/".join(p for p in ("kubepods", kube_qos_dir, f"pod{uid}") if p)
        self.pods[uid] = (rel, memory)

    def start(self) -> FakeNodeRoot:
        (self.cgroup / "cpu" / "kubepods").mkdir(parents=True, exist_ok=True)
        self.proc.mkdir(parents=True, exist_ok=True)
        self.sys.mkdir(parents=True, exist_ok=True)
        self._write(0.0)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.wait(0.2):
            self._write(time.monotonic() - start)

    def _write(self, elapsed: float) -> None:
        hz = os.sysconf("SC_CLK_TCK")
        busy = int(elapsed * self.cpu_cores * hz)
        idle = int(elapsed * (self.num_cpus - self.cpu_cores) * hz)
        cpus = "".join(f"cpu{i} 0 0 0 0 0 0 0 0 0 0\n" for i in range(self.num_cpus))
        _atomic_write(self.proc / "stat", f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n{cpus}")
        total_kb = self.memory_bytes // 1024
        available_kb = total_kb * (100 - self.memory_percent) // 100
        _atomic_write(self.proc / "meminfo", f"MemTotal: {total_kb} kB\nMemAvailable: {available_kb} kB\n")
        for rel, memory in list(self.pods.values()):
            for sub in ("cpu", "cpuacct", "memory"):
                (self.cgroup / sub / rel).mkdir(parents=True, exist_ok=True)
            _atomic_write(self.cgroup / "cpuacct" / rel / "cpuacct.usage", "0")
            _atomic_write(self.cgroup / "cpu" / rel / "cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
            _atomic_write(
                self.cgroup / "memory" / rel / "memory.stat",
                f"total_active_anon {memory}\ntotal_inactive_anon 0\ntotal_unevictable 0\n",
            )


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def start_koordlet(node: str, fake: FakeNodeRoot, work: Path, *, kubeconfig: Path, config: Path) -> Process:
    """The real ``koordlet`` for ``node`` on its fake roots, reporting every second."""
    return Process.start(
        f"koordlet-{node}",
        [
            str(BIN / "koordlet"),
            "--node-name",
            node,
            "--kubeconfig",
            str(kubeconfig),
            "--config",
            str(config),
            "--cgroup-root",
            str(fake.cgroup),
            "--cgroup-driver",
            "cgroupfs",
            "--proc-root",
            str(fake.proc),
            "--sysfs-root",
            str(fake.sys),
            "--metrics-port",
            "-1",
            "--report-interval",
            "1",
            "--collect-res-used-interval",
            "1",
            "-v",
        ],
        work,
    )
