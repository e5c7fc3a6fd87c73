"""koord-scheduler on the host (not as the chart's Deployment) schedules onto the real node: the chart's
own profile, under a scheduler name of its own so it never competes with the Deployment's replicas, with
the cluster controllers off (the Deployment runs those)."""

from __future__ import annotations

import sys
import urllib.request
import uuid
from pathlib import Path

import yaml
from realnode import RealNode, pod_manifest, wait_for

from tests.helmchart import find, objects, template

BIN = Path(sys.executable).parent
HOST_SCHEDULER = "koord-scheduler-host"
NO_CONTROLLERS = "-reservation,-nodeslo,-noderesource,-nodemetric,-elasticquota,-podgroup,-deviceresource"


def host_profile(path: Path) -> Path:
    """The chart's KubeSchedulerConfiguration, as a file for a process on the host."""
    configmap = find(objects(template()), "ConfigMap", "koord-scheduler-config")
    config = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    config["leaderElection"] = {"leaderElect": False}
    for profile in config["profiles"]:
        profile["schedulerName"] = HOST_SCHEDULER
        for plugin in profile.get("pluginConfig", []):
            if plugin["name"] == "LoadAwareScheduling":  # the node is this whole, shared, machine
                plugin["args"]["usageThresholds"].pop("cpu", None)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_koord_scheduler_on_the_host_binds_a_pod_that_runs_on_the_real_node(
    real_node: RealNode, tmp_path: Path
) -> None:
    from controlplane import free_port
    from stack import Process

    port = free_port()
    scheduler = Process.start(
        "koord-scheduler",
        [
            str(BIN / "koord-scheduler"),
            "--config",
            str(host_profile(tmp_path / "profile.yaml")),
            "--kubeconfig",
            str(real_node.plane.kubeconfig),
            f"--controllers={NO_CONTROLLERS}",
            "--metrics-port",
            str(port),
            "--bind-address",
            "127.0.0.1",
            "-v",
            "2",
        ],
        tmp_path,
    )
    name = f"host-scheduled-{uuid.uuid4().hex[:6]}"
    try:

        def ready() -> bool:
            assert scheduler.alive, f"koord-scheduler exited:\n{scheduler.log_tail()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_for(ready, timeout=120, what="koord-scheduler on the host /readyz")
        real_node.apply(
            pod_manifest(
                name,
                real_node.images["workload"],
                ["sleep", "3600"],
                node=real_node.name,
                scheduler=HOST_SCHEDULER,
                requests={"cpu": "10m", "memory": "8Mi"},
            )
        )
        pod = real_node.wait_pod_running(name, timeout=180)
        assert pod["spec"]["nodeName"] == real_node.name
    finally:
        real_node.delete("pod", name, wait=False)
        scheduler.stop()
