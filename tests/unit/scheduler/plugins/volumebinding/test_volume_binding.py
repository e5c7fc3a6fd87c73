"""VolumeBinding: claims classified as upstream does, static volumes matched, provisioning allowed by
topology and capacity, and the whole cycle (assume, write, wait) against the in-memory cluster, whose
volume controllers bind what the scheduler chose."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from apis.config import parse_scheduler_config
from apis.core.storage import (
    parse_claim,
    parse_csi_driver,
    parse_storage_capacity,
    parse_storage_class,
    parse_volume,
)
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.plugins.volumebinding import policy, scoring
from koord_scheduler.plugins.volumebinding.policy import StorageView, VolumeBindingError
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from tests import storage_builders as sb
from tests.builders import make_node, make_pod

N1 = {"kubernetes.io/hostname": "n1", "zone": "a"}


def view(
    volumes: Sequence[dict[str, Any]] = (),
    classes: Sequence[dict[str, Any]] = (),
    drivers: Sequence[dict[str, Any]] = (),
    capacities: Sequence[dict[str, Any]] = (),
) -> StorageView:
    return StorageView(
        {v.name: v for v in map(parse_volume, volumes)},
        {c.name: c for c in map(parse_storage_class, classes)},
        {d.name: d for d in map(parse_csi_driver, drivers)},
        [parse_storage_capacity(c) for c in capacities],
    )


def classify(
    claims: list[dict[str, Any]], classes: list[dict[str, Any]], volumes: Sequence[dict[str, Any]] = ()
) -> policy.PodVolumeClaims:
    pvs = [parse_volume(v) for v in volumes]
    return policy.classify_claims(
        [parse_claim(c) for c in claims],
        {c.name: c for c in map(parse_storage_class, classes)},
        {cls: [v for v in pvs if v.class_name == cls] for cls in {v.class_name for v in pvs}},
    )


@pytest.mark.parametrize(
    ("claim", "classes", "want"),
    [
        pytest.param(sb.claim("c", volume="pv", bound=True), [], "bound", id="fully-bound-volume-and-annotation"),
        pytest.param(sb.claim("c"), [sb.storage_class()], "delayed", id="wait-for-first-consumer-unbound"),
        pytest.param(sb.claim("c"), [sb.storage_class(mode="Immediate")], "immediate", id="immediate-class"),
        pytest.param(sb.claim("c", class_name=None), [], "immediate", id="no-class-is-immediate"),
        pytest.param(sb.claim("c", class_name="gone"), [], "immediate", id="unknown-class-is-immediate"),
        pytest.param(
            sb.claim("c", volume="pv"), [sb.storage_class()], "immediate", id="prebound-not-complete-is-immediate"
        ),
    ],
)
def test_classify_claims(claim: dict[str, Any], classes: list[dict[str, Any]], want: str) -> None:
    got = classify([claim], classes)
    kinds = {"bound": got.bound, "delayed": got.unbound_delayed, "immediate": got.unbound_immediate}
    assert [k for k, v in kinds.items() if v] == [want]


def test_class_without_binding_mode_is_an_error() -> None:
    with pytest.raises(VolumeBindingError, match='VolumeBindingMode not set for StorageClass "standard"'):
        classify([sb.claim("c")], [sb.storage_class(mode=None)])


@pytest.mark.parametrize(
    ("volumes", "want"),
    [
        pytest.param(
            [sb.volume("small", size="500Mi"), sb.volume("big", size="5Gi"), sb.volume("fit", size="2Gi")],
            "fit",
            id="smallest-volume-that-fits",
        ),
        pytest.param([sb.volume("other", class_name="fast")], None, id="class-must-match"),
        pytest.param([sb.volume("rox", access_modes=("ReadOnlyMany",))], None, id="access-modes-must-be-offered"),
        pytest.param([sb.volume("away", node_values=["n2"])], None, id="node-affinity-must-admit"),
        pytest.param([sb.volume("here", node_values=["n1"])], "here", id="node-affinity-admits"),
        pytest.param([sb.volume("taken", claim_ref=("default", "other"))], None, id="claimed-by-another"),
        pytest.param(
            [sb.volume("pre", claim_ref=("default", "c"), phase="Bound"), sb.volume("free")],
            "pre",
            id="prebound-to-this-claim-wins",
        ),
        pytest.param([sb.volume("released", phase="Released")], None, id="only-available-volumes"),
    ],
)
def test_find_matching_volume(volumes: list[dict[str, Any]], want: str | None) -> None:
    claim = parse_claim(sb.claim("c", size="1Gi"))
    found = policy.find_matching_volume(claim, [parse_volume(v) for v in volumes], N1, set())
    assert (found.name if found else None) == want


@pytest.mark.parametrize(
    ("classes", "drivers", "capacities", "want_reasons", "want_provisions"),
    [
        pytest.param([sb.storage_class()], [], [], (), 1, id="provisioner-allowed-anywhere"),
        pytest.param(
            [sb.storage_class(provisioner="kubernetes.io/no-provisioner")],
            [],
            [],
            (policy.ERR_BIND_CONFLICT,),
            0,
            id="no-provisioner-and-no-volume",
        ),
        pytest.param(
            [sb.storage_class(topologies=[{"zone": ["b"]}])],
            [],
            [],
            (policy.ERR_BIND_CONFLICT,),
            0,
            id="allowed-topologies-exclude-node",
        ),
        pytest.param(
            [sb.storage_class(topologies=[{"zone": ["b"]}, {"zone": ["a"]}])],
            [],
            [],
            (),
            1,
            id="any-allowed-topology-term",
        ),
        pytest.param(
            [sb.storage_class()],
            [sb.csi_driver("csi.example.com", storage_capacity=True)],
            [sb.capacity("c1", capacity="500Mi", node_labels={"zone": "a"})],
            (policy.ERR_NOT_ENOUGH_SPACE,),
            0,
            id="capacity-too-small",
        ),
        pytest.param(
            [sb.storage_class()],
            [sb.csi_driver("csi.example.com", storage_capacity=True)],
            [sb.capacity("c1", capacity="5Gi", node_labels={"zone": "b"})],
            (policy.ERR_NOT_ENOUGH_SPACE,),
            0,
            id="capacity-not-reachable-from-node",
        ),
        pytest.param(
            [sb.storage_class()],
            [sb.csi_driver("csi.example.com", storage_capacity=True)],
            [sb.capacity("c1", capacity="5Gi", maximum="500Mi", node_labels={"zone": "a"})],
            (policy.ERR_NOT_ENOUGH_SPACE,),
            0,
            id="maximum-volume-size-beats-capacity",
        ),
        pytest.param(
            [sb.storage_class()],
            [sb.csi_driver("csi.example.com", storage_capacity=True)],
            [sb.capacity("c1", capacity="5Gi", node_labels={"zone": "a"})],
            (),
            1,
            id="capacity-enough",
        ),
        pytest.param(
            [sb.storage_class()],
            [sb.csi_driver("csi.example.com", storage_capacity=False)],
            [],
            (),
            1,
            id="driver-without-capacity-tracking",
        ),
    ],
)
def test_provisioning(
    classes: list[dict[str, Any]],
    drivers: list[dict[str, Any]],
    capacities: list[dict[str, Any]],
    want_reasons: tuple[str, ...],
    want_provisions: int,
) -> None:
    claims = classify([sb.claim("c")], classes)
    found, reasons = policy.find_pod_volumes(claims, "n1", N1, view([], classes, drivers, capacities))
    assert (reasons, len(found.provisions)) == (want_reasons, want_provisions)


def test_bound_volume_reasons() -> None:
    claims = classify([sb.claim("c", volume="pv", bound=True)], [])
    _, reasons = policy.find_pod_volumes(claims, "n1", N1, view([sb.volume("pv", node_values=["n2"])]))
    assert reasons == (policy.ERR_NODE_CONFLICT,)
    _, reasons = policy.find_pod_volumes(claims, "n1", N1, view([]))
    assert reasons == (policy.ERR_PV_NOT_EXIST,)


def test_selected_node_elsewhere_is_a_bind_conflict() -> None:
    claims = classify([sb.claim("c", annotations={"volume.kubernetes.io/selected-node": "n2"})], [sb.storage_class()])
    _, reasons = policy.find_pod_volumes(claims, "n1", N1, view([], [sb.storage_class()]))
    assert reasons == (policy.ERR_BIND_CONFLICT,)


def test_claim_with_unknown_class_to_provision_is_an_error() -> None:
    claims = classify([sb.claim("c")], [sb.storage_class()])
    with pytest.raises(VolumeBindingError, match='failed to find storage class "standard"'):
        policy.find_pod_volumes(claims, "n1", N1, view([], []))


@pytest.mark.parametrize(
    ("classes", "want"),
    [
        pytest.param({"a": (50, 100)}, 50, id="half-full-scores-50"),
        pytest.param({"a": (0, 100)}, 100, id="empty-scores-100"),
        pytest.param({"a": (200, 100)}, 0, id="over-capacity-scores-like-full"),
        pytest.param({"a": (10, 0)}, 0, id="zero-capacity-scores-like-full"),
        pytest.param({"a": (25, 100), "b": (50, 100)}, 63, id="mean-of-classes-rounded-half-up"),
        pytest.param({}, 0, id="no-classes"),
    ],
)
def test_capacity_score(classes: dict[str, tuple[int, int]], want: int) -> None:
    shape = scoring.scaled_shape(scoring.DEFAULT_SHAPE)
    assert scoring.node_score(shape, classes) == want


CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: VolumeBinding}]
"""


