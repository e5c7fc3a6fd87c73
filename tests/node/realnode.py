"""A real node for tests: the cluster of ``control-plane.sh up --node`` (kubelet + containerd + runc on this
machine) and what tests need to look at it: kubectl, crictl, the node's cgroups, its images.

Everything here reads the node's own state (``<cluster>/node/node.env``); nothing is assumed about paths that
kubelet or containerd choose: a container's cgroup is found from the pid crictl reports, and compared with
what koordlet computes.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane

REPO = Path(__file__).resolve().parents[2]
NODE_SCRIPT = REPO / "scripts" / "node.sh"
CGROUP_MOUNT = Path("/sys/fs/cgroup")


def wait_for(check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy (returned) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def read_env(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


@dataclass(frozen=True)
class RealNode:
    """The node of ``plane``: names from node.env, binaries from ``node.sh build``."""

    plane: ControlPlane
    name: str
    ip: str
    cgroup_root: str
    containerd_sock: Path
    run_dir: Path
    """The node's run directory (containerd's sockets, the NRI socket ``nri.sock``)."""
    kubelet_root: Path
    crictl_path: Path
    images: dict[str, str]

    @classmethod
    def of(cls, plane: ControlPlane) -> RealNode:
        env = read_env(plane.state_dir / "node" / "node.env")
        built = subprocess.run(
            [str(NODE_SCRIPT), "build"], capture_output=True, text=True, check=True, timeout=3600, env=_env(plane)
        ).stdout
        paths = dict(line.split("=", 1) for line in built.splitlines() if "=" in line)
        imported = subprocess.run(
            [str(NODE_SCRIPT), "images", "workload", "pykoord"],
            capture_output=True,
            text=True,
            check=False,
            timeout=3600,
            env=_env(plane),
        )
        assert imported.returncode == 0, f"node.sh images failed:\n{imported.stderr[-3000:]}"
        images = dict(line.split("=", 1) for line in imported.stdout.splitlines() if "=" in line)
        return cls(
            plane=plane,
            name=env["NODE_NAME"],
            ip=env["NODE_IP"],
            cgroup_root=env["NODE_CGROUP_ROOT"],
            containerd_sock=Path(env["NODE_RUN_DIR"]) / "containerd.sock",
            run_dir=Path(env["NODE_RUN_DIR"]),
            kubelet_root=plane.state_dir / "node" / "kubelet",
            crictl_path=Path(paths["CRICTL"]),
            images=images,
        )

    # ------------------------------------------------------------ tools

    def kubectl(
        self, *args: str, stdin: str | None = None, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.plane.binaries.kubectl), f"--kubeconfig={self.plane.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check:
            assert result.returncode == 0, f"kubectl {' '.join(args)}:\n{result.stderr[-2000:]}"
        return result

    def apply(self, *docs: dict[str, Any]) -> None:
        self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            stdin="\n---\n".join(yaml.safe_dump(d) for d in docs),
        )

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        result = self.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
        if result.returncode != 0:
            return None
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    def crictl(self, *args: str) -> str:
        result = subprocess.run(
            [str(self.crictl_path), "--runtime-endpoint", f"unix://{self.containerd_sock}", "--timeout", "30s", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"crictl {' '.join(args)}:\n{result.stderr[-2000:]}"
        return result.stdout

    # ------------------------------------------------------------ pods

    def wait_pod_running(self, name: str, namespace: str = "default", *, timeout: float = 180) -> dict[str, Any]:
        """The pod once every container runs (and is ready, when it has a readiness probe)."""

        def running() -> dict[str, Any] | None:
            pod = self.get("pod", name, namespace)
            if pod is None:
                return None
            statuses = pod.get("status", {}).get("containerStatuses") or []
            if pod["status"].get("phase") == "Running" and statuses and all(s.get("ready") for s in statuses):
                return pod
            for status in statuses:
                waiting = (status.get("state") or {}).get("waiting") or {}
                assert waiting.get("reason") not in (
                    "ErrImageNeverPull",
                    "CreateContainerError",
                    "CreateContainerConfigError",
                    "RunContainerError",
                ), f"{namespace}/{name}: {waiting}"
            return None

        try:
            pod: dict[str, Any] = wait_for(running, timeout=timeout, what=f"pod {namespace}/{name} Running")
        except AssertionError:
            described = self.kubectl("describe", "pod", name, "-n", namespace, check=False).stdout
            raise AssertionError(
                f"pod {namespace}/{name} not running after {timeout:.0f}s:\n{described[-3000:]}"
            ) from None
        return pod

    def container_pid(self, container_id: str) -> int:
        """The container's init pid, from containerd (``crictl inspect``)."""
        info = json.loads(self.crictl("inspect", container_id.split("://", 1)[-1]))
        pid: int = info["info"]["pid"]
        return pid

    def delete(self, kind: str, name: str, namespace: str = "default", *, wait: bool = True) -> None:
        self.kubectl(
            "delete",
            kind,
            name,
            "-n",
            namespace,
            "--ignore-not-found",
            f"--wait={str(wait).lower()}",
            "--grace-period=1",
            timeout=180,
        )


