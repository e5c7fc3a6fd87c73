"""NodeNUMAResource extension points over an in-memory snapshot (2 sockets, 2 NUMA, 16 threads)."""

from __future__ import annotations

import asyncio
import json

import pytest

from apis.config.errors import ConfigError
from apis.config.numa_args import NodeNUMAResourceArgs
from apis.config.plugin_args import IN_TREE_ARGS, decode_args
from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.types import EventType
from koord_scheduler.plugins.nodenumaresource.nrt import parse_node_resource_topology
from koord_scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from tests.builders import make_node, make_pod
from tests.fwtest import filter_statuses, make_snapshot
from tests.unit.scheduler.plugins.nodenumaresource.numa_helpers import RecordingCluster, make_plugin, nrt_object

SPEC = "scheduling.koordinator.sh/resource-spec"
STATUS = "scheduling.koordinator.sh/resource-status"


def lsr(name: str, cpu: str, qos: str = "LSR", **annotations: str) -> Pod:
    builder = make_pod(name).req(cpu=cpu, memory="1Gi").label("koordinator.sh/qosClass", qos)
    for key, value in annotations.items():
        builder = builder.annotation(key, value)
    return builder.build()


def node(name: str = "n1", **labels: str):
    builder = make_node(name).allocatable(cpu="16", memory="64Gi", pods="110")
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder.build()


def schedule(plugin: NodeNUMAResource, cluster: RecordingCluster, pod: Pod, node_name: str = "n1") -> str:
    """PreFilter, Reserve and PreBind on ``node_name``; the cpuset written, or the failure reason."""
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, plugin._snapshot)
    if not (status.is_success or status.is_skip):
        return f"prefilter: {status.message}"
    status = plugin.reserve(state, pod, node_name)
    if not status.is_success:
        return f"reserve: {status.message}"
    before = len(cluster.patches)
    asyncio.run(plugin.pre_bind(state, pod, node_name))
    if len(cluster.patches) == before:
        return "no cpuset"
    return json.loads(cluster.patches[-1][1][STATUS] or "{}")["cpuset"]


def test_lsr_then_lse_get_disjoint_cpusets_and_resource_spec_is_backfilled() -> None:
    snap = make_snapshot([node()])
    plugin, cluster = make_plugin(snap, nrt_object("n1"))
    assert schedule(plugin, cluster, lsr("a", "4")) == "0-1,8-9"
    assert json.loads(cluster.patches[-1][1][SPEC] or "{}") == {"preferredCPUBindPolicy": "FullPCPUs"}
    assert schedule(plugin, cluster, lsr("b", "4", "LSE")) == "4-5,12-13"
    spread = json.dumps({"preferredCPUBindPolicy": "SpreadByPCPUs"})
    assert schedule(plugin, cluster, lsr("c", "2", **{SPEC: spread})) == "2-3"
    assert SPEC not in cluster.patches[-1][1]


def test_unreserve_gives_the_cpus_back() -> None:
    snap = make_snapshot([node()])
    plugin, cluster = make_plugin(snap, nrt_object("n1"))
    pod = lsr("a", "4")
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    assert plugin.reserve(state, pod, "n1").is_success
    plugin.unreserve(state, pod, "n1")
    plugin.unreserve(state, pod, "n1")  # idempotent
    assert schedule(plugin, cluster, lsr("b", "4")) == "0-1,8-9"


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(lsr("ls", "4", "LS"), "no cpuset", id="ls-pod-shares"),
        pytest.param(lsr("be", "4", "BE"), "no cpuset", id="be-pod-shares"),
        pytest.param(
            make_pod("unlabelled").req(cpu="4").build(), "no cpuset", id="no-qos-label-no-cpuset-even-guaranteed"
        ),
        pytest.param(
            make_pod("lsr-batch")
            .req(cpu="4")
            .label("koordinator.sh/qosClass", "LSR")
            .label("koordinator.sh/priority-class", "koord-batch")
            .build(),
            "no cpuset",
            id="lsr-needs-prod-priority",
        ),
        pytest.param(lsr("frac", "2500m"), "prefilter: the requested CPUs must be integer", id="fractional-lsr"),
        pytest.param(
            lsr("none", "4", **{SPEC: json.dumps({"preferredCPUBindPolicy": "None"})}),
            "no cpuset",
            id="unknown-policy-means-no-binding",
        ),
    ],
)
def test_who_gets_a_cpuset(pod: Pod, want: str) -> None:
    snap = make_snapshot([node()])
    plugin, cluster = make_plugin(snap, nrt_object("n1"))
    assert schedule(plugin, cluster, pod) == want


