"""The whole loop, both binaries together, installed from deploy/ and running as their own
ServiceAccounts (TokenRequest tokens, not admin):

- two koordlets report NodeMetrics from their nodes' (fake) /proc: one node is hot, and koord-scheduler,
  with deploy/'s profile (LoadAwareScheduling, cpu threshold 65 %), keeps new pods off it;
- a Reservation is scheduled (Available, on the cool node) and its owner pod later lands in it;
- a BE pod that koord-scheduler placed is evicted by koordlet (BEMemoryEvict, gate from deploy/'s
  ConfigMap, threshold from NodeSLO) when the node's memory passes the threshold;
- koord-scheduler's colocation controllers, with deploy/'s slo-controller-config and RBAC, write every
  node's NodeSLO, NodeMetric collect policy and batch resources, and a batch-cpu pod is scheduled.

Nodes are plain Node objects (no kubelet): pods bind and stay Pending; an evicted pod is marked for
deletion and stays Terminating, which is what the Eviction API promises.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from controlplane import ControlPlane
from kubesched import TEST_LABEL
from stack import (
    DEPLOY,
    FakeNodeRoot,
    Process,
    apply_deploy,
    deployed_koordlet_config,
    service_account_kubeconfig,
    start_koord_scheduler,
    start_koordlet,
    wait_for,
)

pytestmark = pytest.mark.integration

NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
NODESLOS = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
GiB = 1 << 30


@dataclass
class Stack:
    plane: ControlPlane
    scope: str
    hot: str
    cool: str
    roots: dict[str, FakeNodeRoot]
    scheduler: Process
    koordlets: dict[str, Process]

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        result = self.plane.request(method, path, body)
        assert result.status < 300, f"{method} {path}: {result.status} {result.body[:300]!r}"
        return result.json() if result.body else None

    def pod_body(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        cpu: str | None = "100m",
        priority_class: str = "koord-prod",
    ) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
        if cpu:
            container["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.scope, "labels": labels or {}},
            "spec": {
                "schedulerName": "koord-scheduler",
                "priorityClassName": priority_class,
                "nodeSelector": {TEST_LABEL: self.scope},
                "containers": [container],
            },
        }

    def create_pod(self, body: dict[str, Any]) -> dict[str, Any]:
        pod: dict[str, Any] = self.ok("POST", f"/api/v1/namespaces/{self.scope}/pods", body)
        return pod

    def pod(self, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = self.ok("GET", f"/api/v1/namespaces/{self.scope}/pods/{name}")
        return pod

    def bound_node(self, name: str, *, timeout: float = 60) -> str:
        node: str = wait_for(
            lambda: self.pod(name)["spec"].get("nodeName"),
            timeout=timeout,
            what=f"pod {name} bound\n{self.scheduler.log_tail()}",
        )
        return node

    def logs(self) -> str:
        parts = [f"--- {p.name}\n{p.log_tail(30)}" for p in (self.scheduler, *self.koordlets.values())]
        return "\n".join(parts)


def node_body(name: str, scope: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {TEST_LABEL: scope, "kubernetes.io/hostname": name}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    plane = control_plane
    work = tmp_path_factory.mktemp("e2e")
    apply_deploy(plane)
    scope = f"e2e-{uuid.uuid4().hex[:6]}"
    hot, cool = f"{scope}-hot", f"{scope}-cool"
    assert (
        plane.request(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": scope}}
        ).status
        == 201
    )
    for node in (hot, cool):
        assert plane.request("POST", "/api/v1/nodes", node_body(node, scope)).status == 201
    # BE eviction on: the NodeSLO switch (resourceUsedThresholdWithBE.enable) and a 70 % memory threshold.
    slo = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": cool},
        "spec": {"resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 70}},
    }
    assert plane.request("POST", NODESLOS, slo).status == 201
    roots = {
        hot: FakeNodeRoot(work / hot, cpu_cores=3.6).start(),  # 90 % of 4 cores: over the 65 % threshold
        cool: FakeNodeRoot(work / cool, cpu_cores=0.4).start(),
    }  # 10 %
    koordlet_kubeconfig, _ = service_account_kubeconfig(plane, "koordlet", work / "koordlet.kubeconfig")
    scheduler_kubeconfig, _ = service_account_kubeconfig(plane, "koord-scheduler", work / "scheduler.kubeconfig")
    gates = deployed_koordlet_config(work / "koordlet-config.yaml")
    koordlets: dict[str, Process] = {}
    scheduler: Process | None = None
    try:
        for node in (hot, cool):
            koordlets[node] = start_koordlet(node, roots[node], work, kubeconfig=koordlet_kubeconfig, config=gates)
        # The deployed configuration itself: the ConfigMap file (the loader reads the KubeSchedulerConfiguration
        # inside), with leader election on the Lease koordinator-system/koord-scheduler.
        scheduler, _ = start_koord_scheduler(
            plane, work, kubeconfig=scheduler_kubeconfig, config=DEPLOY / "koord-scheduler" / "configmap.yaml"
        )
        yield Stack(plane, scope, hot, cool, roots, scheduler, koordlets)
    finally:
        codes = {p.name: p.stop() for p in (*koordlets.values(), *([scheduler] if scheduler else []))}
        for root in roots.values():
            root.stop()
        plane.request("DELETE", f"/api/v1/namespaces/{scope}/pods?gracePeriodSeconds=0")
        for node in (hot, cool):
            plane.request("DELETE", f"/api/v1/nodes/{node}")
            plane.request("DELETE", f"{NODEMETRICS}/{node}")
        plane.request("DELETE", f"{NODESLOS}/{cool}")
        plane.request("DELETE", f"/api/v1/namespaces/{scope}")
    assert all(code == 0 for code in codes.values()), codes


def node_cpu_milli(stack: Stack, node: str) -> int | None:
    result = stack.plane.request("GET", f"{NODEMETRICS}/{node}")
    if result.status != 200:
        return None
    usage = (((result.json().get("status") or {}).get("nodeMetric") or {}).get("nodeUsage") or {}).get("resources")
    if not usage or "cpu" not in usage:
        return None
    cpu = str(usage["cpu"])
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def test_loadaware_keeps_new_pods_off_the_hot_node(stack: Stack) -> None:
    hot = wait_for(
        lambda: (m := node_cpu_milli(stack, stack.hot)) is not None and m > 3000 and m,
        timeout=60,
        what=f"koordlet's NodeMetric for {stack.hot} showing it hot\n{stack.logs()}",
    )
    cool = wait_for(lambda: node_cpu_milli(stack, stack.cool), timeout=30, what="the cool node's NodeMetric")
    # The burners' real usage; the hot one gets less of a busy 2-core machine, hence the wide band.
    assert hot == pytest.approx(3600, rel=0.25) and cool == pytest.approx(400, rel=0.3)
    names = [f"web-{i}" for i in range(4)]
    for name in names:
        stack.create_pod(stack.pod_body(name))
    placed = {name: stack.bound_node(name) for name in names}
    assert set(placed.values()) == {stack.cool}, placed


def test_reservation_is_scheduled_and_its_owner_lands_in_it(stack: Stack) -> None:
    name = f"{stack.scope}-resv"
    owner_label = {"app": f"{stack.scope}-owner"}
    template = stack.pod_body("reserve", cpu="1")
    reservation = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {
            "template": {"metadata": {"namespace": stack.scope}, "spec": template["spec"]},
            "owners": [{"labelSelector": {"matchLabels": owner_label}}],
            "ttl": "10m",
            "allocateOnce": True,
        },
    }
    stack.ok("POST", RESERVATIONS, reservation)
    try:
        status = wait_for(
            lambda: (
                (s := stack.ok("GET", f"{RESERVATIONS}/{name}").get("status") or {}).get("phase") == "Available" and s
            ),
            timeout=60,
            what=f"Reservation {name} Available\n{stack.scheduler.log_tail()}",
        )
        assert status["nodeName"] == stack.cool  # the hot node is filtered out for it too
        stack.create_pod(stack.pod_body("owner", labels=owner_label, cpu="1"))
        assert stack.bound_node("owner") == status["nodeName"]
        annotation = wait_for(
            lambda: stack.pod("owner")["metadata"].get("annotations", {}).get(ALLOCATED),
            timeout=30,
            what="reservation-allocated annotation",
        )
        assert name in annotation
    finally:
        stack.plane.request("DELETE", f"{RESERVATIONS}/{name}")


def test_be_pod_is_evicted_under_memory_pressure(stack: Stack) -> None:
    pod = stack.create_pod(
        stack.pod_body("batch", labels={"koordinator.sh/qosClass": "BE"}, cpu=None, priority_class="koord-batch")
    )
    assert stack.bound_node("batch") == stack.cool
    root = stack.roots[stack.cool]
    root.add_pod(pod["metadata"]["uid"], "besteffort", 1 * GiB)

    def reported() -> bool:
        result = stack.plane.request("GET", f"{NODEMETRICS}/{stack.cool}").json()
        pods = (result.get("status") or {}).get("podsMetric") or []
        return any(p.get("name") == "batch" for p in pods)

    wait_for(reported, timeout=30, what=f"koordlet reporting the BE pod\n{stack.logs()}")
    assert stack.pod("batch")["metadata"].get("deletionTimestamp") is None  # 25 % used: left alone
    root.memory_percent = 85  # over the NodeSLO's 70 %
    wait_for(
        lambda: stack.pod("batch")["metadata"].get("deletionTimestamp"),
        timeout=60,
        what=f"BE pod evicted\n{stack.koordlets[stack.cool].log_tail()}",
    )
    root.memory_percent = 25

    def evicted_event() -> list[Any]:
        events = stack.ok("GET", f"/api/v1/namespaces/{stack.scope}/events?fieldSelector=involvedObject.name=batch")
        return [e for e in events["items"] if e["reason"] == "evictPodSuccess"]

    assert wait_for(evicted_event, timeout=20, what="evictPodSuccess event")
    for name in ("web-0", "owner"):  # LS pods stay
        if stack.plane.request("GET", f"/api/v1/namespaces/{stack.scope}/pods/{name}").status == 200:
            assert stack.pod(name)["metadata"].get("deletionTimestamp") is None


def test_colocation_controllers_with_deployed_config_and_rbac(stack: Stack) -> None:
    """deploy/'s slo-controller-config and koord-scheduler's own ServiceAccount: every node gets its
    NodeSLO (the chart's thresholds), its NodeMetric collect policy and batch resources from its koordlet's
    reports, and a BE pod asking for batch-cpu is scheduled on them."""
    batch_cpu = "kubernetes.io/batch-cpu"

    def batch_on(node: str) -> int | None:
        allocatable = stack.ok("GET", f"/api/v1/nodes/{node}")["status"]["allocatable"]
        return int(allocatable[batch_cpu]) if batch_cpu in allocatable else None

    for node in (stack.hot, stack.cool):
        wait_for(
            lambda n=node: batch_on(n) is not None,
            timeout=60,  # type: ignore[misc]
            what=f"batch resources on {node}\n{stack.scheduler.log_tail()}",
        )
        spec = stack.ok("GET", f"{NODESLOS}/{node}")["spec"]
        assert spec["resourceUsedThresholdWithBE"]["enable"] is True
        assert spec["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65
        policy = stack.ok("GET", f"{NODEMETRICS}/{node}")["spec"]["metricCollectPolicy"]
        assert policy["reportIntervalSeconds"] == 60
    cool_batch = batch_on(stack.cool)
    assert cool_batch is not None and 0 < cool_batch < 4000 * 60 // 100  # below capacity minus the margin
    body = stack.pod_body("batch-cpu", labels={"koordinator.sh/qosClass": "BE"}, cpu=None, priority_class="koord-batch")
    body["spec"]["containers"][0]["resources"] = {"requests": {batch_cpu: "200"}, "limits": {batch_cpu: "200"}}
    stack.create_pod(body)
    assert stack.bound_node("batch-cpu") == stack.cool  # the hot node is over LoadAware's threshold
    assert " 403 Forbidden" not in stack.scheduler.log()