def cgroup_of(pid: int, controller: str = "cpu") -> str:
    """The v1 cgroup path of ``pid`` in ``controller``'s hierarchy ("/pykoord-.../kubepods/...")."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise AssertionError(f"pid {pid} has no {controller} cgroup: {Path(f'/proc/{pid}/cgroup').read_text()}")


def cgroup_file(rel_dir: str, name: str, controller: str | None = None) -> Path:
    """``/sys/fs/cgroup/<controller>/<rel_dir>/<name>`` (controller from the file name by default)."""
    controller = controller or {"cpuacct": "cpuacct", "cpuset": "cpuset", "memory": "memory"}.get(
        name.split(".", 1)[0], "cpu"
    )
    return CGROUP_MOUNT / controller / rel_dir.strip("/") / name


def read_cgroup(rel_dir: str, name: str) -> str:
    return cgroup_file(rel_dir, name).read_text().strip()


def pod_manifest(
    name: str,
    image: str,
    command: list[str],
    *,
    node: str,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    scheduler: str | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A one-container pod; ``node`` pins it (nodeName) unless a scheduler is named."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": image, "imagePullPolicy": "Never", "command": command, "resources": resources}
        ],
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    else:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def sample_cpu_cores(rel_dir: str, seconds: float) -> float:
    """Cores a cgroup used over ``seconds`` (cpuacct.usage difference / wall time)."""
    path = cgroup_file(rel_dir, "cpuacct.usage")
    start_ns, start = int(path.read_text()), time.monotonic()
    time.sleep(seconds)
    return (int(path.read_text()) - start_ns) / 1e9 / (time.monotonic() - start)


def _env(plane: ControlPlane) -> dict[str, str]:
    import os

    return {**os.environ, "PYKOORD_CLUSTER_DIR": str(plane.state_dir)}


def iter_cgroup_dirs(rel_dir: str, controller: str = "cpu") -> Iterator[str]:
    base = CGROUP_MOUNT / controller
    for path in sorted((base / rel_dir.strip("/")).rglob("*")):
        if path.is_dir():
            yield "/" + str(path.relative_to(base))


CHART = REPO / "charts" / "pykoord"
NAMESPACE = "koordinator-system"
RELEASE = "pykoord"
# koordlet and koord-scheduler pods come up on a loaded 2-core machine: image unpack, Python start, sync.
INSTALL_TIMEOUT = "10m"


@dataclass(frozen=True)
class PykoordRelease:
    """The chart installed on the real node."""

    node: RealNode
    helm: str

    @classmethod
    def install(cls, node: RealNode, *, reuse: bool = False) -> PykoordRelease:
        """``helm install``; with ``reuse``, an existing release of the same image is taken as it is."""
        from tests.helmchart import helm_path

        helm = helm_path()
        if reuse:
            values = subprocess.run(
                [
                    helm,
                    "get",
                    "values",
                    RELEASE,
                    "-n",
                    "default",
                    "-o",
                    "json",
                    f"--kubeconfig={node.plane.kubeconfig}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if (
                values.returncode == 0
                and json.loads(values.stdout).get("image", {}).get("tag") == (node.images["pykoord"].rsplit(":", 1)[1])
            ):
                return cls(node, helm)
            subprocess.run(
                [helm, "uninstall", RELEASE, "-n", "default", "--wait", f"--kubeconfig={node.plane.kubeconfig}"],
                capture_output=True,
                check=False,
            )
        tag = node.images["pykoord"].rsplit(":", 1)[1]
        # The release record in `default`, as docs/install.md installs it; the chart makes its own namespace.
        args = [
            helm,
            "install",
            RELEASE,
            str(CHART),
            "--namespace",
            "default",
            "--set",
            f"image.tag={tag}",
            "--set",
            f"koordlet.cgroupKubepodsDir={node.cgroup_root.strip('/')}/kubepods",
            "--set",
            f"koordlet.hostDirs.kubeletLibDir={node.kubelet_root}",
            "--set",
            f"koordlet.hostDirs.varRunDir={node.run_dir}",
            "--set",
            "koordlet.nri.socketPath=nri.sock",
            "--wait",
            "--timeout",
            INSTALL_TIMEOUT,
            f"--kubeconfig={node.plane.kubeconfig}",
        ]
        result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=900)
        release = cls(node, helm)
        if result.returncode != 0:
            raise AssertionError(f"helm install failed:\n{result.stderr[-2000:]}\n{release.describe()}")
        release.ignore_node_cpu_usage()
        return release

    def ignore_node_cpu_usage(self) -> None:
        """No CPU threshold in LoadAwareScheduling, set as a user would (edit the profile, restart).

        The node is this whole machine, whose CPU is shared with whatever else runs on it (builds, other test
        runs, often all of it): the default 65 % would make the tests' scheduling depend on that, not on
        pykoord. The memory threshold stays.
        """
        configmap = self.node.get("configmap", "koord-scheduler-config", NAMESPACE)
        assert configmap is not None
        config = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
        for profile in config["profiles"]:
            for plugin in profile.get("pluginConfig", []):
                if plugin["name"] == "LoadAwareScheduling":
                    del plugin["args"]["usageThresholds"]["cpu"]
        patch = {"data": {"koord-scheduler-config": yaml.safe_dump(config, sort_keys=False)}}
        self.node.kubectl(
            "patch", "configmap", "koord-scheduler-config", "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch)
        )
        self.node.kubectl("rollout", "restart", "deployment/koord-scheduler", "-n", NAMESPACE)
        rolled = self.node.kubectl(
            "rollout",
            "status",
            "deployment/koord-scheduler",
            "-n",
            NAMESPACE,
            "--timeout=600s",
            timeout=660,
            check=False,
        )
        assert rolled.returncode == 0, f"koord-scheduler did not roll out:\n{rolled.stderr}\n{self.describe()}"

    def koordlet_pod(self) -> dict[str, Any]:
        """The koordlet DaemonSet's pod (the one not being deleted)."""
        pods = [p for p in self.pods("koordlet") if "deletionTimestamp" not in p["metadata"]]
        assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
        return pods[0]

    def nri_registered(self) -> bool:
        """koordlet is ready and its NRI plugin has been synchronized by containerd (its log says so)."""
        pods = [p for p in self.pods("koordlet") if "deletionTimestamp" not in p["metadata"]]
        if len(pods) != 1 or not all(s.get("ready") for s in pods[0]["status"].get("containerStatuses") or []):
            return False
        return "NRI: synchronized with the runtime" in self.logs(pods[0]["metadata"]["name"])

    def set_nri(self, enabled: bool) -> None:
        """Switch koordlet's NRI hook (``--enable-nri-runtime-hook``); see :meth:`set_koordlet_flag`."""
        self.set_koordlet_flag("enable-nri-runtime-hook", str(enabled).lower(), registered=enabled)

    def set_koordlet_flag(self, name: str, value: str, *, registered: bool) -> None:
        """Set koordlet's ``--name=value`` by patching the DaemonSet, as an admin would with ``kubectl patch``
        (``helm upgrade`` would also put back the ConfigMaps the tests edit); returns once the replaced
        koordlet pod is ready and, with ``registered``, registered with NRI. Nothing happens if the flag
        already is so."""
        flag = f"--{name}={value}"
        daemonset = self.node.get("daemonset", "koordlet", NAMESPACE)
        assert daemonset is not None
        args: list[str] = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
        if flag in args:
            if registered:
                wait_for(self.nri_registered, timeout=300, what="koordlet registered with NRI")
            return
        old = self.koordlet_pod()["metadata"]["uid"]
        new_args = [a for a in args if not a.startswith(f"--{name}=")] + [flag]
        patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": new_args}]
        self.node.kubectl("patch", "daemonset", "koordlet", "-n", NAMESPACE, "--type=json", "-p", json.dumps(patch))

        def replaced() -> bool:
            pods = [p for p in self.pods("koordlet") if "deletionTimestamp" not in p["metadata"]]
            return (
                len(pods) == 1
                and pods[0]["metadata"]["uid"] != old
                and all(s.get("ready") for s in pods[0]["status"].get("containerStatuses") or [])
            )

        wait_for(replaced, timeout=600, what=f"koordlet restarted with {flag}")
        if registered:
            wait_for(self.nri_registered, timeout=120, what="koordlet registered with NRI")

    def koordlet_metrics(self) -> str:
        """koordlet's /metrics text, through the API server's pod proxy."""
        pod = self.koordlet_pod()["metadata"]["name"]
        return self.node.kubectl(
            "get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}:9316/proxy/metrics", check=False
        ).stdout

    def uninstall(self) -> None:
        subprocess.run(
            [
                self.helm,
                "uninstall",
                RELEASE,
                "--namespace",
                "default",
                "--wait",
                "--timeout",
                "2m",
                f"--kubeconfig={self.node.plane.kubeconfig}",
            ],
            capture_output=True,
            check=False,
            timeout=300,
        )

    def pods(self, app: str) -> list[dict[str, Any]]:
        out = self.node.kubectl("get", "pods", "-n", NAMESPACE, "-l", f"koord-app={app}", "-o", "json").stdout
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items

    def logs(self, pod: str) -> str:
        return self.node.kubectl("logs", "-n", NAMESPACE, pod, check=False).stdout

    def describe(self) -> str:
        pods = self.node.kubectl("describe", "pods", "-n", NAMESPACE, check=False).stdout
        return pods[-6000:]
