"""koordlet with ``HugePageReport`` against the real API server: the NodeResourceTopology it publishes has
``hugepages-2Mi`` / ``hugepages-1Gi`` in each NUMA zone, memory less those hugepages, and the CRD takes them;
``koordlet_feature_gate_active`` says so."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "koordlet" / "topology"))
from sysfs_tree import write_sysfs

from tests.integration.koordlet.test_koordlet_topology import GROUP, PLURAL, VERSION, install_crd, wait_until

pytestmark = pytest.mark.integration
GiB = 1 << 30


def test_hugepages_reach_the_node_resource_topology(control_plane: Any, tmp_path: Path) -> None:
    from kubernetes import client

    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    node = f"huge-{uuid.uuid4().hex[:6]}"
    install_crd(api)
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    sysfs = write_sysfs(tmp_path / "sys", sockets=1, nodes_per_socket=1, cores_per_node=2, threads=1)
    (sysfs / "devices/system/node/node0/meminfo").write_text("Node 0 MemTotal: 8388608 kB\n")
    for size, pages in (("2048", 1024), ("1048576", 1)):
        d = sysfs / "devices/system/node/node0/hugepages" / f"hugepages-{size}kB"
        d.mkdir(parents=True)
        (d / "nr_hugepages").write_text(f"{pages}\n")
    cgroot, proc = tmp_path / "cgroup", tmp_path / "proc"
    (cgroot / "cpu" / "kubepods").mkdir(parents=True)
    proc.mkdir()
    (proc / "stat").write_text("cpu  1 0 0 1 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
    (proc / "meminfo").write_text("MemTotal: 8388608 kB\nMemAvailable: 3145728 kB\n")
    agent = subprocess.Popen(
        [
            sys.executable, "-m", "koordlet.app.cli", "--kubeconfig", str(control_plane.kubeconfig),
            "--cgroup-root", str(cgroot), "--cgroup-driver", "cgroupfs", "--proc-root", str(proc),
            "--sysfs-root", str(sysfs), "--kubelet-cpu-manager-state", str(tmp_path / "none"),
            "--node-topology-sync-interval", "0.5", "--metrics-port", "-1",
            "--feature-gates", "HugePageReport=true,RdtResctrl=false,GroupIdentity=false",
        ],
        env={**os.environ, "NODE_NAME": node, "PYTHONFAULTHANDLER": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip

    def zone_resources() -> dict[str, str] | None:
        try:
            obj = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, node)
        except client.ApiException:
            return None
        zones = obj.get("zones") or []
        return {r["name"]: str(r["capacity"]) for r in zones[0]["resources"]} if zones else None

    try:
        got = wait_until(zone_resources, timeout=60, what="the NodeResourceTopology")
        assert got == {
            "cpu": "2",
            "memory": str(8 * GiB - 2 * GiB - GiB),
            "hugepages-2Mi": str(2 * GiB),
            "hugepages-1Gi": str(GiB),
        }
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            output, _ = agent.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
            output, _ = agent.communicate()
        with contextlib.suppress(client.ApiException):
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, node)
        core.delete_node(node)
        api.close()
    assert "feature gates active:" in output and "HugePageReport" in output.split("feature gates active:")[1]
    assert "Traceback" not in output, output