SCORING_CONFIG = (
    CONFIG
    + """  pluginConfig:
  - name: VolumeBinding
    args: {shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]}
"""
)


async def run(
    nodes: list[Any], pods: list[Any], *, config: str = CONFIG, **objects: list[dict[str, Any]]
) -> MemoryCluster:
    cluster = MemoryCluster.from_objects(nodes, pods, sb.objects(**objects))
    scheduler = build_scheduler(parse_scheduler_config(config), in_tree_registry(), cluster, clock=lambda: 1.0)
    await cluster.start(scheduler, list(scheduler.watched_kinds.values()))
    await scheduler.run_until_idle()
    return cluster


def nodes(*names: str) -> list[Any]:
    return [
        make_node(n).label("kubernetes.io/hostname", n).capacity(cpu="4", memory="8Gi", pods=10).build() for n in names
    ]


async def test_wait_for_first_consumer_claims_are_provisioned_on_the_chosen_node() -> None:
    pods = [make_pod(f"web-{i}").req(cpu="1").pvc(f"data-web-{i}").build() for i in range(3)]
    cluster = await run(
        nodes("n1", "n2"),
        pods,
        PersistentVolumeClaim=[sb.claim(f"data-web-{i}") for i in range(3)],
        StorageClass=[sb.storage_class()],
    )
    for i in range(3):
        node = cluster.pods[f"default/web-{i}"].node_name
        claim = cluster.objects["PersistentVolumeClaim"][f"default/data-web-{i}"]
        assert node in {"n1", "n2"}
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
        volume = cluster.objects["PersistentVolume"][claim["spec"]["volumeName"]]
        term = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
        assert term["matchExpressions"][0]["values"] == [node]


