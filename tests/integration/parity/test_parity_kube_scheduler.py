"""Differential test: upstream kube-scheduler v1.35.8 and koord-scheduler, one pod at a time.

Both run the same ``KubeSchedulerConfiguration``: one profile with only the plugins both implement
(:data:`SHARED_PLUGINS`, kube-scheduler's default weights), ``percentageOfNodesToScore: 100`` and a
non-default ``hardPodAffinityWeight``. For each pod of :mod:`scenario`:

1. the pod is created with a scheduling gate, so the upstream scheduler leaves it alone;
2. the whole cluster state is listed and koord-scheduler's decision is computed in-process on it
   (:mod:`koord_side`);
3. the gate is removed; upstream schedules the pod and its decision is read from its ``-v=10`` log
   (:mod:`upstream_log`) and the pod's ``PodScheduled`` condition;
4. the two must agree: the same feasible nodes, the same per-plugin and total score on every node, the
   node upstream chose among our best-scored ones, the same FitError text for an unschedulable pod.

Both continue from upstream's placement; an unschedulable pod is deleted. Any disagreement fails the test
with one table row per difference.
"""

from __future__ import annotations

import os
import ssl
import time
import urllib.request
import uuid
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane, KubeScheduler
from koord_side import Decision, koord_decision
from scenario import (
    Names,
    PodSpec,
    existing_pods,
    incoming_pods,
    nodes,
    random_pods,
    storage_objects,
    volume_pods,
)
from upstream_log import bound_line_seen, upstream_decision

pytestmark = pytest.mark.integration

GATE = "parity.test/hold"
SHARED_PLUGINS: list[dict[str, Any]] = [
    {"name": "PrioritySort"},
    {"name": "SchedulingGates"},
    {"name": "NodeUnschedulable"},
    {"name": "NodeName"},
    {"name": "TaintToleration", "weight": 3},
    {"name": "NodeAffinity", "weight": 2},
    {"name": "NodePorts"},
    {"name": "NodeResourcesFit", "weight": 1},
    {"name": "VolumeRestrictions"},
    {"name": "NodeVolumeLimits"},
    {"name": "VolumeBinding"},
    {"name": "VolumeZone"},
    {"name": "PodTopologySpread", "weight": 2},
    {"name": "InterPodAffinity", "weight": 2},
    {"name": "NodeResourcesBalancedAllocation", "weight": 1},
    {"name": "ImageLocality", "weight": 1},
    {"name": "DefaultBinder"},
]
HARD_POD_AFFINITY_WEIGHT = 4
BOUND_BEFORE = ("v-zonal-data", "v-pinned-data")
"""Claims of volume_pods the PersistentVolume controller binds before the pods come."""
RANDOM_SEED = int(os.environ.get("PYKOORD_PARITY_SEED", "9"))
RANDOM_PODS = int(os.environ.get("PYKOORD_PARITY_RANDOM_PODS", "20"))
"""After the fixed sequence, this many random pods (:func:`scenario.random_pods`); raise it to hunt."""

KNOWN_DIFFERENCES: dict[str, str] = {}
"""Pods whose decisions are known to differ, and why. Each must still differ (the test says when one is
fixed); no other pod may."""


def plugins(**weights: int) -> dict[str, Any]:
    """The shared plugins, every other one disabled; ``weights`` override the default weights."""
    enabled = [{**p, "weight": weights[p["name"]]} if p["name"] in weights else p for p in SHARED_PLUGINS]
    return {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}}


