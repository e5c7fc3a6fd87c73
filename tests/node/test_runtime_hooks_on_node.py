"""koordlet's runtime hooks through containerd's NRI on the real node: a container's cgroup has koordlet's
values before its first instruction, and a koordlet that dies while containers are being created neither
blocks them nor leaves them wrong.

Each workload container prints its own cgroup files as its very first action (before anything could
have reconciled them). With the NRI hook on, those are koordlet's values (BatchResource for a BE pod,
CPUSetAllocator for an LSR pod); with ``koordlet.nri.enabled=false`` the same pods print the kubelet's, so
the test can fail.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from colocation import FAST_METRICS, slo_config
from realnode import PykoordRelease, RealNode, cgroup_of, read_cgroup, wait_for

from apis.colocation.profile import ANNOTATION_EXTENDED_RESOURCE_SPEC
from apis.extension import LABEL_POD_QOS
from apis.extension.numa import ANNOTATION_RESOURCE_STATUS
from apis.slo.quantity import int_value
from koordlet.system.resources import parse_cpuset

BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
# Reclaim above 100 % (accepted, as Koordinator accepts it) gives batch-cpu even while other work keeps this
# shared machine's CPUs busy: these tests are about where the values come from, not how much batch there is.
COLOCATION_ON = {"enable": True, "cpuReclaimThresholdPercent": 300, **FAST_METRICS}
UNLIMITED_MEMORY = 9223372036854771712  # cgroup v1's "no limit" on 4 KiB pages
RECONCILE_INTERVAL = 10.0
# Prints the container's own cgroup files (v1 per-controller mounts, or v2) and then sleeps: its first action.
# One grep reads them all ("path:value" lines) so the reading takes microseconds once the container runs: a
# BE container under the kubelet's 2 cpu.shares can be starved for seconds on a busy machine, and a loop of
# reads could then see the reconciler's values arrive half way.
CGROUP_FILES = (
    "/sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.shares /sys/fs/cgroup/memory/memory.limit_in_bytes "
    "/sys/fs/cgroup/cpuset/cpuset.cpus /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu.weight /sys/fs/cgroup/memory.max "
    "/sys/fs/cgroup/cpuset.cpus.effective"
)
FIRST_ACTION = f"grep -sH . {CGROUP_FILES}; echo printed; exec sleep 3600"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _batch_cpu(node: RealNode) -> int:
    status = (node.get("node", node.name, "") or {}).get("status", {})
    return int_value(status.get("allocatable", {}).get(BATCH_CPU, "0"))


def pod_doc(
    name: str, node: RealNode, *, qos: str, containers: int = 1, resources: dict[str, Any], priority_class: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {LABEL_POD_QOS: qos}},
        "spec": {
            "schedulerName": "koord-scheduler",
            "priorityClassName": priority_class,
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": f"c{i}",
                    "image": node.images["workload"],
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", FIRST_ACTION],
                    "resources": resources,
                }
                for i in range(containers)
            ],
        },
    }


def be_pod(name: str, node: RealNode, *, containers: int = 1, milli: int = 100, memory: str = "64Mi") -> dict[str, Any]:
    batch = {BATCH_CPU: str(milli), BATCH_MEMORY: memory}
    return pod_doc(
        name,
        node,
        qos="BE",
        containers=containers,
        resources={"requests": batch, "limits": batch},
        priority_class="koord-batch",
    )


def lsr_pod(name: str, node: RealNode) -> dict[str, Any]:
    guaranteed = {"cpu": "1", "memory": "32Mi"}
    return pod_doc(
        name, node, qos="LSR", resources={"requests": guaranteed, "limits": guaranteed}, priority_class="koord-prod"
    )


def printed(node: RealNode, name: str, container: str = "c0") -> dict[str, str]:
    """What the container printed as its first action (file name → value)."""

    def done() -> str | None:
        out = node.kubectl("logs", name, "-c", container, check=False).stdout
        return out if "printed" in out else None

    out = wait_for(done, timeout=60, what=f"{name}/{container} to print its cgroup values")
    pairs = (line.split(":", 1) for line in out.splitlines() if line.startswith("/sys/fs/cgroup/"))
    return {path.rsplit("/", 1)[-1]: value for path, value in pairs}


def quota(values: dict[str, str]) -> int:
    if "cpu.cfs_quota_us" in values:
        return int(values["cpu.cfs_quota_us"])
    raw = values["cpu.max"].split()[0]
    return -1 if raw == "max" else int(raw)


def memory_limit(values: dict[str, str]) -> int:
    raw = values.get("memory.limit_in_bytes", values.get("memory.max", ""))
    return UNLIMITED_MEMORY if raw == "max" else int(raw)


def cpuset(values: dict[str, str]) -> frozenset[int]:
    return parse_cpuset(values.get("cpuset.cpus", values.get("cpuset.cpus.effective", "")))


@pytest.fixture
def node(pykoord_release: PykoordRelease) -> Iterator[RealNode]:
    node = pykoord_release.node
    before = _pod_names(node)
    with slo_config(node, **{"colocation-config": COLOCATION_ON}):
        wait_for(lambda: _batch_cpu(node) >= 400, timeout=180, what="batch-cpu >= 400 on the Node")
        wait_for(pykoord_release.nri_registered, timeout=300, what="koordlet registered with NRI")
        yield node
    for name in _pod_names(node) - before:
        node.delete("pod", name, wait=False)


def _pod_names(node: RealNode) -> set[str]:
    items = json.loads(node.kubectl("get", "pods", "-o", "json").stdout)["items"]
    return {p["metadata"]["name"] for p in items}


def test_containers_print_koordlets_values_with_the_hook_and_the_kubelets_without(
    node: RealNode, pykoord_release: PykoordRelease
) -> None:
    be, lsr = _name("nri-be"), _name("nri-lsr")
    node.apply(be_pod(be, node), lsr_pod(lsr, node))
    node.wait_pod_running(be)
    lsr_running = node.wait_pod_running(lsr)
    bound = parse_cpuset(json.loads(lsr_running["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS])["cpuset"])
    be_values, lsr_values = printed(node, be), printed(node, lsr)
    # BatchResource: shares = 100m * 1024 / 1000, quota = 100m of a 100 ms period, memory = the batch limit
    assert "cpu.shares" not in be_values or be_values["cpu.shares"] == str(100 * 1024 // 1000), be_values
    assert quota(be_values) == 10000, be_values
    assert memory_limit(be_values) == 64 << 20, be_values
    # CPUSetAllocator: the bound CPU, no CFS quota
    assert cpuset(lsr_values) == bound, (lsr_values, bound)
    assert quota(lsr_values) == -1, lsr_values
    for name in (be, lsr):  # the node has 2 CPUs: the second LSR pod needs the first one's
        node.delete("pod", name)

    pykoord_release.set_nri(False)
    try:
        be_off, lsr_off = _name("nri-be-off"), _name("nri-lsr-off")
        node.apply(be_pod(be_off, node), lsr_pod(lsr_off, node))
        node.wait_pod_running(be_off)
        node.wait_pod_running(lsr_off)
        be_kubelet, lsr_kubelet = printed(node, be_off), printed(node, lsr_off)
    finally:
        pykoord_release.set_nri(True)
    # The kubelet's BestEffort values: minimum shares, no quota, no memory limit; Guaranteed 1 CPU: a quota
    # of one period and every CPU of the node.
    assert "cpu.shares" not in be_kubelet or be_kubelet["cpu.shares"] == "2", be_kubelet
    assert quota(be_kubelet) == -1, be_kubelet
    assert memory_limit(be_kubelet) >= UNLIMITED_MEMORY, be_kubelet
    assert quota(lsr_kubelet) == 100000, lsr_kubelet
    assert cpuset(lsr_kubelet) != bound or len(cpuset(lsr_kubelet)) == os.cpu_count() == 1, lsr_kubelet


def _failures(metrics: str, event: str) -> float:
    """``koordlet_runtime_hook_failures_total`` of ``event`` (reason ``error``) in koordlet's /metrics text."""
    return sum(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("koordlet_runtime_hook_failures_total{")
        and f'event="{event}"' in line
        and 'reason="error"' in line
    )


