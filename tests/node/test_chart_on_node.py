"""charts/pykoord on the real node: the koordlet DaemonSet pod and the koord-scheduler Deployment run in
pykoord's image (built by scripts/images.py from the Dockerfile), become Ready, talk to the API server
through the `kubernetes` Service, and log no error; koord-scheduler binds a real pod that then runs."""

from __future__ import annotations

import re
import uuid

from realnode import NAMESPACE, PykoordRelease, pod_manifest, wait_for

# A log line at ERROR or CRITICAL, or a traceback (the format of both binaries' logging.basicConfig).
ERROR_LINE = re.compile(r"^(\S+ \S+ (ERROR|CRITICAL) .*|Traceback .*)$", re.MULTILINE)


def error_lines(logs: str) -> list[str]:
    return [match.group(0) for match in ERROR_LINE.finditer(logs)]


def test_koordlet_daemonset_pod_is_ready_on_the_node_and_logs_no_error(pykoord_release: PykoordRelease) -> None:
    node = pykoord_release.node
    # helm --wait counts the DaemonSet ready with 0 of 1 pods (maxUnavailable 20 % rounds up to 1): wait for
    # the pod itself (Ready once its startup probe has seen /healthz).
    daemonset = wait_for(
        lambda: (ds := node.get("daemonset", "koordlet", NAMESPACE)) and ds["status"].get("numberReady") == 1 and ds,
        timeout=300,
        what="the koordlet DaemonSet's pod Ready",
    )
    assert daemonset["status"]["desiredNumberScheduled"] == 1
    (pod,) = pykoord_release.pods("koordlet")
    assert pod["spec"]["nodeName"] == node.name
    assert pod["spec"]["containers"][0]["image"] == node.images["pykoord"].removeprefix("docker.io/library/")
    assert all(s["ready"] for s in pod["status"]["containerStatuses"])
    # It reports: the NodeMetric of the real node gets a status from inside the pod (in-cluster config
    # through the `kubernetes` Service).
    metric = wait_for(
        lambda: (m := node.get("nodemetric", node.name, "")) and m.get("status", {}).get("nodeMetric") and m,
        timeout=120,
        what="the node's NodeMetric status",
    )
    assert metric["status"]["updateTime"]
    logs = pykoord_release.logs(pod["metadata"]["name"])
    assert logs, "koordlet logged nothing"
    assert not error_lines(logs), error_lines(logs)


def test_koord_scheduler_deployment_is_available_and_binds_a_real_pod(pykoord_release: PykoordRelease) -> None:
    node = pykoord_release.node
    deployment = node.get("deployment", "koord-scheduler", NAMESPACE)
    assert deployment is not None
    assert deployment["status"].get("availableReplicas") == deployment["spec"]["replicas"]
    name = f"scheduled-{uuid.uuid4().hex[:6]}"
    node.apply(
        pod_manifest(
            name,
            node.images["workload"],
            ["sleep", "3600"],
            node=node.name,
            scheduler="koord-scheduler",
            requests={"cpu": "10m", "memory": "8Mi"},
        )
    )
    try:
        pod = node.wait_pod_running(name, timeout=180)
        assert pod["spec"]["nodeName"] == node.name
    finally:
        node.delete("pod", name, wait=False)
    for scheduler in pykoord_release.pods("koord-scheduler"):
        logs = pykoord_release.logs(scheduler["metadata"]["name"])
        assert not error_lines(logs), error_lines(logs)