def args(plugin: str, **fields: Any) -> dict[str, Any]:
    return {"name": plugin, "args": {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": f"{plugin}Args", **fields}}


def shared_config(scheduler_name: str) -> dict[str, Any]:
    """Three profiles: kube-scheduler's defaults (with a non-default hardPodAffinityWeight), ``-alt`` with
    other weights and every scoring argument changed, ``-ratio`` with RequestedToCapacityRatio."""
    widget = "parity.test/widget"
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100,
        "profiles": [
            {
                "schedulerName": scheduler_name,
                "plugins": plugins(),
                "pluginConfig": [args("InterPodAffinity", hardPodAffinityWeight=HARD_POD_AFFINITY_WEIGHT)],
            },
            {
                "schedulerName": f"{scheduler_name}-alt",
                "plugins": plugins(
                    TaintToleration=1,
                    NodeAffinity=5,
                    NodeResourcesFit=3,
                    PodTopologySpread=1,
                    InterPodAffinity=1,
                    NodeResourcesBalancedAllocation=2,
                ),
                "pluginConfig": [
                    args(
                        "NodeResourcesFit",
                        scoringStrategy={
                            "type": "MostAllocated",
                            "resources": [
                                {"name": "cpu", "weight": 1},
                                {"name": "memory", "weight": 2},
                                {"name": widget, "weight": 3},
                            ],
                        },
                    ),
                    args(
                        "NodeResourcesBalancedAllocation",
                        resources=[
                            {"name": "cpu", "weight": 1},
                            {"name": "memory", "weight": 1},
                            {"name": widget, "weight": 1},
                        ],
                    ),
                    args(
                        "PodTopologySpread",
                        defaultingType="List",
                        defaultConstraints=[
                            {
                                "maxSkew": 1,
                                "topologyKey": "topology.kubernetes.io/zone",
                                "whenUnsatisfiable": "ScheduleAnyway",
                            },
                            {
                                "maxSkew": 2,
                                "topologyKey": "kubernetes.io/hostname",
                                "whenUnsatisfiable": "DoNotSchedule",
                            },
                        ],
                    ),
                    args("InterPodAffinity", hardPodAffinityWeight=0, ignorePreferredTermsOfExistingPods=True),
                    args(
                        "NodeAffinity",
                        addedAffinity={
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "topology.kubernetes.io/zone",
                                                "operator": "NotIn",
                                                "values": ["zone-d"],
                                            }
                                        ]
                                    }
                                ]
                            },
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 30,
                                    "preference": {
                                        "matchExpressions": [
                                            {"key": "parity.test/disk", "operator": "In", "values": ["ssd"]}
                                        ]
                                    },
                                }
                            ],
                        },
                    ),
                ],
            },
            {
                "schedulerName": f"{scheduler_name}-ratio",
                "plugins": plugins(),
                "pluginConfig": [
                    args(
                        "NodeResourcesFit",
                        ignoredResources=[widget],
                        scoringStrategy={
                            "type": "RequestedToCapacityRatio",
                            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
                            "requestedToCapacityRatio": {
                                "shape": [
                                    {"utilization": 0, "score": 0},
                                    {"utilization": 30, "score": 8},
                                    {"utilization": 100, "score": 3},
                                ]
                            },
                        },
                    ),
                ],
            },
        ],
    }


