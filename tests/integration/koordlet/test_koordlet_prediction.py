"""The koordlet's peak predictor against the real API server: ``prodReclaimableMetric`` and
``prodPeakMetric`` in the NodeMetric, and a restart that continues from the checkpoints.

A koord-prod pod requests 2 cores and uses 0.5 (its cgroup counters advance in a temp tree; the node's
``/proc/stat`` says less, so the system part of the prediction stays at 0). After the restart the pod uses
1.5 cores and the koordlet trains only once (a 1 h interval): a predictor that lost its history would
predict the 1.5-core peak at once; one that restored its checkpoints keeps predicting from the 0.5-core
history.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from apis.core.quantity import milli_value, value
from koordlet.prediction.server import CPU_OPTIONS
from tests.integration.koordlet.test_koordlet_nodemetric import (
    GROUP,
    VERSION,
    ensure_priority_class,
    install_crds,
    make_pod,
    wait_until,
    write_counters,
)

pytestmark = pytest.mark.integration
GI = 1 << 30
SLACK = 400
"""Millicores a prediction may sit above the 0.5-core bucket: on a loaded machine the fake's counters are
written late now and then, so some samples read above 0.5 cores (still far from the 1.5-core peak)."""


class FakeNode:
    """cgroup counters and /proc for one pod using ``cores`` (changeable while running)."""

    def __init__(self, root: Path, pod_rel: str) -> None:
        self.cgroot, self.proc, self.pod_rel = root / "cgroup", root / "proc", pod_rel
        (self.cgroot / "cpu" / "kubepods").mkdir(parents=True)
        self.proc.mkdir()
        self.cores = 0.5
        self.cpu_ns = 0.0
        self.started = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._advance, daemon=True)
        self.thread.start()
        wait_until((self.proc / "stat").exists, timeout=5, what="fake /proc")

    def _advance(self) -> None:
        last = time.monotonic()
        while not self.stop.is_set():
            now = time.monotonic()
            self.cpu_ns += (now - last) * self.cores * 1e9
            last = now
            write_counters(self.cgroot, self.pod_rel, int(self.cpu_ns), 100 << 20)
            # the node reports less than the pod uses, so the system part is 0 and the prediction is the pod's
            busy = int((now - self.started) * 10)
            (self.proc / "stat").write_text(f"cpu  {busy} 0 0 {busy * 10} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
            (self.proc / "meminfo").write_text("MemTotal: 8388608 kB\nMemAvailable: 8337408 kB\n")
            self.stop.wait(0.1)


def start_koordlet(plane: Any, node: str, fake: FakeNode, checkpoints: Path, training: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koordlet.app.cli",
            "--kubeconfig",
            str(plane.kubeconfig),
            "--cgroup-root",
            str(fake.cgroot),
            "--cgroup-driver",
            "cgroupfs",
            "--proc-root",
            str(fake.proc),
            "--metrics-port",
            "-1",
            "--report-interval",
            "1",
            f"--prediction-checkpoint-filepath={checkpoints}",
            f"--prediction-training-interval={training}",
            "--prediction-cold-start-duration=0s",
            "--prediction-model-checkpoint-interval=1s",
            "-v",
        ],
        env={**os.environ, "NODE_NAME": node},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop_koordlet(agent: subprocess.Popen[str]) -> str:
    agent.send_signal(signal.SIGTERM)
    try:
        output, _ = agent.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        agent.kill()
        output, _ = agent.communicate()
    assert agent.returncode == 0, output
    return output


def test_prediction_survives_a_restart(control_plane: Any, tmp_path: Path) -> None:
    from kubernetes import client

    api = control_plane.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    node = f"predict-{uuid.uuid4().hex[:6]}"
    install_crds(api)
    ensure_priority_class(api, "koord-prod", 9000)
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node},
            "status": {"capacity": resources, "allocatable": resources},
        }
    )
    web = core.create_namespaced_pod(
        "default", make_pod(f"{node}-web", node, "koord-prod", labels={}, requests={"cpu": "2", "memory": "1Gi"})
    )
    fake = FakeNode(tmp_path, f"kubepods/burstable/pod{web.metadata.uid}")
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()

    def reclaimable() -> tuple[int, int] | None:
        try:
            obj = custom.get_cluster_custom_object(GROUP, VERSION, "nodemetrics", node)
        except client.ApiException:
            return None
        status = obj.get("status") or {}
        resources = ((status.get("prodReclaimableMetric") or {}).get("resource") or {}).get("resources") or {}
        peak = ((status.get("prodPeakMetric") or {}).get("resource") or {}).get("resources") or {}
        if "cpu" not in resources or "cpu" not in peak:
            return None
        return milli_value(resources["cpu"]), value(resources["memory"])

    # the 0.5-core peak with the 10 % margin, rounded up to its bucket
    bucket = CPU_OPTIONS.find_bucket(0.5)
    history_peak = int(int(CPU_OPTIONS.bucket_start(bucket + 1) * 1000) * 1.1)
    fresh_peak = int(int(CPU_OPTIONS.bucket_start(CPU_OPTIONS.find_bucket(1.5) + 1) * 1000) * 1.1)
    agent = start_koordlet(control_plane, node, fake, checkpoints, "1s")
    try:
        try:
            wait_until(
                lambda: (reclaimable() or (0, 0))[0] >= 2000 - history_peak - SLACK,
                timeout=60,
                what="prodReclaimableMetric from the 0.5-core history",
            )
        except AssertionError as err:
            status = custom.get_cluster_custom_object(GROUP, VERSION, "nodemetrics", node).get("status")
            raise AssertionError(f"{err}; status: {status}; agent: {stop_koordlet(agent)[-3000:]}") from None
        time.sleep(22)  # about 20 more training samples at 0.5 cores, checkpointed every second
        before = reclaimable()
        assert before is not None and before[0] <= 2000 - history_peak
    finally:
        output = stop_koordlet(agent)
    assert (checkpoints / web.metadata.uid).exists(), output
    assert (checkpoints / "__node-koord-prod__").exists()

    fake.cores = 1.5
    custom.patch_cluster_custom_object_status(
        GROUP, VERSION, "nodemetrics", node, {"status": {"prodReclaimableMetric": None, "prodPeakMetric": None}}
    )
    agent = start_koordlet(control_plane, node, fake, checkpoints, "1h")
    try:
        after = wait_until(reclaimable, timeout=60, what="prodReclaimableMetric after the restart")
        time.sleep(3)  # a few reports with 1.5-core usage
        after = reclaimable()
    finally:
        stop_koordlet(agent)
        fake.stop.set()
        core.delete_namespaced_pod(f"{node}-web", "default", grace_period_seconds=0)
        core.delete_node(node)
        api.close()
    assert after is not None
    # a fresh model would already predict the 1.5-core peak (reclaimable 2000 - fresh_peak); the restored one
    # still predicts from the 0.5-core history
    assert after[0] >= 2000 - history_peak - SLACK > 2000 - fresh_peak, (before, after, fresh_peak)
    assert abs(after[0] - before[0]) <= SLACK, (before, after)
    assert after[1] > 0
