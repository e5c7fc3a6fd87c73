"""koordlet with ``RDMADevices`` against the real API server: the RDMA NIC of a fake sysfs (with two SR-IOV
VFs) reaches the node's Device object, which the CRD takes, and the scheduler's deviceresource rules give
the node ``koordinator.sh/rdma``."""

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
import yaml

from apis.scheduling.device import parse_device
from koord_scheduler.controllers.deviceresource import RDMA, device_resources
from tests.integration.koordlet.test_koordlet_topology import wait_until
from tests.unit.koordlet.test_koordlet_rdma import FakeSysfs

pytestmark = pytest.mark.integration
CRD = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "scheduling.koordinator.sh_devices.yaml"
GROUP, VERSION, PLURAL = "scheduling.koordinator.sh", "v1alpha1", "devices"


def install_device_crd(api_client: Any) -> None:
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api_client)
    body = next(d for d in yaml.safe_load_all(CRD.read_text()) if d)
    try:
        ext.create_custom_resource_definition(body)
    except client.ApiException as err:
        if err.status != 409:
            raise

    def established() -> bool:
        crd = ext.read_custom_resource_definition(body["metadata"]["name"])
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])

    wait_until(established, timeout=30, what="Device CRD established")


def test_rdma_nic_reaches_the_device_object(control_plane: Any, tmp_path: Path) -> None:
    from kubernetes import client

    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    node = f"rdma-{uuid.uuid4().hex[:6]}"
    install_device_crd(api)
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    sysfs = FakeSysfs(tmp_path / "sys")
    sysfs.device("0000:18:00.0", numa=0, ibdev="mlx5_0", vfs=("0000:18:00.2", "0000:18:00.3"))
    sysfs.device("0000:18:00.2", ibdev="mlx5_2", physfn="0000:18:00.0")
    sysfs.device("0000:18:00.3", ibdev="mlx5_3", physfn="0000:18:00.0")
    cgroot, proc = tmp_path / "cgroup", tmp_path / "proc"
    (cgroot / "cpu" / "kubepods").mkdir(parents=True)
    proc.mkdir()
    (proc / "stat").write_text("cpu  1 0 0 1 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
    (proc / "meminfo").write_text("MemTotal: 8388608 kB\nMemAvailable: 3145728 kB\n")
    agent = subprocess.Popen(
        [
            sys.executable, "-m", "koordlet.app.cli", "--kubeconfig", str(control_plane.kubeconfig),
            "--cgroup-root", str(cgroot), "--cgroup-driver", "cgroupfs", "--proc-root", str(proc),
            "--sysfs-root", str(sysfs.root), "--kubelet-cpu-manager-state", str(tmp_path / "none"),
            "--report-interval", "1", "--metrics-port", "-1",
            "--feature-gates", "RDMADevices=true,RdtResctrl=false,GroupIdentity=false,NodeTopologyReport=false",
        ],
        env={**os.environ, "NODE_NAME": node, "PYTHONFAULTHANDLER": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip

    def device() -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, node)
        except client.ApiException:
            return None
        return obj

    try:
        got = wait_until(device, timeout=60, what="the Device object")
        (nic,) = got["spec"]["devices"]
        assert (nic["type"], nic["minor"], nic["id"], nic["health"]) == ("rdma", 0, "0000:18:00.0", True)
        assert nic["topology"] == {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:17", "busID": "0000:18:00.0"}
        assert nic["vfGroups"] == [
            {"vfs": [{"minor": -1, "busID": "0000:18:00.2"}, {"minor": -1, "busID": "0000:18:00.3"}]}
        ]
        assert device_resources(parse_device(got)).resources[RDMA] == 100
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
    assert "RDMADevices" in output.split("feature gates active:")[1], output
    assert "Traceback" not in output, output
