"""VolumeRestrictions: inline disk conflicts and ReadWriteOncePod claims in use (facts from
kube-scheduler ``volumerestrictions/volume_restrictions_test.go``)."""

from __future__ import annotations

import pytest

from apis.core.types import Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.plugins.volumerestrictions import policy
from koord_scheduler.plugins.volumerestrictions.plugin import VolumeRestrictions
from tests import storage_builders as sb
from tests.builders import make_node, make_pod
from tests.fwtest import filter_statuses, make_snapshot

DISK_CONFLICT = Status(Code.UNSCHEDULABLE, (policy.ERR_REASON_DISK_CONFLICT,))
RWOP_CONFLICT = Status(Code.UNSCHEDULABLE, (policy.ERR_REASON_RWOP_CONFLICT,))


def disk_pod(name: str, source: str, node: str = "", **fields: object) -> Pod:
    builder = make_pod(name).inline_volume("disk", source, **fields)
    return (builder.node(node) if node else builder).build()


@pytest.mark.parametrize(
    ("pod", "existing", "want"),
    [
        pytest.param(disk_pod("p", "gcePersistentDisk", pdName="foo"), [], Status(), id="nothing-on-node"),
        pytest.param(
            disk_pod("p", "gcePersistentDisk", pdName="foo"),
            [disk_pod("e", "gcePersistentDisk", "n1", pdName="foo")],
            DISK_CONFLICT,
            id="same-gce-pd",
        ),
        pytest.param(
            disk_pod("p", "gcePersistentDisk", pdName="foo", readOnly=True),
            [disk_pod("e", "gcePersistentDisk", "n1", pdName="foo", readOnly=True)],
            Status(),
            id="same-gce-pd-both-read-only",
        ),
        pytest.param(
            disk_pod("p", "gcePersistentDisk", pdName="foo"),
            [disk_pod("e", "gcePersistentDisk", "n1", pdName="bar")],
            Status(),
            id="different-gce-pd",
        ),
        pytest.param(
            disk_pod("p", "awsElasticBlockStore", volumeID="foo", readOnly=True),
            [disk_pod("e", "awsElasticBlockStore", "n1", volumeID="foo", readOnly=True)],
            DISK_CONFLICT,
            id="same-ebs-even-read-only",
        ),
        pytest.param(
            disk_pod("p", "rbd", monitors=["a", "b"], pool="foo", image="bar"),
            [disk_pod("e", "rbd", "n1", monitors=["b", "c"], pool="foo", image="bar")],
            DISK_CONFLICT,
            id="rbd-monitor-overlap-same-image",
        ),
        pytest.param(
            disk_pod("p", "rbd", monitors=["a"], pool="foo", image="bar"),
            [disk_pod("e", "rbd", "n1", monitors=["c"], pool="foo", image="bar")],
            Status(),
            id="rbd-no-monitor-overlap",
        ),
        pytest.param(
            disk_pod("p", "iscsi", targetPortal="127.0.0.1:3260", iqn="iqn.2016-12.server:storage.target01"),
            [disk_pod("e", "iscsi", "n1", targetPortal="127.0.0.1:3260", iqn="iqn.2016-12.server:storage.target01")],
            DISK_CONFLICT,
            id="same-iscsi-iqn",
        ),
    ],
)
def test_disk_conflicts(pod: Pod, existing: list[Pod], want: Status) -> None:
    snap = make_snapshot([make_node("n1").build()], existing)
    got = filter_statuses(VolumeRestrictions(sb.StorageHandle(snap)), pod, snap)["n1"]
    assert (got.code, got.reasons) == (want.code, want.reasons)


def rwop_plugin(snap: ClusterSnapshot) -> VolumeRestrictions:
    handle = sb.StorageHandle(snap)
    plugin = VolumeRestrictions(handle)
    handle.add("PersistentVolumeClaim", sb.claim("rwop", access_modes=("ReadWriteOncePod",)), sb.claim("rwo"))
    return plugin


def test_read_write_once_pod_claim_in_use_blocks_every_node() -> None:
    user = make_pod("user").pvc("rwop").node("n1").build()
    snap = make_snapshot([make_node("n1").build(), make_node("n2").build()], [user])
    got = filter_statuses(rwop_plugin(snap), make_pod("p").pvc("rwop").build(), snap)
    assert {name: (s.code, s.reasons) for name, s in got.items()} == {
        "n1": (RWOP_CONFLICT.code, RWOP_CONFLICT.reasons),
        "n2": (RWOP_CONFLICT.code, RWOP_CONFLICT.reasons),
    }


def test_read_write_once_pod_claim_free_and_preemption_dry_run() -> None:
    user = make_pod("user").pvc("rwop").node("n1").build()
    snap = make_snapshot([make_node("n1").build()])
    plugin = rwop_plugin(snap)
    state = CycleState()
    _, status = plugin.pre_filter(state, make_pod("p").pvc("rwop").build(), snap)
    assert status.code == Code.SKIP
    # A claim used by a pod: PreFilter keeps the state, and removing that pod (a preemption victim) frees it.
    snap.add_pod(user)
    state = CycleState()
    pod = make_pod("p").pvc("rwop").build()
    _, status = plugin.pre_filter(state, pod, snap)
    assert status.is_success
    info = snap.node_info("n1")
    assert info is not None
    assert plugin.filter(state, pod, info).reasons == RWOP_CONFLICT.reasons
    plugin.remove_pod(state, pod, user, info)
    assert plugin.filter(state, pod, info).is_success


def test_missing_claim_is_unresolvable_and_plain_claims_skip() -> None:
    snap = make_snapshot([make_node("n1").build()])
    plugin = rwop_plugin(snap)
    _, status = plugin.pre_filter(CycleState(), make_pod("p").pvc("nope").build(), snap)
    want = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "nope" not found',))
    assert (status.code, status.reasons) == want
    _, status = plugin.pre_filter(CycleState(), make_pod("p").pvc("rwo").build(), snap)
    assert status.code == Code.SKIP
