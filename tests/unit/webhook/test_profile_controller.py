"""The colocationprofile controller: Koordinator's controller tests (pkg/controller/colocationprofile
``colocationprofile_controller_test.go`` ``TestReconciler_Reconcile``, ``colocationprofile_util_test.go``
``Test_updatePodByClusterColocationProfile`` and ``Test_listPodsForProfile``) transcribed, against an
in-memory pod API."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from apis.core.parse import parse_label_selector
from apis.core.selectors import label_selector_matches
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.webhook.profile_controller import (
    ColocationProfileController,
    ControllerOptions,
    merge_patch,
    mutate,
    parse_managed_profile,
    selector_string,
)

SCHEDULER_NAME = "scheduling.koordinator.sh/scheduler-name"
PATCH = {"metadata": {"labels": {"test-patch-label": "patch-a"}, "annotations": {"test-patch-annotation": "patch-b"}}}
RESOURCES = {"limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "4Gi"}}


def profile(spec: dict[str, Any], *, managed: bool = True, rv: str = "1", name: str = "test-profile") -> Any:
    labels = {"config.koordinator.sh/controller-managed": "true"} if managed else {}
    return parse_managed_profile(
        {
            "apiVersion": "config.koordinator.sh/v1alpha1",
            "kind": "ClusterColocationProfile",
            "metadata": {"name": name, "labels": labels, "resourceVersion": rv},
            "spec": spec,
        }
    )


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    uid: str = "",
    phase: str = "Pending",
    annotations: dict[str, str] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "uid": uid or name}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": [{"name": "test-container-a", "resources": copy.deepcopy(RESOURCES)}],
            "overhead": {"cpu": "1", "memory": "2Gi"},
        },
        "status": {"phase": phase},
    }


BASE_SPEC = {
    "selector": {"matchLabels": {"koordinator-colocation-pod": "true"}},
    "labels": {"testLabelA": "valueA"},
    "annotations": {"testAnnotationA": "valueA"},
    "qosClass": "BE",
    "koordinatorPriority": 1111,
    "patch": PATCH,
}


@pytest.mark.parametrize(
    ("pod_labels", "pod_annotations", "spec", "want_labels", "want_annotations"),
    [
        pytest.param(
            {"koordinator-colocation-pod": "true"},
            None,
            BASE_SPEC,
            {
                "koordinator-colocation-pod": "true",
                "testLabelA": "valueA",
                "test-patch-label": "patch-a",
                "koordinator.sh/qosClass": "BE",
                "koordinator.sh/priority": "1111",
            },
            {"testAnnotationA": "valueA", "test-patch-annotation": "patch-b"},
            id="mutating pod",
        ),
        pytest.param(
            {"koordinator-colocation-pod": "true", "label-key-to-load": "test-label-value"},
            {"annotation-key-to-load": "test-annotation-value"},
            {
                **BASE_SPEC,
                "labels": {"testLabelA": "valueA", SCHEDULER_NAME: "koordinator-scheduler"},
                "labelKeysMapping": {
                    "label-key-to-load": "label-key-to-store",
                    "label-key-to-load-not-exist": "label-key-to-store-not-exist",
                },
                "annotationKeysMapping": {"annotation-key-to-load": "annotation-key-to-store"},
            },
            {
                "koordinator-colocation-pod": "true",
                "testLabelA": "valueA",
                "test-patch-label": "patch-a",
                "label-key-to-load": "test-label-value",
                "label-key-to-store": "test-label-value",
                "label-key-to-store-not-exist": "",
                "koordinator.sh/qosClass": "BE",
                "koordinator.sh/priority": "1111",
                SCHEDULER_NAME: "koordinator-scheduler",
            },
            {
                "testAnnotationA": "valueA",
                "test-patch-annotation": "patch-b",
                "annotation-key-to-load": "test-annotation-value",
                "annotation-key-to-store": "test-annotation-value",
            },
            id="mutate advanced attributes",
        ),
        pytest.param(
            None,
            None,
            {
                **BASE_SPEC,
                "selector": {},
                "labels": {"testLabelA": "valueA", SCHEDULER_NAME: "koordinator-scheduler"},
                "labelKeysMapping": {
                    "label-key-to-load": "label-key-to-store",
                    "label-key-to-load-not-exist": "label-key-to-store-not-exist",
                },
                "annotationKeysMapping": {"annotation-key-to-load": "annotation-key-to-store"},
            },
            {
                "testLabelA": "valueA",
                "test-patch-label": "patch-a",
                "label-key-to-store": "",
                "label-key-to-store-not-exist": "",
                "koordinator.sh/qosClass": "BE",
                "koordinator.sh/priority": "1111",
                SCHEDULER_NAME: "koordinator-scheduler",
            },
            {"testAnnotationA": "valueA", "test-patch-annotation": "patch-b", "annotation-key-to-store": ""},
            id="mutate advanced attributes 1",
        ),
    ],
)
def test_update_pod_by_cluster_colocation_profile(
    pod_labels: dict[str, str] | None,
    pod_annotations: dict[str, str] | None,
    spec: dict[str, Any],
    want_labels: dict[str, str],
    want_annotations: dict[str, str],
) -> None:
    before = pod("test-pod-1", pod_labels, annotations=pod_annotations)
    after = mutate(before, profile(spec).resolved)
    assert (after["metadata"]["labels"], after["metadata"]["annotations"]) == (want_labels, want_annotations)
    assert after["spec"] == before["spec"]  # resources are not renamed, the scheduler name is not set


class Cluster:
    """Pods and namespaces as the API server keeps them; the controller's PodApi."""

    def __init__(self, pods: list[dict[str, Any]], namespaces: dict[str, dict[str, str]] | None = None) -> None:
        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        self.namespaces = namespaces or {"default": {}}
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.fail_patch = False

    async def pending_pods(self, label_selector: str) -> Sequence[dict[str, Any]]:
        selector = self._selector(label_selector)
        return [
            copy.deepcopy(p)
            for p in self.pods.values()
            if not p["spec"].get("nodeName")
            and p["status"]["phase"] == "Pending"
            and label_selector_matches(selector, p["metadata"].get("labels") or {})
        ]

    @staticmethod
    def _selector(text: str) -> Any:
        labels = dict(part.split("=", 1) for part in text.split(",") if part)
        return parse_label_selector({"matchLabels": labels})

    async def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return self.namespaces.get(name)

    async def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        if self.fail_patch:
            raise ClusterError("conflict")
        self.patches.append((namespace, name, patch))
        self.pods[(namespace, name)] = _apply(self.pods[(namespace, name)], patch)


