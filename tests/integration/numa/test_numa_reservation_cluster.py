"""NodeNUMAResource with Reservations against the real API server: an LSR Reservation gets a cpuset
(``resource-status`` on the Reservation object), its owner pod gets CPUs inside it, a pod that is no
owner gets none of them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

from apis.extension.numa import parse_cpuset

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRDS = REPO / "deploy" / "crds"
NRTS = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
STATUS = "scheduling.koordinator.sh/resource-status"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
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


def install_crd(plane: Any, file: str, path: str) -> None:
    docs = [d for d in yaml.safe_load_all((CRDS / file).read_text()) if d]
    result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", docs[0])
    assert result.status in (201, 409), result.body[:300]
    wait_until(lambda: plane.request("GET", path).status == 200, timeout=30, what=f"{file} served")


def cpu_topology() -> str:
    """2 sockets, 2 NUMA nodes, 8 cores, 16 threads; CPU k and k+8 are siblings."""
    detail = [{"id": t * 8 + c, "core": c, "socket": c // 4, "node": c // 4} for t in range(2) for c in range(8)]
    return json.dumps({"detail": sorted(detail, key=lambda d: d["id"])})


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    install_crd(control_plane, "topology.node.k8s.io_noderesourcetopologies.yaml", NRTS)
    install_crd(control_plane, "scheduling.koordinator.sh_reservations.yaml", RESERVATIONS)
    s = Scope.create(control_plane, "numaresv")
    yield s
    for r in s.ok("GET", RESERVATIONS)["items"]:
        if r["metadata"].get("labels", {}).get("pykoord.test/scope") == s.name:
            control_plane.request("DELETE", f"{RESERVATIONS}/{r['metadata']['name']}")
    for node in s.nodes:
        control_plane.request("DELETE", f"{NRTS}/{node}")
    s.cleanup()


def lsr_reservation(scope: Scope, name: str, *, cpu: str, app: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "100Mi"}
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": f"{scope.name}-{name}", "labels": {"pykoord.test/scope": scope.name}},
        "spec": {
            "template": {
                "metadata": {"namespace": scope.namespace, "labels": {"koordinator.sh/qosClass": "LSR"}},
                "spec": {
                    "schedulerName": scope.scheduler_name,
                    "nodeSelector": {"pykoord.test/scope": scope.name},
                    "containers": [{"name": "c", "resources": {"requests": resources, "limits": resources}}],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": {"app": app}}}],
            "allocateOnce": False,
            "ttl": "1h",
        },
    }


def lsr_pod(scope: Scope, name: str, *, cpu: str, app: str | None) -> dict[str, Any]:
    body = scope.pod_body(name, cpu=cpu, memory="100Mi")
    body["metadata"]["labels"] = {"koordinator.sh/qosClass": "LSR", **({"app": app} if app else {})}
    container = body["spec"]["containers"][0]
    container["resources"]["limits"] = dict(container["resources"]["requests"])
    return body


def pod_cpus(scope: Scope, name: str) -> frozenset[int]:
    return parse_cpuset(json.loads(scope.pod(name)["metadata"]["annotations"][STATUS])["cpuset"])


def test_lsr_reservation_cpuset_goes_to_its_owner_only(scope: Scope, tmp_path: Path) -> None:
    node = scope.add_node("n", cpu="16", memory="64Gi")
    scope.ok(
        "POST",
        NRTS,
        {
            "apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology",
            "metadata": {"name": node, "annotations": {"node.koordinator.sh/cpu-topology": cpu_topology()}},
            "topologyPolicies": ["None"],
            "zones": [],
        },
    )
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    proc = SchedulerProcess.start(scope.plane, config, tmp_path)
    name = f"{scope.name}-lsr"
    try:
        scope.ok("POST", RESERVATIONS, lsr_reservation(scope, "lsr", cpu="4", app="web"))

        def reservation() -> dict[str, Any]:
            return scope.ok("GET", f"{RESERVATIONS}/{name}")

        available = lambda: (reservation().get("status") or {}).get("phase") == "Available"  # noqa: E731
        wait_until(available, timeout=60, what="reservation Available")
        annotations = reservation()["metadata"].get("annotations", {})
        reserved = parse_cpuset(json.loads(annotations[STATUS])["cpuset"])
        # FullPCPUs by default, both NUMA nodes equally free: the first NUMA node's first two cores.
        assert reserved == parse_cpuset("0-1,8-9"), annotations

        scope.add_pods([lsr_pod(scope, "stranger", cpu="4", app=None)])
        scope.wait_all_bound(1, timeout=60)
        stranger = pod_cpus(scope, "stranger")
        assert len(stranger) == 4 and not stranger & reserved, stranger

        scope.add_pods([lsr_pod(scope, "web-0", cpu="2", app="web")])
        scope.wait_all_bound(2, timeout=60)
        owner = pod_cpus(scope, "web-0")
        assert len(owner) == 2 and owner <= reserved, owner
        assert name in scope.pod("web-0")["metadata"]["annotations"][ALLOCATED]
    except AssertionError:
        print(proc.log_tail())
        raise
    finally:
        if proc.alive:
            proc.kill()