def required(policy: str) -> str:
    return json.dumps({"requiredCPUBindPolicy": policy})


@pytest.mark.parametrize(
    ("labels", "nrt", "pod", "want"),
    [
        pytest.param({}, True, lsr("a", "4"), "", id="fits"),
        pytest.param({}, False, lsr("a", "4"), "node(s) CPU Topology not found", id="no-nrt"),
        pytest.param({}, False, lsr("ls", "4", "LS"), "", id="no-nrt-ls-pod-passes"),
        pytest.param(
            {},
            True,
            lsr("a", "3", **{SPEC: required("FullPCPUs")}),
            "node(s) requested cpus not multiple cpus per core",
            id="T10b-required-full-odd",
        ),
        pytest.param(
            {},
            True,
            lsr("a", "18", **{SPEC: required("FullPCPUs")}),
            "not enough cpus available to satisfy request",
            id="required-dry-run-fails",
        ),
        pytest.param(
            {"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"},
            True,
            lsr("ls", "3", "LS"),
            "node(s) requested cpus not multiple cpus per core",
            id="T7c-node-full-pcpus-only-binds-ls-pods",
        ),
        pytest.param(
            {"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"},
            True,
            lsr("ls", "2500m", "LS"),
            "the requested CPUs must be integer",
            id="T7d-node-full-pcpus-only-fractional",
        ),
        pytest.param(
            {"node.koordinator.sh/cpu-bind-policy": "SpreadByPCPUs"},
            True,
            lsr("a", "4", **{SPEC: required("FullPCPUs")}),
            "node(s) cpu bind policy conflicts with pod's required cpu bind policy",
            id="label-conflicts-required",
        ),
        pytest.param(
            {"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"},
            True,
            lsr("a", "4"),
            "node(s) missing NUMA resources",
            id="numa-policy-without-zones",
        ),
    ],
)
def test_filter(labels: dict[str, str], nrt: bool, pod: Pod, want: str) -> None:
    snap = make_snapshot([node(**labels)])
    plugin, _ = make_plugin(snap, *([nrt_object("n1")] if nrt else []))
    status = filter_statuses(plugin, pod, snap)["n1"]
    assert ("" if status.is_success else status.message) == want


def test_kubelet_reserved_and_kubelet_pods_are_never_handed_out() -> None:
    """T7a: reservedCPUs 0,8 and a kubelet-managed pod on 1,9."""
    nrt = nrt_object(
        "n1",
        kubelet={"policy": "static", "reservedCPUs": "0,8"},
        pod_allocs=[{"namespace": "d", "name": "k", "uid": "u1", "cpuset": "1,9", "managedByKubelet": True}],
    )
    snap = make_snapshot([node()])
    plugin, cluster = make_plugin(snap, nrt)
    assert schedule(plugin, cluster, lsr("a", "6")) == "4-6,12-14"


def test_kubelet_full_pcpus_only_makes_the_node_full_pcpus_only() -> None:
    nrt = nrt_object("n1", kubelet={"policy": "static", "options": {"full-pcpus-only": "true"}})
    snap = make_snapshot([node()])
    plugin, _ = make_plugin(snap, nrt)
    assert filter_statuses(plugin, lsr("ls", "3", "LS"), snap)["n1"].message == (
        "node(s) requested cpus not multiple cpus per core"
    )


def test_bound_pods_from_the_informer_hold_their_cpus_until_deleted() -> None:
    snap = make_snapshot([node()])
    plugin, cluster = make_plugin(snap, nrt_object("n1"))
    bound = (
        make_pod("old")
        .req(cpu="4")
        .label("koordinator.sh/qosClass", "LSR")
        .node("n1")
        .phase("Running")
        .annotation(STATUS, json.dumps({"cpuset": "0-1,8-9"}))
        .build()
    )
    plugin.on_pod(EventType.ADDED, None, bound)
    assert schedule(plugin, cluster, lsr("a", "4")) == "4-5,12-13"
    plugin.on_pod(EventType.DELETED, bound, None)
    assert schedule(plugin, cluster, lsr("b", "4")) == "0-1,8-9"


def test_score_is_node_least_allocated() -> None:
    busy = make_pod("busy").req(cpu="8", memory="32Gi").node("n2").build()
    snap = make_snapshot([node("n1"), node("n2")], [busy])
    plugin, _ = make_plugin(snap, nrt_object("n1"), nrt_object("n2"))
    pod = lsr("a", "4")
    state = CycleState()
    plugin.pre_filter(state, pod, snap)
    assert plugin.pre_score(state, pod, snap, snap.node_order()).is_success
    scores = plugin.score_nodes(state, pod, snap, snap.node_order()).tolist()
    # n1: cpu (16-4)/16 = 75, memory (64-1)/64 = 98 -> 86; n2: cpu 25, memory (64-33)/64 = 48 -> 36.
    assert scores == [86, 36]
    assert [plugin.score(state, pod, snap.info(p)) for p in snap.node_order().tolist()] == scores