async def test_static_local_volumes_pin_pods_and_are_never_shared() -> None:
    pods = [make_pod(f"db-{i}").req(cpu="1").pvc(f"data-{i}").build() for i in range(3)]
    cluster = await run(
        nodes("n1", "n2", "n3"),
        pods,
        PersistentVolumeClaim=[sb.claim(f"data-{i}") for i in range(3)],
        PersistentVolume=[sb.volume("local-n2", node_values=["n2"]), sb.volume("local-n3", node_values=["n3"])],
        StorageClass=[sb.storage_class(provisioner="kubernetes.io/no-provisioner")],
    )
    placed = {key: pod.node_name for key, pod in cluster.pods.items()}
    assert sorted(n for n in placed.values() if n) == ["n2", "n3"]
    volumes = cluster.objects["PersistentVolume"]
    claimed = sorted(v["spec"]["claimRef"]["name"] for v in volumes.values())
    assert len(set(claimed)) == 2
    pending = [key for key, node in placed.items() if not node]
    assert len(pending) == 1
    assert cluster.conditions[pending[0]][1].startswith(
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    )


async def test_immediate_unbound_claim_and_missing_claim_are_rejected() -> None:
    pods = [make_pod("immediate").pvc("fresh").build(), make_pod("missing").pvc("nope").build()]
    cluster = await run(
        nodes("n1"),
        pods,
        PersistentVolumeClaim=[sb.claim("fresh", class_name="now")],
        StorageClass=[sb.storage_class("now", mode="Immediate")],
    )
    assert cluster.conditions["default/immediate"][1].startswith(
        "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
    assert cluster.conditions["default/missing"][1].startswith(
        '0/1 nodes are available: persistentvolumeclaim "nope" not found.'
    )


async def test_class_allowing_no_topology_leaves_the_pod_unschedulable() -> None:
    cluster = await run(
        nodes("n1", "n2"),
        [make_pod("web").pvc("data").build()],
        PersistentVolumeClaim=[sb.claim("data")],
        StorageClass=[sb.storage_class(topologies=[{"kubernetes.io/hostname": ["elsewhere"]}])],
    )
    assert cluster.pods["default/web"].node_name == ""
    assert cluster.conditions["default/web"][1].startswith(
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )


async def test_bound_volume_node_affinity_restricts_nodes() -> None:
    cluster = await run(
        nodes("n1", "n2"),
        [make_pod("web").pvc("data").build()],
        PersistentVolumeClaim=[sb.claim("data", volume="pv", bound=True)],
        PersistentVolume=[sb.volume("pv", node_values=["n2"], claim_ref=("default", "data"), phase="Bound")],
    )
    assert cluster.pods["default/web"].node_name == "n2"


async def test_storage_capacity_scoring_prefers_the_emptier_storage() -> None:
    node_list = [
        make_node(n)
        .label("kubernetes.io/hostname", n)
        .label("zone", z)
        .capacity(cpu="4", memory="8Gi", pods=10)
        .build()
        for n, z in (("n1", "a"), ("n2", "b"))
    ]
    driver = sb.csi_driver("csi.example.com", storage_capacity=True)
    cluster = await run(
        node_list,
        [make_pod("web").pvc("data").build()],
        config=SCORING_CONFIG,
        PersistentVolumeClaim=[sb.claim("data", size="5Gi")],
        StorageClass=[sb.storage_class()],
        CSIDriver=[driver],
        CSIStorageCapacity=[
            sb.capacity("a", capacity="10Gi", node_labels={"zone": "a"}),
            sb.capacity("b", capacity="100Gi", node_labels={"zone": "b"}),
        ],
    )
    # 5Gi of 10Gi scores 50, of 100Gi 95 (the default shape, scaled by 10).
    assert cluster.pods["default/web"].node_name == "n2"