class Cluster:
    """Raw API calls for the test, failing loudly on any error status."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def ok(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json") -> Any:
        result = self.plane.request(method, path, body, content_type=content_type)
        if result.status >= 300:
            raise AssertionError(f"{method} {path}: {result.status} {result.body[:400]!r}")
        return result.json() if result.body else None

    def items(self, path: str) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = self.ok("GET", path)["items"]
        return listed

    def state(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
        """Nodes, assigned non-terminal pods (what a scheduler's cache holds) and the other kinds."""
        pods = [
            p
            for p in self.items("/api/v1/pods")
            if p["spec"].get("nodeName") and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        ]
        objects = {
            "Namespace": self.items("/api/v1/namespaces"),
            "Service": self.items("/api/v1/services"),
            "ReplicaSet": self.items("/apis/apps/v1/replicasets"),
            "StatefulSet": self.items("/apis/apps/v1/statefulsets"),
            "ReplicationController": self.items("/api/v1/replicationcontrollers"),
            "PersistentVolumeClaim": self.items("/api/v1/persistentvolumeclaims"),
            "PersistentVolume": self.items("/api/v1/persistentvolumes"),
            "StorageClass": self.items("/apis/storage.k8s.io/v1/storageclasses"),
            "CSINode": self.items("/apis/storage.k8s.io/v1/csinodes"),
            "CSIDriver": self.items("/apis/storage.k8s.io/v1/csidrivers"),
            "CSIStorageCapacity": self.items("/apis/storage.k8s.io/v1/csistoragecapacities"),
        }
        return self.items("/api/v1/nodes"), pods, objects


@pytest.fixture
def names(control_plane: ControlPlane) -> Iterator[Names]:
    names = Names(f"parity-{uuid.uuid4().hex[:6]}")
    yield names
    control_plane.request(
        "PATCH",
        f"/api/v1/namespaces/{names.main}/pods/e-web-terminating",
        [{"op": "remove", "path": "/metadata/finalizers"}],
        content_type="application/json-patch+json",
    )
    for node in nodes(names):
        control_plane.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
    for path, obj in storage_objects(names):
        if "namespaces" not in path:
            control_plane.request("DELETE", f"{path}/{obj['metadata']['name']}")
    for namespace in (names.main, names.blue, names.green):
        control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")


def build_cluster(cluster: Cluster, names: Names, scheduler_name: str) -> dict[str, Any]:
    """Namespaces, nodes, a ReplicaSet and a Service, existing pods; returns the ReplicaSet owner ref."""
    for namespace, team in ((names.main, "main"), (names.blue, "blue"), (names.green, "green")):
        cluster.ok(
            "POST",
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace, "labels": {"parity.test/team": team}},
            },
        )
    for node in nodes(names):
        cluster.ok("POST", "/api/v1/nodes", node)
    rs_labels = {"parity.test/app": "rs-web", "pod-template-hash": "h1"}
    rs = cluster.ok(
        "POST",
        f"/apis/apps/v1/namespaces/{names.main}/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "rs-web"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": rs_labels},
                "template": {
                    "metadata": {"labels": rs_labels},
                    "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        },
    )
    cluster.ok(
        "POST",
        f"/api/v1/namespaces/{names.main}/services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc"},
            "spec": {"selector": {"parity.test/app": "svc-spread"}, "ports": [{"port": 80}]},
        },
    )
    for spec, node in existing_pods(names):
        body = spec.body(names.main, scheduler_name, node=names.node(node))
        cluster.ok("POST", f"/api/v1/namespaces/{body['metadata']['namespace']}/pods", body)
    for path, obj in storage_objects(names):
        cluster.ok("POST", path, obj)
    claims = f"/api/v1/namespaces/{names.main}/persistentvolumeclaims"
    deadline = time.monotonic() + 30
    while not all(cluster.ok("GET", f"{claims}/{c}")["spec"].get("volumeName") for c in BOUND_BEFORE):
        assert time.monotonic() < deadline, "the PersistentVolume controller did not bind the Immediate claims"
        time.sleep(0.2)
    terminating = f"/api/v1/namespaces/{names.main}/pods/e-web-terminating"
    cluster.ok("DELETE", f"{terminating}?gracePeriodSeconds=0")
    assert cluster.ok("GET", terminating)["metadata"].get("deletionTimestamp")
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs-web",
        "uid": rs["metadata"]["uid"],
        "controller": True,
    }


