"""A real local control plane for integration tests and benchmarks.

Thin Python driver for ``scripts/control-plane.sh``: it starts etcd, kube-apiserver
(and kwok with fake nodes) built from the pinned releases in ``scripts/versions.env``,
and it starts the upstream kube-scheduler binary against that cluster so benchmarks
can compare pykoord with it.

Only the standard library is used for HTTP, so the helpers do not depend on the
kubernetes client's version (its ``Binding`` response parsing is broken:
kubernetes-client/python#547). ``ControlPlane.api_client()`` hands out a regular
``kubernetes.client.ApiClient`` for tests that want one.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "control-plane.sh"
NODE_SCRIPT = REPO_ROOT / "scripts" / "node.sh"
IMAGES_SCRIPT = REPO_ROOT / "scripts" / "images.py"

# A cold build compiles kube-apiserver, kube-scheduler, kubectl, etcd and kwok from
# source: about 20-30 minutes on 2 cores. Warm, `up` takes a few seconds.
BUILD_TIMEOUT_S = 3600.0
START_TIMEOUT_S = 180.0


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started, stopped or reached."""


@dataclass(frozen=True, slots=True)
class Binaries:
    """Absolute paths of the pinned upstream binaries in the build cache."""

    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    kubectl: Path
    kwok: Path

    @classmethod
    def build(cls, *, timeout: float = BUILD_TIMEOUT_S) -> Binaries:
        """Build whatever is missing (``control-plane.sh build``) and return the paths."""
        out = _run_script(["build"], env=os.environ.copy(), timeout=timeout)
        paths = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        try:
            return cls(
                etcd=Path(paths["ETCD"]),
                kube_apiserver=Path(paths["KUBE_APISERVER"]),
                kube_scheduler=Path(paths["KUBE_SCHEDULER"]),
                kubectl=Path(paths["KUBECTL"]),
                kwok=Path(paths["KWOK"]),
            )
        except KeyError as exc:
            raise ControlPlaneError(f"control-plane.sh build did not print {exc}:\n{out}") from None