def test_pod_without_requests_is_skipped() -> None:
    snap = make_snapshot([node()])
    plugin, _ = make_plugin(snap, nrt_object("n1"))
    _, status = plugin.pre_filter(CycleState(), make_pod("empty").build(), snap)
    assert status.is_skip


def test_args_defaults_are_koordinators() -> None:
    args = decode_args("NodeNUMAResource", None, IN_TREE_ARGS)
    assert isinstance(args, NodeNUMAResourceArgs)
    assert args.default_cpu_bind_policy == "FullPCPUs"
    assert args.scoring_strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [("cpu", 1), ("memory", 1)]
    assert args.numa_scoring_strategy.type == "LeastAllocated"


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param({"defaultCPUBindPolicy": "Bogus"}, "args.defaultCPUBindPolicy", id="bad-bind-policy"),
        pytest.param({"scoringStrategy": {"type": "Balanced"}}, "args.scoringStrategy.type", id="bad-strategy"),
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
            "args.scoringStrategy.resources[0].weight",
            id="bad-weight",
        ),
        pytest.param(
            {"numaScoringStrategy": {"type": "Spread", "resources": [{"name": "cpu", "weight": 3}]}},
            "args.numaScoringStrategy.type",
            id="numa-scoring-type",
        ),
        pytest.param({"maxRefCount": 2}, "maxRefCount", id="unknown-field"),
    ],
)
def test_bad_args_are_refused_naming_the_field(raw: dict, want: str) -> None:
    with pytest.raises(ConfigError) as caught:
        decode_args("NodeNUMAResource", raw, IN_TREE_ARGS)
    assert want in str(caught.value)


def test_most_allocated_numa_scoring_packs_numa_nodes() -> None:
    args = decode_args("NodeNUMAResource", {"numaScoringStrategy": {"type": "MostAllocated"}}, IN_TREE_ARGS)
    snap = make_snapshot([node()])
    plugin, cluster = make_plugin(snap, nrt_object("n1"), args=args)  # type: ignore[arg-type]
    assert schedule(plugin, cluster, lsr("a", "4")) == "0-1,8-9"
    assert schedule(plugin, cluster, lsr("b", "4")) == "2-3,10-11"


def test_pods_without_binding_skip_filter_until_a_node_is_labelled() -> None:
    snap = make_snapshot([node()])
    plugin, _ = make_plugin(snap, nrt_object("n1"))
    ls = lsr("ls", "3", "LS")
    _, status = plugin.pre_filter(CycleState(), ls, snap)
    assert status.is_skip
    snap.upsert_node(node(**{"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"}))
    assert filter_statuses(plugin, ls, snap)["n1"].message == "node(s) requested cpus not multiple cpus per core"
    snap.upsert_node(node())
    _, status = plugin.pre_filter(CycleState(), ls, snap)
    assert status.is_skip


def test_kubelet_full_pcpus_only_from_a_later_nrt_is_seen() -> None:
    snap = make_snapshot([node()])
    plugin, _ = make_plugin(snap)
    ls = lsr("ls", "3", "LS")
    assert plugin.pre_filter(CycleState(), ls, snap)[1].is_skip
    nrt = nrt_object("n1", kubelet={"policy": "static", "options": {"full-pcpus-only": "true"}})
    plugin.on_topology(EventType.ADDED, None, parse_node_resource_topology(nrt))
    assert filter_statuses(plugin, ls, snap)["n1"].message == "node(s) requested cpus not multiple cpus per core"


def test_prebind_patch_seen_before_the_binding_keeps_the_reserved_cpus() -> None:
    """PreBind's patch arrives as a pod update without nodeName: the CPUs Reserve took stay taken."""
    snap = make_snapshot([node()])
    plugin, cluster = make_plugin(snap, nrt_object("n1"))
    pod = lsr("a", "4")
    assert schedule(plugin, cluster, pod) == "0-1,8-9"
    patched = (
        make_pod("a")
        .req(cpu="4", memory="1Gi")
        .label("koordinator.sh/qosClass", "LSR")
        .annotation(STATUS, json.dumps({"cpuset": "0-1,8-9"}))
        .build()
    )
    plugin.on_pod(EventType.MODIFIED, pod, patched)
    assert schedule(plugin, cluster, lsr("b", "4")) == "4-5,12-13"