def set_verbosity(plane: ControlPlane, scheduler: KubeScheduler, level: int) -> None:
    """PUT /debug/flags/v (installed when enableProfiling is on, the default)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://127.0.0.1:{scheduler.port}/debug/flags/v",
        data=str(level).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {plane.token}", "Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, context=context, timeout=5) as resp:
        assert resp.status == 200, resp.read()


def schedule_upstream(cluster: Cluster, scheduler: KubeScheduler, spec: PodSpec, namespace: str) -> Decision:
    """Remove the gate, wait for the bind or the Unschedulable condition, read the decision."""
    path = f"/api/v1/namespaces/{namespace}/pods/{spec.name}"
    offset = scheduler.log_path.stat().st_size
    cluster.ok(
        "PATCH", path, [{"op": "remove", "path": "/spec/schedulingGates"}], content_type="application/json-patch+json"
    )
    deadline = time.monotonic() + 20
    message = ""
    while True:
        pod = cluster.ok("GET", path)
        if pod["spec"].get("nodeName"):
            break
        condition = next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), None)
        if condition is not None and condition.get("reason") == "Unschedulable":
            message = condition["message"]
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"upstream did not decide {namespace}/{spec.name}:\n{scheduler.log_tail()}")
        time.sleep(0.05)
    if message:
        cluster.ok("DELETE", f"{path}?gracePeriodSeconds=0")
        return Decision(message=message)
    key = f"{namespace}/{spec.name}"
    while not bound_line_seen(scheduler.log_path, offset, key):
        if time.monotonic() > deadline:
            raise AssertionError(f"no bind line for {key} in the upstream log")
        time.sleep(0.05)
    return upstream_decision(scheduler.log_path, offset, key)


def differences(pod: str, ours: Decision, theirs: Decision, short: Any) -> list[tuple[str, str, str, str]]:
    """(pod, what, koord, upstream) rows; empty when the decisions agree."""
    rows: list[tuple[str, str, str, str]] = []

    def names_of(nodes: set[str]) -> str:
        return ",".join(sorted(short(n) for n in nodes)) or "-"

    if ours.feasible != theirs.feasible:
        rows.append(
            (
                pod,
                "feasible",
                names_of(ours.feasible - theirs.feasible) + " (only koord)",
                names_of(theirs.feasible - ours.feasible) + " (only upstream)",
            )
        )
    if ours.message != theirs.message:
        rows.append((pod, "FitError", ours.message or "-", theirs.message or "-"))
    for node in sorted(set(ours.totals) & set(theirs.totals)):
        ours_plugins, theirs_plugins = ours.plugin_scores.get(node, {}), theirs.plugin_scores.get(node, {})
        for plugin in sorted(set(ours_plugins) | set(theirs_plugins)):
            a, b = ours_plugins.get(plugin, 0), theirs_plugins.get(plugin, 0)
            if a != b:
                rows.append((pod, f"{plugin}@{short(node)}", str(a), str(b)))
        if ours.totals[node] != theirs.totals[node]:
            rows.append((pod, f"total@{short(node)}", str(ours.totals[node]), str(theirs.totals[node])))
    if theirs.node is not None and ours.totals and ours.feasible == theirs.feasible:
        best = max(ours.totals.values())
        if ours.totals.get(theirs.node) != best:
            top = {n for n, s in ours.totals.items() if s == best}
            rows.append((pod, "choice", f"best {names_of(top)} ({best})", short(theirs.node)))
    return rows


def table(rows: list[tuple[str, str, str, str]]) -> str:
    header = ("pod", "what", "koord", "upstream")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def test_koord_decisions_match_upstream_kube_scheduler(control_plane: ControlPlane, names: Names) -> None:
    cluster = Cluster(control_plane)
    scheduler_name = f"upstream-{names.scope}"
    config = shared_config(scheduler_name)
    control_plane.start_controller_manager()  # binds claims (Immediate ones, and the scheduler's choices)
    owner = build_cluster(cluster, names, scheduler_name)
    prefix = names.scope + "-"

    def short(node: str) -> str:
        return node.removeprefix(prefix)

    rows: list[tuple[str, str, str, str]] = []
    seen = {"scored": 0, "single": 0, "unschedulable": 0}
    image_scored = 0
    volume_decisions: dict[str, Decision] = {}
    with control_plane.start_kube_scheduler(config, name="parity") as scheduler:
        set_verbosity(control_plane, scheduler, 10)
        for spec in chain(incoming_pods(names, owner), volume_pods(), random_pods(RANDOM_SEED, RANDOM_PODS)):
            namespace = spec.namespace or names.main
            profile = f"{scheduler_name}-{spec.profile}" if spec.profile else scheduler_name
            body = spec.body(names.main, profile)
            body["spec"]["schedulingGates"] = [{"name": GATE}]
            cluster.ok("POST", f"/api/v1/namespaces/{namespace}/pods", body)
            created = cluster.ok("GET", f"/api/v1/namespaces/{namespace}/pods/{spec.name}")
            created["spec"].pop("schedulingGates")
            node_list, pods, objects = cluster.state()
            ours = koord_decision(config, profile, nodes=node_list, pods=pods, objects=objects, pod=created)
            theirs = schedule_upstream(cluster, scheduler, spec, namespace)
            kind = "unschedulable" if theirs.message else "scored" if theirs.totals else "single"
            seen[kind] += 1
            rows.extend(differences(spec.name, ours, theirs, short))
            image_scored += any(s.get("ImageLocality", 0) > 0 for s in theirs.plugin_scores.values())
            if spec.name.startswith("v-"):
                volume_decisions[spec.name] = theirs

    known = {r[0] for r in rows if r[0] in KNOWN_DIFFERENCES}
    fixed = sorted(set(KNOWN_DIFFERENCES) - known)
    assert not fixed, f"these pods now agree with upstream: remove them from KNOWN_DIFFERENCES: {fixed}"
    rows = [r for r in rows if r[0] not in KNOWN_DIFFERENCES]
    print(f"compared {sum(seen.values())} pods: {seen}; known differences: {sorted(known)}")
    assert not rows, (
        f"koord-scheduler differs from kube-scheduler v1.35.8 on {len({r[0] for r in rows})} pod(s):\n{table(rows)}"
    )
    # The sequence must exercise every outcome, or the comparison proves little.
    assert seen["scored"] >= 30 and seen["single"] >= 2 and seen["unschedulable"] >= 5, seen
    assert image_scored >= 10, f"only {image_scored} pods got an ImageLocality score upstream"
    # The volume pods decided what they exist to show (upstream's decisions, which ours matched).
    v = volume_decisions
    zonal = {short(n) for n in v["v-zonal"].feasible}  # zone-b, and nodes without a zone label
    assert {"b1", "b3", "x1"} <= zonal and not zonal & {"a1", "a2", "c1", "c2", "d1"}, v["v-zonal"]
    assert {short(n) for n in v["v-pinned"].feasible} == {"b3", "c2"}, v["v-pinned"]
    assert v["v-static"].node is not None and short(v["v-static"].node) == "a1", v["v-static"]
    assert "didn't find available persistent volumes to bind" in v["v-nowhere"].message
    assert "pod has unbound immediate PersistentVolumeClaims" in v["v-unbound"].message
    assert 'persistentvolumeclaim "v-missing-data" not found' in v["v-missing"].message


def test_log_parsing_reads_scores_feasible_nodes_and_the_bound_node(tmp_path: Path) -> None:
    log = tmp_path / "kube-scheduler.log"
    log.write_text(
        'I1122 06:00:00.1 1 schedule_one.go:830] "Plugin scored node for pod" pod="ns/p" plugin="NodeAffinity" '
        'node="n1" score=20\n'
        'I1122 06:00:00.1 1 schedule_one.go:830] "Plugin scored node for pod" pod="ns/q" plugin="NodeAffinity" '
        'node="n1" score=7\n'
        'I1122 06:00:00.1 1 schedule_one.go:897] "Calculated node\'s final score for pod" pod="ns/p" node="n1" '
        "score=120\n"
        'I1122 06:00:00.1 1 schedule_one.go:897] "Calculated node\'s final score for pod" pod="ns/p" node="n2" '
        "score=90\n"
        'I1122 06:00:00.2 1 schedule_one.go:337] "Successfully bound pod to node" pod="ns/p" node="n1" '
        "evaluatedNodes=3 feasibleNodes=2\n"
        'I1122 06:00:00.3 1 schedule_one.go:337] "Successfully bound pod to node" pod="ns/one" node="n2" '
        "evaluatedNodes=3 feasibleNodes=1\n"
    )
    assert upstream_decision(log, 0, "ns/p") == Decision(
        feasible={"n1", "n2"}, plugin_scores={"n1": {"NodeAffinity": 20}}, totals={"n1": 120, "n2": 90}, node="n1"
    )
    assert upstream_decision(log, 0, "ns/one") == Decision(feasible={"n2"}, node="n2")
    assert bound_line_seen(log, 0, "ns/one") and not bound_line_seen(log, 0, "ns/absent")


def test_differences_name_each_disagreement_and_agreeing_decisions_have_none() -> None:
    theirs = Decision(
        feasible={"n1", "n2"},
        plugin_scores={"n1": {"NodeAffinity": 20}, "n2": {}},
        totals={"n1": 120, "n2": 90},
        node="n1",
    )
    assert differences("p", theirs, theirs, str) == []
    ours = Decision(
        feasible={"n1", "n2", "n3"},
        plugin_scores={"n1": {"NodeAffinity": 10}, "n2": {}},
        totals={"n1": 110, "n2": 90, "n3": 130},
    )
    assert differences("p", ours, theirs, str) == [
        ("p", "feasible", "n3 (only koord)", "- (only upstream)"),
        ("p", "NodeAffinity@n1", "10", "20"),
        ("p", "total@n1", "110", "120"),
    ]
    same_nodes = Decision(feasible={"n1", "n2"}, totals={"n1": 100, "n2": 130})
    assert differences(
        "p", same_nodes, Decision(feasible={"n1", "n2"}, totals={"n1": 100, "n2": 130}, node="n1"), str
    ) == [("p", "choice", "best n2 (130)", "n1")]
    assert differences(
        "p",
        Decision(message="0/2 nodes are available: 2 Insufficient cpu."),
        Decision(message="0/2 nodes are available: 2 Too many pods."),
        str,
    ) == [
        ("p", "FitError", "0/2 nodes are available: 2 Insufficient cpu.", "0/2 nodes are available: 2 Too many pods.")
    ]
    assert table([("pod1", "feasible", "a", "b")]).splitlines() == [
        "pod  | what     | koord | upstream",
        "-----+----------+-------+---------",
        "pod1 | feasible | a     | b       ",
    ]
