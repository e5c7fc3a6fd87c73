"""The node itself: kubelet registers it and keeps it Ready, a pod runs in a real container, the API server
reaches kubelet (logs), and kubelet's cgroup layout is the one koordlet's CgroupLayout computes."""

from __future__ import annotations

import uuid

from realnode import CGROUP_MOUNT, RealNode, cgroup_of, pod_manifest, wait_for

from koordlet.statesinformer.pods import parse_pod
from koordlet.system.layout import CgroupDriver, CgroupLayout


def test_node_registers_and_is_ready(real_node: RealNode) -> None:
    node = real_node.get("node", real_node.name, namespace="")
    assert node is not None
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True", node["status"]["conditions"]
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == real_node.ip
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert int(node["status"]["capacity"]["cpu"]) >= 1
    # containerd serves NRI on the node's own socket (for koordlet's runtime hooks).
    assert (real_node.containerd_sock.parent / "nri.sock").is_socket()


def test_a_pod_runs_and_its_logs_come_through_the_api_server(real_node: RealNode) -> None:
    name = f"hello-{uuid.uuid4().hex[:6]}"
    real_node.apply(
        pod_manifest(
            name,
            real_node.images["workload"],
            ["sh", "-c", "echo hello from $(hostname); exec sleep 3600"],
            node=real_node.name,
        )
    )
    try:
        pod = real_node.wait_pod_running(name)
        logs = wait_for(
            lambda: "hello from" in (out := real_node.kubectl("logs", name, check=False).stdout) and out,
            timeout=30,
            what="the pod's log line",
        )
        assert f"hello from {name}" in logs
        # The container is a real process of this machine, in the cgroup kubelet made for its pod.
        container_id = pod["status"]["containerStatuses"][0]["containerID"]
        assert container_id.startswith("containerd://")
        pid = real_node.container_pid(container_id)
        path = cgroup_of(pid)
        assert path.startswith(f"{real_node.cgroup_root}/kubepods/besteffort/pod{pod['metadata']['uid']}/")
        assert path.endswith(container_id.split("://", 1)[1])
    finally:
        real_node.delete("pod", name, wait=False)


def test_kubelet_layout_is_koordlets_layout(real_node: RealNode) -> None:
    """Pods of the three Kubernetes QoS classes: koordlet's pod and container dirs (from the pod's API
    object) are the cgroups kubelet and containerd put the real processes in."""
    layout = CgroupLayout.for_driver(CgroupDriver.CGROUPFS, f"{real_node.cgroup_root}/kubepods")
    image = real_node.images["workload"]
    cmd = ["sleep", "3600"]
    suffix = uuid.uuid4().hex[:6]
    pods = {
        f"guaranteed-{suffix}": {
            "requests": {"cpu": "100m", "memory": "32Mi"},
            "limits": {"cpu": "100m", "memory": "32Mi"},
        },
        f"burstable-{suffix}": {"requests": {"cpu": "50m", "memory": "16Mi"}},
        f"besteffort-{suffix}": {},
    }
    real_node.apply(*(pod_manifest(name, image, cmd, node=real_node.name, **res) for name, res in pods.items()))
    try:
        for name in pods:
            raw = real_node.wait_pod_running(name)
            meta = parse_pod(raw, layout)
            container = meta.containers[0]
            assert container.container_id is not None
            pid = real_node.container_pid(raw["status"]["containerStatuses"][0]["containerID"])
            for controller in ("cpu", "cpuacct", "memory", "cpuset"):
                real = cgroup_of(pid, controller).strip("/")
                assert real == meta.container_dir(layout, container), (name, controller)
                assert (CGROUP_MOUNT / controller / meta.cgroup_dir).is_dir()
    finally:
        for name in pods:
            real_node.delete("pod", name, wait=False)
