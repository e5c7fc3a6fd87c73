"""``koord-scheduler simulate`` with an LSR Reservation and NodeNUMAResource: the whole scheduler in
process (Reservation plugin included) gives the Reservation a cpuset, its owner CPUs inside it, and a pod
that is no owner none of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from apis.extension.numa import parse_cpuset

REPO = Path(__file__).resolve().parents[5]
PLUGINS = {
    "multiPoint": {"enabled": [{"name": "NodeNUMAResource"}]},
    "preFilter": {"enabled": [{"name": "Reservation"}]},
    "filter": {"enabled": [{"name": "Reservation"}]},
    "preScore": {"enabled": [{"name": "Reservation"}]},
    "score": {"enabled": [{"name": "Reservation", "weight": 5000}]},
    "reserve": {"enabled": [{"name": "Reservation"}]},
    "preBind": {"enabled": [{"name": "Reservation"}]},
    "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "Reservation"}, {"name": "DefaultBinder"}]},
}


def lsr(requests: dict[str, str]) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "app", "resources": {"requests": requests, "limits": requests}}]}


def test_lsr_reservation_cpuset_goes_to_its_owner_only(tmp_path: Path) -> None:
    numa = yaml.safe_load((REPO / "config/simulate/numa-cluster.yaml").read_text())
    node, nrt = numa["items"][0], numa["items"][2]
    assert nrt["kind"] == "NodeResourceTopology"
    resources = {"cpu": "4", "memory": "1Gi"}
    items = [
        node,
        nrt,
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": "lsr-slot", "uid": "uid-lsr-slot"},
            "spec": {
                "allocateOnce": False,
                "ttl": "1h",
                "template": {
                    "metadata": {"namespace": "default", "labels": {"koordinator.sh/qosClass": "LSR"}},
                    "spec": lsr(resources),
                },
                "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "stranger", "namespace": "default", "labels": {"koordinator.sh/qosClass": "LSR"}},
            "spec": lsr(resources),
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-0",
                "namespace": "default",
                "labels": {"koordinator.sh/qosClass": "LSR", "app": "web"},
            },
            "spec": lsr({"cpu": "2", "memory": "1Gi"}),
        },
    ]
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "default-scheduler", "plugins": PLUGINS}],
            }
        )
    )
    cmd = [
        str(Path(sys.executable).parent / "koord-scheduler"), "simulate",
        "--cluster", str(cluster), "--config", str(config), "-o", "json",
    ]  # fmt: skip
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout)
    section = next(v for k, v in doc.items() if k.startswith("Bound cpusets"))
    cpusets = {row["pod"]: parse_cpuset(row["cpuset"]) for row in section}
    reserved = cpusets["reservation/uid-lsr-slot"]
    assert reserved == parse_cpuset("0-1,8-9"), cpusets
    assert len(cpusets["default/stranger"]) == 4 and not cpusets["default/stranger"] & reserved, cpusets
    assert len(cpusets["default/web-0"]) == 2 and cpusets["default/web-0"] <= reserved, cpusets
