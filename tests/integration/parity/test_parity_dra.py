"""Differential test for Dynamic Resource Allocation: upstream kube-scheduler v1.35.8 and koord-scheduler,
one pod at a time, over generated ResourceSlices (:mod:`dra_scenario`).

The method is :mod:`test_parity_kube_scheduler`'s: each pod is created gated, koord-scheduler's decision is
computed in-process on the listed cluster (DeviceClasses, ResourceSlices and ResourceClaims included), the
gate is removed and upstream's decision read from its log. They must agree on the feasible nodes, every
plugin's score (DynamicResources scores prioritized lists), the node (one of our best-scored) and the
FitError text. Every allocation upstream writes is then checked: its devices exist, satisfy the class and
request selectors (evaluated by our CEL layer), and no device is allocated to two claims.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from controlplane import ControlPlane
from dra_scenario import DraScenario, build, pod_body
from koord_side import koord_decision
from test_parity_kube_scheduler import (
    GATE,
    SHARED_PLUGINS,
    Cluster,
    differences,
    schedule_upstream,
    set_verbosity,
    table,
)

from apis.resource import parse_device_class, parse_resource_claim, parse_resource_slice
from koord_scheduler.plugins.dynamicresources.cel import device_value
from koord_scheduler.plugins.dynamicresources.selector_cache import SelectorCache

pytestmark = pytest.mark.integration

RESOURCE = "/apis/resource.k8s.io/v1"
SEED = int(os.environ.get("PYKOORD_DRA_PARITY_SEED", "5"))
PODS = int(os.environ.get("PYKOORD_DRA_PARITY_PODS", "60"))


def dra_config(scheduler_name: str) -> dict[str, Any]:
    enabled = [*SHARED_PLUGINS]
    at = next(i for i, p in enumerate(enabled) if p["name"] == "InterPodAffinity") + 1
    enabled.insert(at, {"name": "DynamicResources", "weight": 2})
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100,
        "profiles": [
            {
                "schedulerName": scheduler_name,
                "plugins": {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}},
            }
        ],
    }


@pytest.fixture
def scenario(control_plane: ControlPlane) -> Iterator[DraScenario]:
    s = build(f"dra-{uuid.uuid4().hex[:6]}", SEED, PODS)
    yield s
    control_plane.request("DELETE", f"/api/v1/namespaces/{s.scope}/pods?gracePeriodSeconds=0")
    control_plane.request("DELETE", f"{RESOURCE}/namespaces/{s.scope}/resourceclaims")
    for node in s.nodes:
        control_plane.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
    for obj in s.slices:
        control_plane.request("DELETE", f"{RESOURCE}/resourceslices/{obj['metadata']['name']}")
    for obj in s.classes:
        control_plane.request("DELETE", f"{RESOURCE}/deviceclasses/{obj['metadata']['name']}")
    control_plane.request("DELETE", f"/api/v1/namespaces/{s.scope}")


def state(cluster: Cluster, scope: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    pods = [
        p
        for p in cluster.items("/api/v1/pods")
        if p["spec"].get("nodeName") and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    ]
    objects = {
        "DeviceClass": cluster.items(f"{RESOURCE}/deviceclasses"),
        "ResourceSlice": cluster.items(f"{RESOURCE}/resourceslices"),
        "ResourceClaim": cluster.items(f"{RESOURCE}/namespaces/{scope}/resourceclaims"),
    }
    return cluster.items("/api/v1/nodes"), pods, objects


def check_allocations(cluster: Cluster, scope: str) -> list[str]:
    """Problems with the allocations upstream wrote: unknown devices, selectors that do not hold, a device
    given to two claims."""
    classes = {c.name: c for c in map(parse_device_class, cluster.items(f"{RESOURCE}/deviceclasses"))}
    devices = {}
    for raw in cluster.items(f"{RESOURCE}/resourceslices"):
        s = parse_resource_slice(raw)
        for d in s.devices:
            devices[(s.driver, s.pool, d.name)] = (s.driver, d)
    selectors = SelectorCache()
    owner: dict[tuple[str, str, str], str] = {}
    problems = []
    for claim in map(parse_resource_claim, cluster.items(f"{RESOURCE}/namespaces/{scope}/resourceclaims")):
        if claim.allocation is None:
            continue
        requests = {r.name: r for r in claim.spec.requests}
        for result in claim.allocation.results:
            key = (result.driver, result.pool, result.device)
            if key in owner:
                problems.append(f"{'/'.join(key)} allocated to {owner[key]} and {claim.key}")
            owner[key] = claim.key
            found = devices.get(key)
            if found is None:
                problems.append(f"{claim.key}: unknown device {'/'.join(key)}")
                continue
            base, _, sub_name = result.request.partition("/")
            request = requests[base]
            sub = request.exactly or next(s for s in request.first_available if s.name == sub_name)
            expressions = (*classes[sub.device_class_name].selectors, *sub.selectors)
            value = device_value(found[0], found[1])
            for expression in expressions:
                if not selectors.get(expression).matches(value):
                    problems.append(f"{claim.key}: {'/'.join(key)} does not satisfy {expression}")
    return problems


def test_dra_decisions_match_upstream_kube_scheduler(control_plane: ControlPlane, scenario: DraScenario) -> None:
    cluster = Cluster(control_plane)
    scheduler_name = f"upstream-{scenario.scope}"
    config = dra_config(scheduler_name)
    cluster.ok(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": scenario.scope}}
    )
    for node in scenario.nodes:
        cluster.ok("POST", "/api/v1/nodes", node)
    for obj in scenario.classes:
        cluster.ok("POST", f"{RESOURCE}/deviceclasses", obj)
    for obj in scenario.slices:
        cluster.ok("POST", f"{RESOURCE}/resourceslices", obj)
    prefix = scenario.scope + "-"

    def short(node: str) -> str:
        return node.removeprefix(prefix)

    rows: list[tuple[str, str, str, str]] = []
    seen = {"scored": 0, "single": 0, "unschedulable": 0, "prioritized": 0}
    created: set[str] = set()
    with control_plane.start_kube_scheduler(config, name="parity-dra") as scheduler:
        set_verbosity(control_plane, scheduler, 10)
        for spec in scenario.pods:
            for claim_name in spec.claims:
                if claim_name not in created:
                    cluster.ok(
                        "POST", f"{RESOURCE}/namespaces/{scenario.scope}/resourceclaims", scenario.claims[claim_name]
                    )
                    created.add(claim_name)
            body = pod_body(scenario.scope, scenario.scope, spec, scheduler_name)
            body["spec"]["schedulingGates"] = [{"name": GATE}]
            cluster.ok("POST", f"/api/v1/namespaces/{scenario.scope}/pods", body)
            pod = cluster.ok("GET", f"/api/v1/namespaces/{scenario.scope}/pods/{spec.name}")
            pod["spec"].pop("schedulingGates")
            node_list, pods, objects = state(cluster, scenario.scope)
            ours = koord_decision(config, scheduler_name, nodes=node_list, pods=pods, objects=objects, pod=pod)
            theirs = schedule_upstream(cluster, scheduler, _Spec(spec.name), scenario.scope)
            kind = "unschedulable" if theirs.message else "scored" if theirs.totals else "single"
            seen[kind] += 1
            seen["prioritized"] += any(s.get("DynamicResources", 0) > 0 for s in theirs.plugin_scores.values())
            rows.extend(differences(spec.name, ours, theirs, short))

    problems = check_allocations(cluster, scenario.scope)
    print(f"compared {len(scenario.pods)} DRA pods: {seen}")
    assert not rows, (
        f"koord-scheduler differs from kube-scheduler v1.35.8 on {len({r[0] for r in rows})} DRA pod(s):\n{table(rows)}"
    )
    assert not problems, "invalid allocations:\n" + "\n".join(problems)
    assert len(scenario.pods) >= 50
    assert seen["scored"] >= 10 and seen["unschedulable"] >= 3 and seen["prioritized"] >= 1, seen


class _Spec:
    """What :func:`schedule_upstream` reads of a pod spec."""

    def __init__(self, name: str) -> None:
        self.name = name