@dataclass(frozen=True, slots=True)
class HttpResult:
    """Status and body of one raw HTTP call."""

    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver (+ kwok) owned by one state directory.

    Credentials: ``kubeconfig`` authenticates with a client certificate of user
    ``pykoord-admin`` in group ``system:masters``; ``token`` is a static bearer
    token for the same identity, handy for raw HTTP.
    """

    state_dir: Path
    kubeconfig: Path
    server: str
    ca_file: Path
    client_cert_file: Path
    client_key_file: Path
    token: str
    binaries: Binaries
    kwok_nodes: int
    _schedulers: list[KubeScheduler] = field(default_factory=list, repr=False)

    @classmethod
    def up(
        cls,
        state_dir: Path,
        *,
        kwok_nodes: int = 0,
        crds: bool = True,
        node: bool = False,
        build_timeout: float = BUILD_TIMEOUT_S,
        start_timeout: float = START_TIMEOUT_S,
    ) -> ControlPlane:
        """Build missing binaries, then start a cluster whose state lives in ``state_dir``.

        ``kwok_nodes`` fake nodes named ``kwok-node-<i>`` (label ``type=kwok``,
        4 cpu / 32Gi / 110 pods) are created and kept Ready by kwok. ``crds=False`` starts it without
        ``deploy/crds`` (for a test that installs its own). ``node=True`` adds a real node (``up --node``:
        kubelet, containerd, kube-controller-manager's workload controllers, kube-scheduler); its binaries and
        images are built first, under ``build_timeout``.
        """
        binaries = Binaries.build(timeout=build_timeout)
        env = _script_env(state_dir)
        if node:
            _run_script(["build"], env=env, timeout=build_timeout, script=NODE_SCRIPT)
            _run_script(["build", "pause", "workload", "pykoord"], env=env, timeout=build_timeout, script=IMAGES_SCRIPT)
        args = ["up", "--kwok-nodes", str(kwok_nodes), *([] if crds else ["--no-crds"]), *(["--node"] if node else [])]
        try:
            out = _run_script(args, env=env, timeout=start_timeout)
        except ControlPlaneError as exc:
            logs = "\n".join(
                f"--- {path.name} ---\n{_tail(path, 30)}" for path in sorted((state_dir / "logs").glob("*.log"))
            )
            # Nothing may outlive a failed start (etcd's data dir is on /dev/shm).
            with contextlib.suppress(ControlPlaneError):
                _run_script(["down"], env=env, timeout=start_timeout)
            raise ControlPlaneError(f"{exc}\n{logs}") from None
        kubeconfig = Path(out.strip().splitlines()[-1])
        state = _read_env_file(state_dir / "cluster.env")
        pki = state_dir / "pki"
        return cls(
            state_dir=state_dir,
            kubeconfig=kubeconfig,
            server=state["SERVER"],
            ca_file=pki / "ca.crt",
            client_cert_file=pki / "admin.crt",
            client_key_file=pki / "admin.key",
            token=(state_dir / "admin.token").read_text().strip(),
            binaries=binaries,
            # The running cluster's count: `up` on a live cluster changes nothing.
            kwok_nodes=int(state.get("KWOK_NODES", "0")),
        )

    # ------------------------------------------------------------ lifecycle

    def down(self) -> None:
        """Stop the schedulers started here, then kwok, kube-apiserver and etcd; delete the state."""
        for scheduler in self._schedulers:
            scheduler.stop()
        self._schedulers.clear()
        _run_script(["down"], env=_script_env(self.state_dir), timeout=START_TIMEOUT_S)

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only; etcd (and so all objects) stay."""
        _run_script(["apiserver-stop"], env=_script_env(self.state_dir), timeout=START_TIMEOUT_S)

    def start_apiserver(self) -> None:
        """Start kube-apiserver again with the same flags and port; return once /readyz is ok."""
        _run_script(["apiserver-start"], env=_script_env(self.state_dir), timeout=START_TIMEOUT_S)

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver; clients see connection errors, then their watches expire."""
        _run_script(["apiserver-restart"], env=_script_env(self.state_dir), timeout=START_TIMEOUT_S)

    def start_controller_manager(self) -> None:
        """Start kube-controller-manager with the PersistentVolume controller (claim binding) and the
        resourceclaim controller (DRA claims from templates); a no-op when it runs already. It stays up
        until ``down()``."""
        _run_script(["controller-manager-start"], env=_script_env(self.state_dir), timeout=START_TIMEOUT_S)

    def log_tail(self, component: str, lines: int = 40) -> str:
        """The last ``lines`` lines of ``<state>/logs/<component>.log`` (etcd, kube-apiserver, kwok)."""
        return _tail(self.state_dir / "logs" / f"{component}.log", lines)

    # ------------------------------------------------------------ clients

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        token: str | None = None,
        timeout: float = 30.0,
    ) -> HttpResult:
        """One raw HTTPS call with a bearer token (default: the admin's).

        ``body`` is JSON-encoded unless it is bytes.

        HTTP error statuses are returned, not raised; connection errors raise ``OSError``.
        """
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {token or self.token}",
                "Accept": "application/json",
                "Content-Type": content_type,
            },
        )
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(), timeout=timeout) as resp:
                return HttpResult(resp.status, resp.read())
        except urllib.error.HTTPError as err:
            with err:
                return HttpResult(err.code, err.read())

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` from ``kubeconfig``. Close it when done."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    # ------------------------------------------------------------ kube-scheduler

    def start_kube_scheduler(
        self,
        config: Mapping[str, Any] | Path | None = None,
        *,
        name: str = "kube-scheduler",
        timeout: float = 60.0,
    ) -> KubeScheduler:
        """Start the upstream kube-scheduler against this cluster and wait until it is ready.

        ``config`` is a ``KubeSchedulerConfiguration`` (a mapping, or a YAML file).
        ``clientConnection.kubeconfig`` is set to the admin kubeconfig and leader
        election is turned off unless the config says otherwise. The process is
        stopped by ``KubeScheduler.stop()``, by leaving its ``with`` block, or by
        ``down()``.
        """
        if config is None:
            doc: dict[str, Any] = {}
        elif isinstance(config, Path):
            doc = yaml.safe_load(config.read_text()) or {}
        else:
            doc = copy.deepcopy(dict(config))
        doc.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
        doc.setdefault("kind", "KubeSchedulerConfiguration")
        doc.setdefault("clientConnection", {}).setdefault("kubeconfig", str(self.kubeconfig))
        doc.setdefault("leaderElection", {}).setdefault("leaderElect", False)

        run_dir = self.state_dir / "schedulers"
        run_dir.mkdir(parents=True, exist_ok=True)
        index = len(list(run_dir.glob(f"{name}-*.yaml")))
        config_path = run_dir / f"{name}-{index}.yaml"
        config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        log_path = run_dir / f"{name}-{index}.log"
        port = free_port()
        kubeconfig = str(self.kubeconfig)
        args = [
            str(self.binaries.kube_scheduler),
            f"--config={config_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--v=1",
        ]
        log_file = log_path.open("ab")
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        scheduler = KubeScheduler(
            process=process,
            config_path=config_path,
            log_path=log_path,
            port=port,
            _token=self.token,
            _log_file=log_file,
        )
        self._schedulers.append(scheduler)
        try:
            scheduler.wait_ready(timeout=timeout)
        except BaseException:
            scheduler.stop()
            raise
        return scheduler


@dataclass
class KubeScheduler:
    """A running upstream kube-scheduler started by ``ControlPlane.start_kube_scheduler``."""

    process: subprocess.Popen[bytes]
    config_path: Path
    log_path: Path
    port: int
    _token: str = field(repr=False)
    _log_file: IO[bytes] = field(repr=False)

    def __enter__(self) -> KubeScheduler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def healthy(self, path: str = "/readyz") -> bool:
        try:
            with self._get(path, authorized=False) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def metrics(self) -> str:
        """The Prometheus text from /metrics (delegated authn/authz as the cluster admin)."""
        with self._get("/metrics", authorized=True) as resp:
            text: str = resp.read().decode()
            return text

    def _get(self, path: str, *, authorized: bool) -> Any:
        # The serving certificate is self-signed in memory: nothing to verify it against.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        headers = {"Authorization": f"Bearer {self._token}"} if authorized else {}
        req = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", headers=headers)
        return urllib.request.urlopen(req, context=context, timeout=5)

    def wait_ready(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ControlPlaneError(f"kube-scheduler exited with {self.process.returncode}:\n{self.log_tail()}")
            if self.healthy():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"kube-scheduler not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_file.close()

    def log_tail(self, lines: int = 40) -> str:
        self._log_file.flush()
        return _tail(self.log_path, lines)


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def running_control_plane(state_dir: Path, *, kwok_nodes: int = 0) -> Iterator[ControlPlane]:
    """``ControlPlane.up`` ... ``down()`` as a context manager, for scripts and benchmarks."""
    plane = ControlPlane.up(state_dir, kwok_nodes=kwok_nodes)
    try:
        yield plane
    finally:
        plane.down()


def _script_env(state_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYKOORD_CLUSTER_DIR": str(state_dir)}


def _run_script(args: list[str], *, env: Mapping[str, str], timeout: float, script: Path = SCRIPT) -> str:
    """Run control-plane.sh (or another of scripts/); return stdout, or raise with the stderr tail."""
    name = script.name
    try:
        result = subprocess.run(
            [str(script), *args],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        raise ControlPlaneError(
            f"{name} {' '.join(args)} timed out after {timeout:.0f}s:\n{_last_lines(stderr, 60)}"
        ) from None
    if result.returncode != 0:
        raise ControlPlaneError(
            f"{name} {' '.join(args)} failed with exit code {result.returncode}:\n{_last_lines(result.stderr, 60)}"
        )
    return result.stdout


def _read_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _tail(path: Path, lines: int) -> str:
    try:
        return _last_lines(path.read_text(errors="replace"), lines)
    except FileNotFoundError:
        return f"(no {path})"


def _last_lines(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def session_control_plane(
    state_dir: Path,
    *,
    kwok_nodes: int = 0,
    crds: bool = True,
    node: bool = False,
    start_timeout: float = START_TIMEOUT_S,
) -> Iterator[ControlPlane]:
    """A control plane for a pytest session fixture: a start failure fails the test (never skips),
    and the cluster is always torn down."""
    import pytest

    failure = None
    try:
        plane = ControlPlane.up(state_dir, kwok_nodes=kwok_nodes, crds=crds, node=node, start_timeout=start_timeout)
    except ControlPlaneError as exc:
        failure = str(exc)
    if failure is not None:
        pytest.fail(f"local control plane did not come up:\n{failure}", pytrace=False)
    try:
        yield plane
    finally:
        plane.down()
