"""VolumeZone: upstream's tables (``volume_zone_test.go``): zone and region labels of bound volumes,
beta and GA keys, multi-zone values, and the PreFilter rejections."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core.types import Node
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.plugins.volumezone import policy
from koord_scheduler.plugins.volumezone.plugin import VolumeZone
from tests import storage_builders as sb
from tests.builders import make_node, make_pod
from tests.fwtest import filter_statuses, make_snapshot

BETA_ZONE, BETA_REGION = policy.BETA_ZONE, policy.BETA_REGION
ZONE, REGION = policy.ZONE, policy.REGION
CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (policy.ERR_REASON_CONFLICT,))

VOLUMES = {
    "Vol_1": {BETA_ZONE: "us-west1-a"},
    "Vol_2": {BETA_REGION: "us-west1", "uselessLabel": "none"},
    "Vol_3": {BETA_REGION: "us-west1"},
    "Vol_Stable_1": {ZONE: "us-west1-a"},
    "Vol_Stable_2": {REGION: "us-west1", "uselessLabel": "none"},
    "Vol_Stable_3": {ZONE: "us-west1-a", REGION: "us-west1-a"},
    "Vol_Multi": {BETA_ZONE: "us-west1-c__us-west1-a"},
    "Vol_Bad": {ZONE: "us-west1-a__"},
}


def plugin_with(snapshot: Any) -> VolumeZone:
    handle = sb.StorageHandle(snapshot)
    plugin = VolumeZone(handle)
    handle.add("PersistentVolume", *(sb.volume(name, labels=labels) for name, labels in VOLUMES.items()))
    handle.add("PersistentVolumeClaim", *(sb.claim(f"PVC_{name}", volume=name, bound=True) for name in VOLUMES))
    handle.add(
        "PersistentVolumeClaim",
        sb.claim("PVC_EmptySC", class_name=None),
        sb.claim("PVC_NoSC", class_name="Class_0"),
        sb.claim("PVC_NoMode", class_name="Class_NoMode"),
        sb.claim("PVC_WaitSC", class_name="Class_Wait"),
        sb.claim("PVC_ImmediateSC", class_name="Class_Immediate"),
        sb.claim("PVC_Lost", volume="gone", bound=True),
    )
    handle.add(
        "StorageClass",
        sb.storage_class("Class_NoMode", mode=None),
        sb.storage_class("Class_Wait"),
        sb.storage_class("Class_Immediate", mode="Immediate"),
    )
    return plugin


def status_on(node: Node, volume: str) -> Status:
    snap = make_snapshot([node])
    return filter_statuses(plugin_with(snap), make_pod("pod_1").pvc(f"PVC_{volume}").build(), snap)[node.name]


@pytest.mark.parametrize(
    ("volume", "labels", "want"),
    [
        pytest.param("Vol_1", {}, Status(), id="node-without-labels"),
        pytest.param("Vol_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, Status(), id="beta-zone-matched"),
        pytest.param("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, Status(), id="beta-region-matched"),
        pytest.param("Vol_2", {BETA_REGION: "no_us-west1"}, CONFLICT, id="beta-region-does-not-match"),
        pytest.param("Vol_1", {BETA_ZONE: "no_us-west1-a"}, CONFLICT, id="beta-zone-does-not-match"),
        pytest.param("Vol_Stable_1", {ZONE: "us-west1-a"}, Status(), id="zone-matched"),
        pytest.param("Vol_Stable_2", {REGION: "us-west1"}, Status(), id="region-matched"),
        pytest.param("Vol_Stable_2", {REGION: "no_us-west1"}, CONFLICT, id="region-does-not-match"),
        pytest.param("Vol_Stable_1", {ZONE: "no_us-west1-a"}, CONFLICT, id="zone-does-not-match"),
        pytest.param("Vol_Stable_3", {ZONE: "us-west1-a"}, CONFLICT, id="pv-zone-and-region-node-only-zone"),
        pytest.param("Vol_Stable_1", {BETA_ZONE: "us-west1-a"}, CONFLICT, id="pv-ga-zone-node-beta-zone"),
        pytest.param("Vol_1", {ZONE: "us-west1-a"}, Status(), id="pv-beta-label-node-ga-label-matched"),
        pytest.param("Vol_1", {ZONE: "us-west1-b"}, CONFLICT, id="pv-beta-label-node-ga-label-does-not-match"),
        pytest.param("Vol_Multi", {BETA_ZONE: "us-west1-a"}, Status(), id="multi-zone-value-contains-node-zone"),
        pytest.param("Vol_Multi", {BETA_ZONE: "us-west1-b"}, CONFLICT, id="multi-zone-value-lacks-node-zone"),
        pytest.param("Vol_Bad", {ZONE: "elsewhere"}, Status(), id="malformed-zone-list-is-ignored"),
    ],
)
def test_filter(volume: str, labels: dict[str, str], want: Status) -> None:
    builder = make_node("host1")
    for key, value in labels.items():
        builder = builder.label(key, value)
    assert status_on(builder.build(), volume).code == want.code
    assert status_on(builder.build(), volume).reasons == want.reasons


@pytest.mark.parametrize(
    ("claim", "want"),
    [
        pytest.param(
            "PVC_EmptySC",
            "PersistentVolumeClaim had no pv name and storageClass name",
            id="unbound-volume-empty-storage-class",
        ),
        pytest.param(
            "PVC_NoSC", 'storageclass.storage.k8s.io "Class_0" not found', id="unbound-volume-no-storage-class"
        ),
        pytest.param(
            "PVC_NoMode",
            'VolumeBindingMode not set for StorageClass "Class_NoMode"',
            id="unbound-volume-class-without-binding-mode",
        ),
        pytest.param("PVC_ImmediateSC", "PersistentVolume had no name", id="unbound-volume-immediate-binding-mode"),
        pytest.param("PVC_Lost", 'persistentvolume "gone" not found', id="bound-to-missing-volume"),
        pytest.param("PVC_Missing", 'persistentvolumeclaim "PVC_Missing" not found', id="claim-not-found"),
        pytest.param("PVC_WaitSC", "", id="unbound-volume-wait-binding-mode-skips"),
    ],
)
def test_pre_filter(claim: str, want: str) -> None:
    from koord_scheduler.framework.cycle_state import CycleState

    snap = make_snapshot([make_node("host1").label(ZONE, "us-west1-a").build()])
    _, status = plugin_with(snap).pre_filter(CycleState(), make_pod("pod_1").pvc(claim).build(), snap)
    if want:
        assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (want,))
    else:
        assert status.code == Code.SKIP