def _apply(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _apply(out.get(key), value)
    return out


def test_reconcile_sequence() -> None:
    """``TestReconciler_Reconcile``: a matched pending pod is updated, an unmatched one and a running one are
    not; an update is not repeated for the same profile version; a new version updates again; the rate
    limiter, an absent selector, and a profile no longer managed stop the updates."""
    cluster = Cluster(
        [
            pod("test-pod-1", {"koordinator-colocation-pod": "true"}, uid="xxx"),
            pod("test-pod-2", {"foo": "bar"}, uid="yyy"),
            pod("test-pod-3", {"koordinator-colocation-pod": "true"}, uid="zzz", phase="Running"),
        ]
    )
    now = [0.0]
    controller = ColocationProfileController(
        cluster, clock=lambda: now[0], roll=lambda: 0, options=ControllerOptions(qps=1, burst=5)
    )

    def labels(name: str) -> dict[str, str]:
        return dict(cluster.pods[("default", name)]["metadata"]["labels"])

    first = profile(BASE_SPEC, rv="1")
    summary = asyncio.run(controller.reconcile_profile(first))
    want = {
        "koordinator-colocation-pod": "true",
        "testLabelA": "valueA",
        "test-patch-label": "patch-a",
        "koordinator.sh/qosClass": "BE",
        "koordinator.sh/priority": "1111",
    }
    assert (labels("test-pod-1"), labels("test-pod-2"), labels("test-pod-3")) == (
        want,
        {"foo": "bar"},
        {"koordinator-colocation-pod": "true"},
    )
    assert (summary.desired, summary.succeeded, summary.changed) == (1, 1, 1)

    # The profile changes, but the pod was updated for it already (the cache): nothing happens.
    second = profile({**BASE_SPEC, "labels": {"testLabelA": "valueA", SCHEDULER_NAME: "koordinator-scheduler"}}, rv="2")
    controller.updated["2/xxx"] = now[0]
    assert asyncio.run(controller.reconcile_profile(second)).cached == 1
    assert labels("test-pod-1") == want
    # Once the cache entry is gone, the pod is updated to the new version; again, and nothing changes.
    del controller.updated["2/xxx"]
    asyncio.run(controller.reconcile_profile(second))
    assert labels("test-pod-1") == {**want, SCHEDULER_NAME: "koordinator-scheduler"}
    del controller.updated["2/xxx"]
    patches = len(cluster.patches)
    assert asyncio.run(controller.reconcile_profile(second)).changed == 0
    assert len(cluster.patches) == patches

    # Rate limited: no update.
    third = profile(
        {**BASE_SPEC, "labels": {"testLabelA": "valueA", SCHEDULER_NAME: "koordinator-scheduler-1"}}, rv="3"
    )
    controller.limiter.tokens, controller.limiter.rate = 0.0, 0.0
    assert asyncio.run(controller.reconcile_profile(third)).rate_limited == 1
    assert labels("test-pod-1")[SCHEDULER_NAME] == "koordinator-scheduler"
    controller.limiter.rate = 1.0
    now[0] += 10
    # No selector: nothing. Not managed: nothing.
    no_selector = profile({k: v for k, v in BASE_SPEC.items() if k != "selector"}, rv="4")
    assert asyncio.run(controller.reconcile_profile(no_selector)).desired == 0
    unmanaged = profile(BASE_SPEC, rv="5", managed=False)
    assert asyncio.run(controller.reconcile_profile(unmanaged)).desired == 0
    # ...unless every profile is reconciled (--colocation-profile-reconcile-by-default).
    controller.options = ControllerOptions(reconcile_by_default=True)
    assert asyncio.run(controller.reconcile_profile(unmanaged)).succeeded == 1


@pytest.mark.parametrize(
    ("spec", "namespaces", "want"),
    [
        pytest.param({"labels": {"a": "b"}}, {"test-ns": {}}, [], id="select no pod"),
        pytest.param(
            {"selector": {"matchLabels": {"koordinator-colocation-pod": "true"}}, "labels": {"a": "b"}},
            {"test-ns": {}, "test-ns-dev": {}},
            sorted(["test-ns/test-pod-1", "test-ns-dev/test-pod-3"]),
            id="select matched pods",
        ),
        pytest.param(
            {
                "selector": {"matchLabels": {"koordinator-colocation-pod": "true"}},
                "namespaceSelector": {"matchLabels": {"env": "dev"}},
                "labels": {"a": "b"},
            },
            {"test-ns": {}, "test-ns-dev": {"env": "dev"}},
            ["test-ns-dev/test-pod-3"],
            id="select matched pods with namespace selector",
        ),
        pytest.param(
            {
                "selector": {"matchLabels": {"koordinator-colocation-pod": "true"}},
                "namespaceSelector": {"matchLabels": {"env": "dev"}},
                "labels": {"a": "b"},
            },
            {"test-ns": {}},
            [],
            id="no pods match namespace selector",
        ),
    ],
)
def test_list_pods_for_profile(spec: dict[str, Any], namespaces: dict[str, dict[str, str]], want: list[str]) -> None:
    cluster = Cluster(
        [
            pod("test-pod-1", {"koordinator-colocation-pod": "true"}, namespace="test-ns"),
            pod("test-pod-2", {}, namespace="test-ns"),
            pod("test-pod-3", {"koordinator-colocation-pod": "true"}, namespace="test-ns-dev"),
        ],
        namespaces,
    )
    controller = ColocationProfileController(cluster, roll=lambda: 0)
    asyncio.run(controller.reconcile_profile(profile(spec)))
    assert sorted(f"{ns}/{name}" for ns, name, _ in cluster.patches) == want


def test_probability_zero_skips_every_pod() -> None:
    cluster = Cluster([pod("p", {"koordinator-colocation-pod": "true"})])
    controller = ColocationProfileController(cluster, roll=lambda: 0)
    summary = asyncio.run(controller.reconcile_profile(profile({**BASE_SPEC, "probability": 0})))
    assert (summary.skipped, cluster.patches) == (1, [])


def test_a_failed_patch_is_not_cached_and_is_tried_again() -> None:
    cluster = Cluster([pod("p", {"koordinator-colocation-pod": "true"})])
    cluster.fail_patch = True
    controller = ColocationProfileController(cluster, roll=lambda: 0)
    assert asyncio.run(controller.reconcile_profile(profile(BASE_SPEC))).failed == 1
    cluster.fail_patch = False
    assert asyncio.run(controller.reconcile_profile(profile(BASE_SPEC))).changed == 1


class RaisingCluster(Cluster):
    """Raises an exception nobody foresaw for pod ``bad`` and for the pods of profile ``broken``."""

    async def pending_pods(self, label_selector: str) -> Sequence[dict[str, Any]]:
        if "broken" in label_selector:
            raise RecursionError("maximum recursion depth exceeded")
        return await super().pending_pods(label_selector)

    async def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        if name == "bad":
            raise OverflowError("int too large")
        await super().patch_pod(namespace, name, patch)


def test_a_pod_whose_update_raises_costs_that_pod_only() -> None:
    labels = {"koordinator-colocation-pod": "true"}
    cluster = RaisingCluster([pod("a", labels), pod("bad", labels), pod("c", labels)])
    controller = ColocationProfileController(cluster, roll=lambda: 0)
    summary = asyncio.run(controller.reconcile_profile(profile(BASE_SPEC)))
    assert (summary.failed, summary.changed) == (1, 2)
    assert sorted(name for _, name, _ in cluster.patches) == ["a", "c"]
    assert controller.contained.object_errors.count("Pod", "ReconcileError") == 1


def test_a_profile_whose_round_raises_costs_that_profile_only() -> None:
    cluster = RaisingCluster([pod("a", {"koordinator-colocation-pod": "true"})])
    controller = ColocationProfileController(cluster, roll=lambda: 0)
    broken = profile({**BASE_SPEC, "selector": {"matchLabels": {"broken": "yes"}}}, name="broken")
    for p in (broken, profile(BASE_SPEC)):
        controller.on_object("ClusterColocationProfile", EventType.ADDED, None, p)

    async def one_round() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        for _ in range(100):
            if cluster.patches and controller.contained.failures:
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 5)

    asyncio.run(one_round())
    assert [name for _, name, _ in cluster.patches] == ["a"]
    assert controller.contained.object_errors.count("ClusterColocationProfile", "ReconcileError") == 1