def test_a_failing_decision_blocks_no_container_is_counted_and_logged_once_per_pod(
    node: RealNode, pykoord_release: PykoordRelease
) -> None:
    """A BE pod without batch resources whose extended-resource-spec annotation does not parse: BatchResource
    cannot decide, so the runtime gets no adjustment (fail-open), both containers start with the kubelet's
    values, each failed event is counted and the pod is named in one log line."""
    before = _failures(pykoord_release.koordlet_metrics(), "CreateContainer")
    name = _name("nri-bad")
    doc = pod_doc(name, node, qos="BE", containers=2, resources={}, priority_class="koord-batch")
    doc["metadata"]["annotations"] = {ANNOTATION_EXTENDED_RESOURCE_SPEC: "{not json"}
    node.apply(doc)
    pod = node.wait_pod_running(name)
    assert all(s["restartCount"] == 0 for s in pod["status"]["containerStatuses"])
    for container in ("c0", "c1"):
        values = printed(node, name, container)
        assert quota(values) == -1 and memory_limit(values) >= UNLIMITED_MEMORY, values  # the kubelet's
    wait_for(
        lambda: _failures(pykoord_release.koordlet_metrics(), "CreateContainer") >= before + 2,
        timeout=30,
        what="two CreateContainer failures counted in koordlet_runtime_hook_failures_total",
    )
    logs = pykoord_release.logs(pykoord_release.koordlet_pod()["metadata"]["name"])
    lines = [line for line in logs.splitlines() if "NRI " in line and f"of pod default/{name}:" in line]
    assert len(lines) == 1, lines
    assert ANNOTATION_EXTENDED_RESOURCE_SPEC in lines[0] and "logged once per pod" in lines[0], lines


