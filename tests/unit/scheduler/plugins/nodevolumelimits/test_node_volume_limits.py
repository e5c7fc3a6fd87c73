"""NodeVolumeLimits: CSINode attach limits per driver, counting the volumes of the pods on the node once
(facts from kube-scheduler ``nodevolumelimits/csi_test.go``)."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core.types import Pod
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.plugins.nodevolumelimits import policy
from koord_scheduler.plugins.nodevolumelimits.plugin import NodeVolumeLimits
from tests import storage_builders as sb
from tests.builders import make_node, make_pod
from tests.fwtest import filter_statuses, make_snapshot

EXCEEDED = Status(Code.UNSCHEDULABLE, (policy.ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,))
EBS = "ebs.csi.aws.com"


def csi_pod(name: str, *claims: str, node: str = "") -> Pod:
    builder = make_pod(name)
    for claim in claims:
        builder = builder.pvc(claim)
    if node:
        builder = builder.node(node)
    return builder.build()


def run(pod: Pod, existing: list[Pod], limits: dict[str, int | None] | None, *, migrated: str = "") -> Status:
    snap = make_snapshot([make_node("n1").build()], existing)
    handle = sb.StorageHandle(snap)
    plugin = NodeVolumeLimits(handle)
    handle.add("PersistentVolume", *(sb.volume(f"pv-{i}", csi=(EBS, f"vol-{i}")) for i in range(4)))
    handle.add("PersistentVolume", sb.volume("pv-other", csi=("other.csi", "o-1")))
    handle.add("PersistentVolumeClaim", *(sb.claim(f"c{i}", volume=f"pv-{i}", bound=True) for i in range(4)))
    handle.add("PersistentVolumeClaim", sb.claim("c-other", volume="pv-other", bound=True))
    handle.add("PersistentVolumeClaim", sb.claim("unbound", class_name="ebs-sc"), sb.claim("intree", class_name="gp2"))
    handle.add(
        "StorageClass",
        sb.storage_class("ebs-sc", provisioner=EBS),
        sb.storage_class("gp2", provisioner="kubernetes.io/aws-ebs"),
    )
    if limits is not None:
        handle.add("CSINode", sb.csi_node("n1", limits, migrated=migrated))
    return filter_statuses(plugin, pod, snap)["n1"]


@pytest.mark.parametrize(
    ("pod", "existing", "limits", "want"),
    [
        pytest.param(
            csi_pod("p", "c0", "c1"),
            [csi_pod("e", "c2", node="n1")],
            {EBS: 3},
            Status(),
            id="three-volumes-within-limit-of-three",
        ),
        pytest.param(
            csi_pod("p", "c0", "c1"),
            [csi_pod("e", "c2", "c3", node="n1")],
            {EBS: 3},
            EXCEEDED,
            id="four-volumes-exceed-limit-of-three",
        ),
        pytest.param(
            csi_pod("p", "c0", "c1"),
            [csi_pod("e", "c0", "c1", node="n1")],
            {EBS: 2},
            Status(),
            id="volumes-already-attached-count-once",
        ),
        pytest.param(
            csi_pod("p", "c0", "c1"),
            [csi_pod("e", "c2", "c3", node="n1")],
            {EBS: None},
            Status(),
            id="driver-without-allocatable-count",
        ),
        pytest.param(
            csi_pod("p", "c0", "c1"), [csi_pod("e", "c2", "c3", node="n1")], None, Status(), id="no-csinode-no-limits"
        ),
        pytest.param(
            csi_pod("p", "c-other"),
            [csi_pod("e", "c2", "c3", node="n1")],
            {EBS: 2},
            Status(),
            id="other-driver-not-limited",
        ),
        pytest.param(
            csi_pod("p", "unbound"),
            [csi_pod("e", "c0", node="n1")],
            {EBS: 1},
            EXCEEDED,
            id="unbound-claim-counts-by-class-provisioner",
        ),
        pytest.param(
            csi_pod("p", "intree"),
            [csi_pod("e", "c0", node="n1")],
            {EBS: 1},
            EXCEEDED,
            id="in-tree-provisioner-migrated-to-csi-driver",
        ),
        pytest.param(
            make_pod("p").inline_volume("disk", "awsElasticBlockStore", volumeID="vol-x").build(),
            [csi_pod("e", "c0", node="n1")],
            {EBS: 1},
            EXCEEDED,
            id="inline-in-tree-disk-migrated",
        ),
        pytest.param(
            make_pod("p").inline_volume("disk", "awsElasticBlockStore", volumeID="vol-x").build(),
            [csi_pod("e", "c0", node="n1")],
            None,
            Status(),
            id="inline-in-tree-without-csinode",
        ),
        pytest.param(
            csi_pod("p", "missing"),
            [],
            {EBS: 1},
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                ('looking up PVC default/missing: persistentvolumeclaim "missing" not found',),
            ),
            id="missing-claim-of-new-pod",
        ),
        pytest.param(
            csi_pod("p", "c0"),
            [csi_pod("e", "missing", "c1", node="n1")],
            {EBS: 1},
            EXCEEDED,
            id="missing-claim-of-existing-pod-is-skipped",
        ),
    ],
)
def test_filter(pod: Pod, existing: list[Pod], limits: dict[str, int | None] | None, want: Status) -> None:
    got = run(pod, existing, limits)
    assert (got.code, got.reasons) == (want.code, want.reasons)


def test_pods_without_attachable_volumes_skip() -> None:
    from koord_scheduler.framework.cycle_state import CycleState

    snap = make_snapshot([make_node("n1").build()])
    plugin: Any = NodeVolumeLimits(sb.StorageHandle(snap))
    _, status = plugin.pre_filter(CycleState(), make_pod("p").build(), snap)
    assert status.code == Code.SKIP