class CountingCluster(Cluster):
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        super().__init__(pods)
        self.lists = 0

    async def pending_pods(self, label_selector: str) -> Sequence[dict[str, Any]]:
        self.lists += 1
        return await super().pending_pods(label_selector)


def test_the_controller_runs_on_the_shared_loop_waits_for_ready_and_resyncs_on_its_interval() -> None:
    """Nothing before ``ready()``; then every profile at once and again each ``interval_seconds`` without an
    event (the ReconcileLoop's resync); a profile event wakes it at once, long before the next interval."""
    cluster = CountingCluster([pod("a", {"koordinator-colocation-pod": "true"})])
    listed = False
    controller = ColocationProfileController(
        cluster, options=ControllerOptions(interval_seconds=0.2), ready=lambda: listed, roll=lambda: 0
    )
    controller.on_object("ClusterColocationProfile", EventType.ADDED, None, profile(BASE_SPEC))

    async def scenario() -> tuple[int, int, int, int]:
        nonlocal listed
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        await asyncio.sleep(0.3)
        before_ready = cluster.lists
        listed = True
        for _ in range(300):  # the ready check runs once a second
            await asyncio.sleep(0.01)
            if cluster.lists >= 2:
                break
        resynced = cluster.lists
        slow = ControllerOptions(interval_seconds=3600.0)
        controller.loop.resync_seconds = controller.loop.idle_seconds = slow.interval_seconds
        await asyncio.sleep(0.3)  # the wait begun before the change may still end with one more pass
        settled = cluster.lists
        controller.on_object("ClusterColocationProfile", EventType.MODIFIED, None, profile(BASE_SPEC, rv="2"))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if cluster.lists > settled:
                break
        woken = cluster.lists - settled
        stop.set()
        await asyncio.wait_for(task, 5)
        return before_ready, resynced, woken, controller.loop.failures

    before_ready, resynced, woken, failures = asyncio.run(scenario())
    assert before_ready == 0
    assert resynced >= 2
    assert woken == 1
    assert failures == 0
    assert controller.loop.passes >= 3


