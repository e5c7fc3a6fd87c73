"""The cgroup layout kubelet (cgroupfs driver) and containerd really make, as a fixture for the unit tests.

tests/fixtures/node-layout/cgroupfs-v1.json records, with pod UIDs and container ids replaced by
placeholders: where each Kubernetes QoS class puts a pod's cgroup, what a pod's cgroup holds (the
containers and the pod sandbox), and which of the files koordlet knows (koordlet.system.resources) exist on
a container's cgroup, with the keys of memory.stat and cpu.stat. This test fails when the real node no
longer matches the fixture; PYKOORD_REGENERATE_LAYOUT=1 rewrites the fixture from the node instead.
tests/unit/koordlet/test_koordlet_real_layout.py holds koordlet's layout and the unit tests' fake trees to it.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from realnode import CGROUP_MOUNT, REPO, RealNode, cgroup_of, pod_manifest

from koordlet.system.resources import RESOURCES

FIXTURE = REPO / "tests" / "fixtures" / "node-layout" / "cgroupfs-v1.json"
QOS_PODS = {
    "Guaranteed": {"requests": {"cpu": "50m", "memory": "16Mi"}, "limits": {"cpu": "50m", "memory": "16Mi"}},
    "Burstable": {"requests": {"cpu": "20m", "memory": "8Mi"}},
    "BestEffort": {},
}


def _keys(path: Path) -> list[str]:
    return sorted(line.split()[0] for line in path.read_text().splitlines() if line.strip())


def real_layout(node: RealNode) -> dict[str, Any]:
    suffix = uuid.uuid4().hex[:6]
    names = {qos: f"layout-{qos.lower()}-{suffix}" for qos in QOS_PODS}
    node.apply(
        *(
            pod_manifest(names[qos], node.images["workload"], ["sleep", "3600"], node=node.name, **res)
            for qos, res in QOS_PODS.items()
        )
    )
    kubepods = f"{node.cgroup_root.strip('/')}/kubepods"
    layout: dict[str, Any] = {"kubepods": "<kubepods>", "pod_dirs": {}, "pod_children": {}}
    try:
        for qos, name in names.items():
            pod = node.wait_pod_running(name)
            uid = pod["metadata"]["uid"]
            cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
            container = cgroup_of(node.container_pid(cid), "cpu").strip("/")
            pod_dir = container.rsplit("/", 1)[0]
            layout["pod_dirs"][qos] = pod_dir.replace(kubepods, "<kubepods>").replace(uid, "<uid>")
            children = sorted(p.name for p in (CGROUP_MOUNT / "cpu" / pod_dir).iterdir() if p.is_dir())
            assert cid in children
            layout["pod_children"][qos] = sorted(
                "<container-id>" if c == cid else "<sandbox-id>" if len(c) == 64 else c for c in children
            )
            if qos == "Burstable":
                layout["container_files"] = {
                    name: (CGROUP_MOUNT / res.v1_subsystem / container / name).is_file()
                    for name, res in sorted(RESOURCES.items())
                }
                layout["memory_stat_keys"] = _keys(CGROUP_MOUNT / "memory" / container / "memory.stat")
                layout["cpu_stat_keys"] = _keys(CGROUP_MOUNT / "cpu" / container / "cpu.stat")
    finally:
        for name in names.values():
            node.delete("pod", name, wait=False)
    return layout


def test_the_unit_fixture_is_the_real_layout(real_node: RealNode) -> None:
    layout = real_layout(real_node)
    if os.environ.get("PYKOORD_REGENERATE_LAYOUT"):
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(json.dumps(layout, indent=2, sort_keys=True) + "\n")
    assert json.loads(FIXTURE.read_text()) == layout
