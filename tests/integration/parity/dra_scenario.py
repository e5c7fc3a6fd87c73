"""A generated DRA cluster for the differential test: nodes, DeviceClasses, ResourceSlices of several
drivers, and pods with ResourceClaims (counts, CEL selectors over attributes and capacity, ``All``,
prioritized lists, ``matchAttribute`` constraints, shared claims). Deterministic for a seed."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

GPU = "gpu.parity.test"
NIC = "nic.parity.test"
FPGA = "fpga.parity.test"
HOST = "kubernetes.io/hostname"
RACK = "parity.test/rack"
MODELS = ("a100", "h100", "l4")


@dataclass
class DraPod:
    name: str
    claims: list[str]
    """Claim names (created before the pod; a shared claim appears in several pods)."""
    cpu: str = "100m"


@dataclass
class DraScenario:
    scope: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[DraPod] = field(default_factory=list)

    def node(self, i: int) -> str:
        return f"{self.scope}-d{i}"


def _attr(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, tuple):
        return {"version": value[1]}
    return {"string": value}


def _device(name: str, *, capacity: dict[str, str] | None = None, **attributes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "attributes": {k: _attr(v) for k, v in attributes.items()}}
    if capacity:
        out["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    return out


def _request(
    name: str, class_name: str, *selectors: str, count: int | None = None, all_devices: bool = False, sub: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": class_name}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if all_devices:
        body["allocationMode"] = "All"
    elif count is not None:
        body["count"] = count
    return {"name": name, **body} if sub else {"name": name, "exactly": body}


def build(scope: str, seed: int, num_pods: int) -> DraScenario:
    rng = random.Random(seed)
    s = DraScenario(scope)
    num_nodes = 12
    for i in range(num_nodes):
        name = s.node(i)
        s.nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {HOST: name, "parity.test/scope": scope, RACK: f"r{i % 3}"}},
                "status": {
                    "capacity": {"cpu": "32", "memory": "64Gi", "pods": "110"},
                    "allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                },
            }
        )
    s.classes = [
        _class(f"{scope}-gpu", f'device.driver == "{GPU}"'),
        _class(
            f"{scope}-big-gpu",
            f'device.driver == "{GPU}"',
            f'device.capacity["{GPU}"].memory.compareTo(quantity("64Gi")) >= 0',
        ),
        _class(f"{scope}-nic", f'device.driver == "{NIC}"'),
        _class(
            f"{scope}-fpga",
            f'device.driver == "{FPGA}"',
            f'device.attributes["{FPGA}"].firmware.isGreaterThan(semver("2.0.0"))',
        ),
    ]
    for i in range(num_nodes):
        node = s.node(i)
        gpus = rng.choice((0, 2, 8, 8, 16))
        if gpus:
            s.slices.append(
                _slice(
                    f"{node}-gpu",
                    GPU,
                    node,
                    node,
                    [
                        _device(
                            f"gpu-{d}",
                            capacity={"memory": rng.choice(("24Gi", "40Gi", "80Gi"))},
                            model=rng.choice(MODELS),
                            numa=d % 2,
                            index=d,
                        )
                        for d in range(gpus)
                    ],
                )
            )
        nics = rng.choice((0, 1, 2))
        if nics:
            s.slices.append(
                _slice(
                    f"{node}-nic",
                    NIC,
                    node,
                    node,
                    [_device(f"nic-{d}", numa=d % 2, speed=rng.choice((25, 100))) for d in range(nics)],
                )
            )
    # FPGAs reachable from every node of a rack (a node selector), one pool per rack.
    for rack in range(3):
        s.slices.append(
            _slice(
                f"{scope}-fpga-r{rack}",
                FPGA,
                f"rack-{rack}",
                "",
                [
                    _device(f"fpga-{d}", firmware=("version", rng.choice(("1.9.0", "2.1.0", "2.10.3"))))
                    for d in range(2)
                ],
                node_selector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": RACK, "operator": "In", "values": [f"r{rack}"]}]}
                    ]
                },
            )
        )

    gpu, big, nic, fpga = (c["metadata"]["name"] for c in s.classes)
    model = f'device.attributes["{GPU}"].model'
    shapes = [
        lambda: [_request("gpu", gpu)],
        lambda: [_request("gpu", gpu, count=2)],
        lambda: [_request("gpu", gpu, f'{model} == "{rng.choice(MODELS)}"')],
        lambda: [_request("gpu", big)],
        lambda: [_request("gpu", gpu, count=2), _request("nic", nic)],
        lambda: [_request("fpga", fpga)],
        lambda: [
            {
                "name": "gpu",
                "firstAvailable": [
                    _request("h100", gpu, f'{model} == "h100"', sub=True),
                    _request("two-l4", gpu, f'{model} == "l4"', count=2, sub=True),
                    _request("any", gpu, sub=True),
                ],
            }
        ],
        lambda: [_request("nic", nic, all_devices=True)],
        lambda: [_request("gpu", gpu, count=3)],
    ]
    for p in range(num_pods):
        roll = rng.random()
        if roll < 0.1 and p > 0:
            # Share a claim an earlier pod uses.
            shared = rng.choice(sorted(s.claims))
            s.pods.append(DraPod(f"dra-{p:03d}", [shared]))
            continue
        claim_name = f"c-{p:03d}"
        requests = rng.choice(shapes)()
        devices: dict[str, Any] = {"requests": requests}
        if roll > 0.8 and len(requests) == 1 and requests[0].get("exactly", {}).get("count", 1) >= 2:
            devices["constraints"] = [{"matchAttribute": f"{GPU}/numa"}]
        elif roll > 0.7 and len(requests) == 2:
            devices["constraints"] = [{"requests": ["gpu", "nic"], "matchAttribute": f"{GPU}/numa"}]
        s.claims[claim_name] = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": claim_name},
            "spec": {"devices": devices},
        }
        s.pods.append(DraPod(f"dra-{p:03d}", [claim_name], cpu=rng.choice(("100m", "2", "8"))))
    return s


def _class(name: str, *selectors: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
    }


def _slice(
    name: str,
    driver: str,
    pool: str,
    node: str,
    devices: list[dict[str, Any]],
    *,
    node_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def pod_body(scope: str, namespace: str, pod: DraPod, scheduler_name: str) -> dict[str, Any]:
    claims = [{"name": f"claim-{i}", "resourceClaimName": c} for i, c in enumerate(pod.claims)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler_name,
            "nodeSelector": {"parity.test/scope": scope},
            "resourceClaims": claims,
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": pod.cpu, "memory": "100Mi"},
                        "claims": [{"name": c["name"]} for c in claims],
                    },
                }
            ],
        },
    }
