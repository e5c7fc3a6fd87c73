"""BEMemoryEvict against the real API server, with the real ``koordlet`` binary.

Memory pressure comes from a test ``/proc`` root (meminfo); pod memory from a temp cgroup tree named by the
UIDs the API server gave. The node is a kwok-managed fake node, so bound pods run and evicted pods go away.
"""

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
from test_koordlet_nodemetric import GROUP, VERSION, ensure_priority_class, install_crds, wait_until

pytestmark = pytest.mark.integration
MiB = 1 << 20


def be_pod(name: str, priority_class: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"koordinator.sh/qosClass": "BE", **(labels or {})},
        },
        "spec": {
            "priorityClassName": priority_class,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
        },
    }


def write_pod_cgroup(root: Path, rel: str, memory: int) -> None:
    for sub in ("cpu", "cpuacct", "memory"):
        (root / sub / rel).mkdir(parents=True, exist_ok=True)
    (root / "cpuacct" / rel / "cpuacct.usage").write_text("0")
    (root / "cpu" / rel / "cpu.stat").write_text("nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
    (root / "memory" / rel / "memory.stat").write_text(
        f"total_active_anon {memory}\ntotal_inactive_anon 0\ntotal_unevictable 0\n"
    )


def write_meminfo(proc: Path, used_percent: int) -> None:
    total_kb = 4 * 1024 * 1024
    available_kb = total_kb * (100 - used_percent) // 100
    (proc / "meminfo").write_text(f"MemTotal: {total_kb} kB\nMemAvailable: {available_kb} kB\n")
    (proc / "stat").write_text("cpu  100 0 0 100 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")


def test_be_memory_evict_through_eviction_api(control_plane: Any, tmp_path: Path) -> None:
    from kubernetes import client

    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    node = f"qos-{uuid.uuid4().hex[:6]}"
    install_crds(api)
    for name, value in (("qos-it-1000", 1000), ("qos-it-2000", 2000), ("koord-batch", 5000), ("koord-prod", 9000)):
        ensure_priority_class(api, name, value)
    core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
        }
    )
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "nodeslos",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NodeSLO",
            "metadata": {"name": node},
            "spec": {"resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 70}},
        },
    )
    protected_label = {"app": f"{node}-protected"}
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"{node}-pdb", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": protected_label}},
    }
    assert control_plane.request("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb).status == 201
    specs = {
        # lowest priority first: the protected one is tried first and refused by its PDB
        f"{node}-be-pdb": (be_pod(f"{node}-be-pdb", "qos-it-1000", protected_label), 300 * MiB),
        f"{node}-be-low": (be_pod(f"{node}-be-low", "qos-it-2000"), 300 * MiB),
        f"{node}-be-high": (be_pod(f"{node}-be-high", "koord-batch"), 400 * MiB),
        f"{node}-ls": (
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{node}-ls", "namespace": "default"},
                "spec": {
                    "priorityClassName": "koord-prod",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": "100m"}},
                        }
                    ],
                },
            },
            1024 * MiB,
        ),
    }
    cgroot, proc = tmp_path / "cgroup", tmp_path / "proc"
    proc.mkdir()
    (cgroot / "cpu" / "kubepods").mkdir(parents=True)
    write_meminfo(proc, 75)  # 75 % >= 70: release 4 GiB x (75 - 68) % = 287 MiB
    uids: dict[str, str] = {}
    for name, (body, memory) in specs.items():
        created = core.create_namespaced_pod("default", body)
        uids[name] = created.metadata.uid
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        result = control_plane.request("POST", f"/api/v1/namespaces/default/pods/{name}/binding", binding)
        assert result.status == 201, result
        qos_dir = "besteffort" if "-be-" in name else "burstable"
        write_pod_cgroup(cgroot, f"kubepods/{qos_dir}/pod{created.metadata.uid}", memory)

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
            "--sysfs-root",
            str(tmp_path / "sys"),
            "--metrics-port",
            "-1",
            "--feature-gates",
            "BEMemoryEvict=true",
            "-v",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def exists(name: str) -> bool:
        try:
            pod = core.read_namespaced_pod(name, "default")
        except client.ApiException as err:
            if err.status == 404:
                return False
            raise
        return pod.metadata.uid == uids[name] and pod.metadata.deletion_timestamp is None

    def events(name: str) -> list[Any]:
        listed = core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}")
        return [e for e in listed.items if e.reason in ("evictPodSuccess", "evictPodFail")]

    try:
        wait_until(lambda: not exists(f"{node}-be-low"), timeout=60, what="the lowest-priority evictable BE pod gone")
        write_meminfo(proc, 50)  # pressure relieved: no further rounds
        success = wait_until(lambda: events(f"{node}-be-low"), timeout=20, what="evictPodSuccess event")
        refused = wait_until(lambda: events(f"{node}-be-pdb"), timeout=20, what="evictPodFail event (PDB)")
        survivors = {name: exists(name) for name in specs}
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            output, _ = agent.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
            output, _ = agent.communicate()
        print(output[-6000:])
        for name in specs:
            with contextlib.suppress(client.ApiException):
                core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        control_plane.request("DELETE", f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{node}-pdb")
        custom.delete_cluster_custom_object(GROUP, VERSION, "nodeslos", node)
        core.delete_node(node)
        api.close()
    assert success[0].reason == "evictPodSuccess"
    assert "BEMemoryEvict" in success[0].message, success[0].message
    assert refused[0].reason == "evictPodFail" and "429" in refused[0].message
    assert survivors == {
        f"{node}-be-pdb": True,  # its PDB refused (429): passed over for the next victim
        f"{node}-be-low": False,
        f"{node}-be-high": True,  # be-low covered the release
        f"{node}-ls": True,  # never a BE victim
    }
    assert agent.returncode == 0, output


def test_memory_allocatable_evict_against_node_batch_allocatable(control_plane: Any, tmp_path: Path) -> None:
    """MemoryAllocatableEvict reads ``kubernetes.io/batch-memory`` from the node's status: 1600 MiB requested
    of 1 GiB allocatable is 156 % > 110 %, so 1600 - 1024 = 576 MiB are released. The largest request goes
    first; its PDB refuses, so the plan moves on to the other pod."""
    from kubernetes import client

    api = control_plane.api_client()
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    node = f"alloc-{uuid.uuid4().hex[:6]}"
    install_crds(api)
    ensure_priority_class(api, "koord-batch", 5000)
    resources = {"cpu": "2", "memory": "4Gi", "pods": "110", "kubernetes.io/batch-memory": "1Gi"}
    core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"capacity": resources, "allocatable": resources},
        }
    )
    threshold = {
        "enable": True,
        "memoryAllocatableEvictThresholdPercent": 110,
        "memoryAllocatableEvictLowerPercent": 100,
        "allocatableEvictPriorityThreshold": 5999,
    }
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "nodeslos",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeSLO", "metadata": {"name": node},
         "spec": {"resourceUsedThresholdWithBE": threshold}},
    )  # fmt: skip
    protected = {"app": f"{node}-protected"}
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"{node}-pdb", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": protected}},
    }
    assert control_plane.request("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb).status == 201
    opted = {"koordinator.sh/eviction-enabled": "true"}
    specs = {f"{node}-big": ({**opted, **protected}, "900Mi"), f"{node}-small": (opted, "700Mi")}
    cgroot, proc = tmp_path / "cgroup", tmp_path / "proc"
    proc.mkdir()
    (cgroot / "cpu" / "kubepods").mkdir(parents=True)
    write_meminfo(proc, 30)  # no node memory pressure: only the allocatable rule acts
    uids: dict[str, str] = {}
    for name, (labels, request) in specs.items():
        body = be_pod(name, "koord-batch", labels)
        body["spec"]["containers"][0]["resources"] = {"requests": {"kubernetes.io/batch-memory": request}}
        created = core.create_namespaced_pod("default", body)
        uids[name] = created.metadata.uid
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        assert control_plane.request("POST", f"/api/v1/namespaces/default/pods/{name}/binding", binding).status == 201
        write_pod_cgroup(cgroot, f"kubepods/besteffort/pod{created.metadata.uid}", 100 * MiB)
    agent = subprocess.Popen(
        [
            sys.executable, "-m", "koordlet.app.cli", "-kubeconfig", str(control_plane.kubeconfig),
            "-cgroup-root-dir", str(cgroot), "--cgroup-driver", "cgroupfs", "-proc-root-dir", str(proc),
            "--sysfs-root", str(tmp_path / "sys"), "--metrics-port", "-1",
            "-feature-gates=MemoryAllocatableEvict=true", "--v=4",
        ],
        env={**os.environ, "NODE_NAME": node},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip

    def exists(name: str) -> bool:
        try:
            pod = core.read_namespaced_pod(name, "default")
        except client.ApiException as err:
            if err.status == 404:
                return False
            raise
        return pod.metadata.uid == uids[name] and pod.metadata.deletion_timestamp is None

    def reasons(name: str) -> list[str]:
        listed = core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}")
        return [e.reason for e in listed.items if e.reason in ("evictPodSuccess", "evictPodFail")]

    try:
        wait_until(lambda: not exists(f"{node}-small"), timeout=60, what="the unprotected batch pod evicted")
        refused = wait_until(lambda: reasons(f"{node}-big"), timeout=20, what="evictPodFail event (PDB)")
        big_survives = exists(f"{node}-big")
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            output, _ = agent.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
            output, _ = agent.communicate()
        print(output[-6000:])
        for name in specs:
            with contextlib.suppress(client.ApiException):
                core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        control_plane.request("DELETE", f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{node}-pdb")
        custom.delete_cluster_custom_object(GROUP, VERSION, "nodeslos", node)
        core.delete_node(node)
        api.close()
    assert refused[0] == "evictPodFail" and big_survives
    assert agent.returncode == 0, output