def _container_dirs(node: RealNode, names: list[str]) -> dict[tuple[str, str], str]:
    dirs: dict[tuple[str, str], str] = {}
    for name in names:
        pod = node.get("pod", name)
        assert pod is not None
        for status in pod["status"]["containerStatuses"]:
            dirs[(name, status["name"])] = cgroup_of(node.container_pid(status["containerID"]), "cpu")
    return dirs


def test_killing_koordlet_mid_creation_blocks_no_container_and_reconcile_repairs_them(
    node: RealNode, pykoord_release: PykoordRelease
) -> None:
    """20 containers (10 BE pods of 2) are created while koordlet is killed: all start, none restarts,
    koordlet comes back, re-registers with NRI (a synchronize, no container restarted) and every container
    has BatchResource's values within one reconcile interval of that."""
    names = [_name(f"kill-{i}") for i in range(10)]
    node.apply(*(be_pod(n, node, containers=2, milli=20, memory="16Mi") for n in names))
    time.sleep(1.0)
    koordlet = pykoord_release.koordlet_pod()
    pid = node.container_pid(koordlet["status"]["containerStatuses"][0]["containerID"])
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    pods = [node.wait_pod_running(n, timeout=300) for n in names]
    assert all(s["restartCount"] == 0 for p in pods for s in p["status"]["containerStatuses"])
    ids = {(p["metadata"]["name"], s["name"]): s["containerID"] for p in pods for s in p["status"]["containerStatuses"]}
    assert len(ids) == 20
    wait_for(
        lambda: (
            pykoord_release.nri_registered()
            and pykoord_release.koordlet_pod()["status"]["containerStatuses"][0]["restartCount"] >= 1
        ),
        timeout=300,
        what="koordlet back and registered with NRI",
    )
    back_at = time.monotonic()
    dirs = _container_dirs(node, names)
    want = {
        "cpu.shares": str(20 * 1024 // 1000),
        "cpu.cfs_quota_us": str(20 * 100),
        "memory.limit_in_bytes": str(16 << 20),
    }

    def wrong() -> dict[tuple[str, str], dict[str, str]]:
        out = {}
        for key, rel in dirs.items():
            got = {f: read_cgroup(rel, f) for f in want}
            if got != want:
                out[key] = got
        return out

    deadline = back_at + RECONCILE_INTERVAL + 5
    while wrong() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not wrong(), (
        f"{len(wrong())} containers without BatchResource's values {RECONCILE_INTERVAL:.0f}s after "
        f"koordlet came back ({back_at - killed_at:.0f}s after the kill): {wrong()}"
    )
    # the restart re-synchronized with the runtime and restarted nothing
    after = [node.get("pod", n) for n in names]
    assert {
        (p["metadata"]["name"], s["name"]): s["containerID"]
        for p in after
        if p
        for s in p["status"]["containerStatuses"]
    } == ids
    assert all(s["restartCount"] == 0 for p in after if p for s in p["status"]["containerStatuses"])
    logs = pykoord_release.logs(pykoord_release.koordlet_pod()["metadata"]["name"])
    assert "NRI: synchronized with the runtime" in logs


def test_without_an_nri_socket_koordlet_reconciles_only_and_says_so_once(
    node: RealNode, pykoord_release: PykoordRelease
) -> None:
    """koordlet pointed at a socket that does not exist: it says so once at start, a new BE container starts
    with the kubelet's values and gets BatchResource's from the reconciler within one interval."""
    pykoord_release.set_koordlet_flag("runtime-hooks-nri-socket-path", "missing/nri.sock", registered=False)
    try:
        name = _name("nri-nosock")
        node.apply(be_pod(name, node))
        pod = node.wait_pod_running(name)
        first = printed(node, name)
        assert quota(first) == -1 and memory_limit(first) >= UNLIMITED_MEMORY, first  # the kubelet's at creation
        rel = cgroup_of(node.container_pid(pod["status"]["containerStatuses"][0]["containerID"]), "cpu")
        wait_for(
            lambda: read_cgroup(rel, "cpu.cfs_quota_us") == "10000",
            timeout=RECONCILE_INTERVAL + 10,
            what="the reconciler's BatchResource quota",
        )
        logs = pykoord_release.logs(pykoord_release.koordlet_pod()["metadata"]["name"])
        assert logs.count("runtime hooks: no NRI socket at /host-var-run/missing/nri.sock") == 1, logs[-3000:]
        assert "NRI: registered" not in logs
    finally:
        pykoord_release.set_koordlet_flag("runtime-hooks-nri-socket-path", "nri.sock", registered=True)
