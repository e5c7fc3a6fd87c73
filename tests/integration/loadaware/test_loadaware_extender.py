"""Stock kube-scheduler with ``koord-scheduler extender-server`` as its extender, on the real API server:
LoadAwareScheduling's Filter and Score reach kube-scheduler over the extender protocol, so pods stay off
the node whose NodeMetric reports it hot."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from controlplane import free_port
from kubesched import KOORD_SCHEDULER, Scope, wait_until
from test_loadaware_cluster import install_crd, placements, report

pytestmark = pytest.mark.integration

NODEMETRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    install_crd(control_plane)
    s = Scope.create(control_plane, "ext")
    yield s
    for node in s.nodes:
        control_plane.request("DELETE", f"{NODEMETRICS}/{node}")
    s.cleanup()


@pytest.fixture
def extender(scope: Scope, tmp_path: Path) -> Iterator[str]:
    """``koord-scheduler extender-server`` serving a LoadAwareScheduling profile; its URL."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": f"{scope.scheduler_name}-extender",
                "plugins": {"multiPoint": {"enabled": [{"name": "LoadAwareScheduling", "weight": 10}]}},
            }
        ],
    }
    path = tmp_path / "extender.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    log_path = tmp_path / "extender.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                str(KOORD_SCHEDULER),
                "extender-server",
                "--config",
                str(path),
                "--kubeconfig",
                str(scope.plane.kubeconfig),
                "--scheduler-names",
                scope.scheduler_name,
                "--bind-address",
                "127.0.0.1",
                "--port",
                str(port),
                "-v",
                "2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url) or process.poll() is not None, timeout=30, what="extender /healthz")
        assert process.poll() is None, log_path.read_text()[-3000:]
        yield url
    except AssertionError:
        print(log_path.read_text()[-3000:])
        raise
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _healthy(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def test_kube_scheduler_places_pods_by_load_through_the_extender(scope: Scope, extender: str) -> None:
    cool_a, cool_b, hot = (scope.add_node(n, cpu="8", memory="16Gi") for n in ("a", "b", "hot"))
    for node, cpu in ((cool_a, "1"), (cool_b, "1"), (hot, "7")):  # hot: 87.5% > 65% cpu threshold
        report(scope, node, cpu=cpu)
    config = {
        "percentageOfNodesToScore": 100,
        "profiles": [{"schedulerName": scope.scheduler_name}],
        "extenders": [
            {
                "urlPrefix": extender,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "weight": 5,
                "nodeCacheCapable": True,
                "httpTimeout": "5s",
            },
        ],
    }
    with scope.plane.start_kube_scheduler(config, name=f"ext-{scope.name}") as kube_scheduler:
        try:
            scope.add_pods(scope.pod_body(f"first-{i}", cpu="500m") for i in range(6))
            scope.wait_all_bound(6, timeout=60)
            first = placements(scope, "first-")
            assert hot not in first, first
            assert set(first) == {cool_a, cool_b}, first

            # The extender's informers see the new NodeMetrics: the hot node cooled, the others are busy.
            for node, cpu in ((hot, "200m"), (cool_a, "7"), (cool_b, "7")):
                report(scope, node, cpu=cpu)
            time.sleep(2)
            scope.add_pods(scope.pod_body(f"second-{i}", cpu="500m") for i in range(3))
            scope.wait_all_bound(9, timeout=60)
            assert placements(scope, "second-") == {hot: 3}
        except AssertionError:
            print(kube_scheduler.log_tail())
            raise
