"""VolumeBinding's assume caches and PreBind checks (kube-scheduler ``binder.go`` ``AssumePodVolumes``,
``checkBindings``): upstream's error messages, and a timeout that ends the wait."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apis.core.storage import PersistentVolume, PersistentVolumeClaim, parse_claim, parse_volume
from koord_scheduler.plugins.volumebinding import binder
from koord_scheduler.plugins.volumebinding.assume_cache import AssumeCache
from koord_scheduler.plugins.volumebinding.policy import (
    DynamicProvision,
    PodVolumes,
    StaticBinding,
    VolumeBindingError,
)
from tests import storage_builders as sb

SELECTED = "volume.kubernetes.io/selected-node"
LABELS = {"kubernetes.io/hostname": "n1"}


def caches(
    claims: list[dict[str, Any]], volumes: list[dict[str, Any]]
) -> tuple[AssumeCache[PersistentVolume], AssumeCache[PersistentVolumeClaim]]:
    pvs = {v.name: v for v in map(parse_volume, volumes)}
    pvcs = {c.key: c for c in map(parse_claim, claims)}
    return (
        AssumeCache(pvs, lambda v: v.name, "persistentvolumes"),
        AssumeCache(pvcs, lambda c: c.key, "persistentvolumeclaims"),
    )


def test_assumed_volume_is_taken_for_other_claims_and_restored() -> None:
    pv_cache, pvc_cache = caches([sb.claim("a"), sb.claim("b")], [sb.volume("pv")])
    claim_a = pvc_cache.get("default/a")
    volume = pv_cache.get("pv")
    assert claim_a is not None and volume is not None
    reserved = binder.assume_pod_volumes(PodVolumes((StaticBinding(claim_a, volume),)), "n1", pv_cache, pvc_cache)
    assumed = pv_cache.get("pv")
    assert assumed is not None and assumed.claim_ref is not None
    assert (assumed.claim_ref.name, assumed.claim_ref.uid) == ("a", "uid-a")
    assert assumed.meta.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    binder.revert(reserved, pv_cache, pvc_cache)
    restored = pv_cache.get("pv")
    assert restored is not None and restored.claim_ref is None


def test_assume_out_of_sync_is_an_error() -> None:
    pv_cache, pvc_cache = caches([sb.claim("a", resource_version="7")], [])
    claim = parse_claim(sb.claim("a", resource_version="6"))
    with pytest.raises(VolumeBindingError, match=r'"default/a" is out of sync \(stored: 7, assume: 6\)'):
        binder.assume_pod_volumes(PodVolumes((), (DynamicProvision(claim),)), "n1", pv_cache, pvc_cache)


def provision(claim: dict[str, Any]) -> PodVolumes:
    return PodVolumes((), (DynamicProvision(parse_claim(claim)),))


@pytest.mark.parametrize(
    ("api_claim", "api_volumes", "labels", "gone", "want"),
    [
        pytest.param(
            sb.claim("c", volume="pv", bound=True, annotations={SELECTED: "n1"}),
            [sb.volume("pv", node_values=["n1"])],
            LABELS,
            "",
            True,
            id="bound",
        ),
        pytest.param(sb.claim("c", annotations={SELECTED: "n1"}), [], LABELS, "", False, id="still-provisioning"),
        pytest.param(
            sb.claim("c", annotations={SELECTED: "n2"}),
            [],
            LABELS,
            "",
            'provisioning failed for PVC "c"',
            id="provisioner-moved-the-annotation",
        ),
        pytest.param(
            sb.claim("c"), [], LABELS, "", 'selectedNode annotation reset for PVC "c"', id="annotation-removed"
        ),
        pytest.param(
            sb.claim("c", volume="pv", bound=True, annotations={SELECTED: "n1"}),
            [sb.volume("pv", node_values=["n2"])],
            LABELS,
            "",
            'pv "pv" node affinity doesn\'t match node "n1": no matching NodeSelectorTerms',
            id="provisioned-volume-elsewhere",
        ),
        pytest.param(
            sb.claim("c", annotations={SELECTED: "n1"}),
            [],
            None,
            "",
            'failed to get node "n1": nodes "n1" not found',
            id="node-gone",
        ),
        pytest.param(
            sb.claim("c", annotations={SELECTED: "n1"}),
            [],
            LABELS,
            'pods "p" not found',
            'pod does not exist any more: pods "p" not found',
            id="pod-gone",
        ),
    ],
)
def test_check_provisioning(
    api_claim: dict[str, Any],
    api_volumes: list[dict[str, Any]],
    labels: dict[str, str] | None,
    gone: str,
    want: bool | str,
) -> None:
    pv_cache, pvc_cache = caches([api_claim], api_volumes)
    written = provision(sb.claim("c", annotations={SELECTED: "n1"}))
    check = lambda: binder.check_bindings(  # noqa: E731
        written, "n1", labels=labels, pod_gone=gone, pv_cache=pv_cache, pvc_cache=pvc_cache
    )
    if isinstance(want, bool):
        assert check() is want
    else:
        with pytest.raises(VolumeBindingError) as err:
            check()
        assert str(err.value) == want


def test_claim_ref_reset_on_a_static_binding() -> None:
    claim = sb.claim("c", volume="pv")
    pv_cache, pvc_cache = caches([claim], [sb.volume("pv")])
    written = PodVolumes((StaticBinding(parse_claim(claim), parse_volume(sb.volume("pv"))),))
    with pytest.raises(VolumeBindingError, match='ClaimRef got reset for pv "pv"'):
        binder.check_bindings(written, "n1", labels=LABELS, pod_gone="", pv_cache=pv_cache, pvc_cache=pvc_cache)


def test_wait_ends_with_upstreams_deadline_error() -> None:
    pv_cache, pvc_cache = caches([sb.claim("c", annotations={SELECTED: "n1"})], [])
    waiter = binder.PodVolumesBinder(None, pv_cache, pvc_cache, bind_timeout_s=0.05)  # type: ignore[arg-type]

    async def wait() -> None:
        await waiter.wait(
            provision(sb.claim("c", annotations={SELECTED: "n1"})),
            node_name="n1",
            node_labels=lambda: LABELS,
            pod_gone=lambda: "",
            changed=asyncio.Event(),
        )

    with pytest.raises(VolumeBindingError, match=r"^binding volumes: context deadline exceeded$"):
        asyncio.run(wait())


def test_a_pod_deleted_during_pre_bind_is_noticed() -> None:
    from apis.config.plugin_args import VolumeBindingArgs
    from koord_scheduler.plugins.volumebinding.plugin import VolumeBinding
    from tests.builders import make_node, make_pod
    from tests.fwtest import make_snapshot

    pod = make_pod("p").node("n1").build()
    snap = make_snapshot([make_node("n1").build()], [pod])
    plugin = VolumeBinding(VolumeBindingArgs(), sb.StorageHandle(snap))
    assert plugin._pod_gone(pod, "n1") == ""
    snap.remove_pod(pod)
    assert plugin._pod_gone(pod, "n1") == 'pods "p" not found'
