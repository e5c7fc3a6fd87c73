"""koordlet against the real API server: it reports a NodeMetric for pods that exist in the API.

The pods' cgroups live in a temp tree (cgroupfs layout, v1 files) named by the UIDs the API server gave
them, and a thread advances their CPU counters while the real ``koordlet`` binary runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.slo import NodeMetric

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
GROUP, VERSION = "slo.koordinator.sh", "v1alpha1"


def wait_until(check: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def install_crds(api_client: Any) -> None:
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api_client)
    for path in sorted((REPO / "deploy" / "crds").glob("slo.koordinator.sh_*.yaml")):
        body = yaml.safe_load(path.read_text())
        try:
            ext.create_custom_resource_definition(body)
        except client.ApiException as err:
            if err.status != 409:
                raise

        def established(name: str = body["metadata"]["name"]) -> bool:
            crd = ext.read_custom_resource_definition(name)
            return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])

        wait_until(established, timeout=30, what=f"CRD {path.name} established")


def ensure_priority_class(api_client: Any, name: str, value: int) -> None:
    from kubernetes import client

    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    try:
        client.SchedulingV1Api(api_client).create_priority_class(body)
    except client.ApiException as err:
        if err.status != 409:
            raise


def make_pod(
    name: str, node: str, priority_class: str, *, labels: dict[str, str], requests: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "nodeName": node,
            "priorityClassName": priority_class,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": requests} if requests else {},
                }
            ],
        },
    }


def write_counters(root: Path, rel: str, cpu_ns: int, mem: int) -> None:
    for sub in ("cpu", "cpuacct", "memory"):
        (root / sub / rel).mkdir(parents=True, exist_ok=True)
    (root / "cpuacct" / rel / "cpuacct.usage").write_text(str(cpu_ns))
    (root / "cpu" / rel / "cpu.stat").write_text("nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
    (root / "memory" / rel / "memory.stat").write_text(
        f"total_active_anon {mem}\ntotal_inactive_anon 0\ntotal_unevictable 0\n"
    )


def test_koordlet_reports_node_metric(control_plane: Any, tmp_path: Path) -> None:
    from kubernetes import client

    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    node = f"koordlet-{uuid.uuid4().hex[:6]}"
    install_crds(api)
    ensure_priority_class(api, "koord-prod", 9000)
    ensure_priority_class(api, "koord-batch", 5000)
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    web = core.create_namespaced_pod(
        "default", make_pod(f"{node}-web", node, "koord-prod", labels={}, requests={"cpu": "500m"})
    )
    batch = core.create_namespaced_pod(
        "default",
        make_pod(f"{node}-batch", node, "koord-batch", labels={"koordinator.sh/qosClass": "BE"}, requests={}),
    )
    # their cgroups, named by the UIDs the API server assigned (cgroupfs driver, v1 files)
    cgroot, proc = tmp_path / "cgroup", tmp_path / "proc"
    dirs = {
        web.metadata.uid: (f"kubepods/burstable/pod{web.metadata.uid}", 0.5),
        batch.metadata.uid: (f"kubepods/besteffort/pod{batch.metadata.uid}", 0.25),
    }
    (cgroot / "cpu" / "kubepods").mkdir(parents=True)
    proc.mkdir()
    stop = threading.Event()

    def advance() -> None:
        start = time.monotonic()
        while not stop.is_set():
            elapsed = time.monotonic() - start
            for rel, cores in dirs.values():
                write_counters(cgroot, rel, int(elapsed * cores * 1e9), 100 << 20)
            ticks = int(elapsed * 100)
            (proc / "stat").write_text(f"cpu  {ticks} 0 0 {ticks} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
            (proc / "meminfo").write_text("MemTotal: 4194304 kB\nMemAvailable: 3145728 kB\n")
            stop.wait(0.2)

    writer = threading.Thread(target=advance, daemon=True)
    writer.start()
    wait_until((proc / "stat").exists, timeout=5, what="fake /proc")
    env = {**os.environ, "NODE_NAME": node}
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koordlet.app.cli",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--cgroup-root",
            str(cgroot),
            "--cgroup-driver",
            "cgroupfs",
            "--proc-root",
            str(proc),
            "--metrics-port",
            "-1",
            "--report-interval",
            "1",
            "-v",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def reported() -> dict[str, Any] | None:
            try:
                obj = custom.get_cluster_custom_object(GROUP, VERSION, "nodemetrics", node)
            except client.ApiException:
                return None
            metrics = (obj.get("status") or {}).get("podsMetric") or []
            return obj if len(metrics) == 2 else None

        obj = wait_until(reported, timeout=60, what="NodeMetric status with both pods")
    finally:
        stop.set()
        agent.send_signal(signal.SIGTERM)
        try:
            output, _ = agent.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
            output, _ = agent.communicate()
        core.delete_namespaced_pod(f"{node}-web", "default", grace_period_seconds=0)
        core.delete_namespaced_pod(f"{node}-batch", "default", grace_period_seconds=0)
        core.delete_node(node)
        api.close()
    assert agent.returncode == 0, output
    nm = NodeMetric.model_validate(obj)
    assert nm.status is not None and nm.status.pods_metric is not None
    got = sorted((p.name, p.priority, p.qos) for p in nm.status.pods_metric)
    assert got == [(f"{node}-batch", "koord-batch", "BE"), (f"{node}-web", "koord-prod", "LS")], json.dumps(obj)
    by_name = {p.name: p for p in nm.status.pods_metric}
    web_usage = by_name[f"{node}-web"].pod_usage
    assert web_usage is not None and web_usage.cpu_milli == pytest.approx(500, rel=0.2)
    assert web_usage.memory_bytes == 100 << 20
    assert nm.status.node_metric is not None and nm.status.node_metric.node_usage is not None
    assert nm.status.node_metric.node_usage.memory_bytes == 1 << 30
    assert nm.status.update_time is not None