def test_events_keep_the_managed_profiles() -> None:
    controller = ColocationProfileController(Cluster([]))
    p = profile(BASE_SPEC)
    controller.on_object("ClusterColocationProfile", EventType.ADDED, None, p)
    assert (controller.profiles, controller.dirty) == ({"test-profile": p}, {"test-profile"})
    controller.on_object("ClusterColocationProfile", EventType.DELETED, p, None)
    assert controller.profiles == {}


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        (
            {
                "matchExpressions": [
                    {"key": "k", "operator": "In", "values": ["x", "y"]},
                    {"key": "n", "operator": "NotIn", "values": ["z"]},
                    {"key": "e", "operator": "Exists"},
                    {"key": "d", "operator": "DoesNotExist"},
                ]
            },
            "k in (x,y),n notin (z),e,!d",
        ),
        ({}, ""),
    ],
)
def test_selector_string(selector: dict[str, Any], want: str) -> None:
    assert selector_string(parse_label_selector(selector)) == want


def test_merge_patch() -> None:
    old = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": [1]}}
    new = {"metadata": {"labels": {"a": "1", "c": "3"}}, "spec": {"x": [2]}}
    assert merge_patch(old, new) == {"metadata": {"labels": {"b": None, "c": "3"}}, "spec": {"x": [2]}}
    assert merge_patch(old, old) is None
