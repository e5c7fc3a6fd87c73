"""The colocationprofile controller against the real API server: ``koord-scheduler --scheduling=false
--controllers=colocationprofile`` gives a pending pod that a managed ClusterColocationProfile selects the
profile's labels, annotations, QoS class, priority label and patch (Koordinator's ``TestReconciler_Reconcile``
profile); a pod the profile does not select, a pod already on a node, and the pods of a profile without the
``controller-managed`` label are left as they are."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

PROFILES = "/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles"
PATCH = {"metadata": {"labels": {"test-patch-label": "patch-a"}, "annotations": {"test-patch-annotation": "patch-b"}}}


def profile(name: str, selector_value: str, *, managed: bool) -> dict[str, Any]:
    labels = {"config.koordinator.sh/controller-managed": "true"} if managed else {}
    return {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"koordinator-colocation-pod": selector_value}},
            "labels": {"testLabelA": "valueA"},
            "annotations": {"testAnnotationA": "valueA"},
            "qosClass": "BE",
            "koordinatorPriority": 1111,
            "patch": PATCH,
        },
    }


def pod(scope: Scope, name: str, labels: dict[str, str], *, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": scope.namespace, "labels": labels},
        "spec": spec,
    }


def test_managed_profile_updates_the_pending_pods_it_selects(control_plane: Any, tmp_path: Path) -> None:
    scope = Scope.create(control_plane, "ccp")
    value = scope.name
    managed, unmanaged = f"{value}-managed", f"{value}-unmanaged"
    pods_path = f"/api/v1/namespaces/{scope.namespace}/pods"
    scope.ok("POST", pods_path, pod(scope, "matched", {"koordinator-colocation-pod": value}))
    scope.ok("POST", pods_path, pod(scope, "unmatched", {"foo": "bar"}))
    scope.ok("POST", pods_path, pod(scope, "on-a-node", {"koordinator-colocation-pod": value}, node="kwok-node-0"))
    scope.ok("POST", pods_path, pod(scope, "of-unmanaged", {"koordinator-colocation-pod": f"{value}-u"}))
    scope.ok("POST", PROFILES, profile(managed, value, managed=True))
    scope.ok("POST", PROFILES, profile(unmanaged, f"{value}-u", managed=False))
    scheduler = SchedulerProcess.start(
        control_plane,
        scheduler_config(scope),
        tmp_path,
        wait_ready=False,
        extra_args=("--scheduling=false", "--controllers=colocationprofile"),
    )
    try:

        def meta(name: str) -> dict[str, Any]:
            got: dict[str, Any] = scope.ok("GET", f"{pods_path}/{name}")["metadata"]
            return got

        want_labels = {
            "koordinator-colocation-pod": value,
            "testLabelA": "valueA",
            "test-patch-label": "patch-a",
            "koordinator.sh/qosClass": "BE",
            "koordinator.sh/priority": "1111",
        }
        wait_until(
            lambda: meta("matched").get("labels") == want_labels or not scheduler.alive,
            timeout=60,
            what="the matched pod updated",
        )
        assert scheduler.alive, scheduler.log_tail()
        assert meta("matched")["annotations"] == {"testAnnotationA": "valueA", "test-patch-annotation": "patch-b"}
        time.sleep(2)  # both profiles had their round by now
        assert meta("unmatched")["labels"] == {"foo": "bar"}
        assert meta("on-a-node")["labels"] == {"koordinator-colocation-pod": value}
        assert meta("of-unmanaged")["labels"] == {"koordinator-colocation-pod": f"{value}-u"}
    finally:
        scheduler.terminate()
        for name in (managed, unmanaged):
            control_plane.request("DELETE", f"{PROFILES}/{name}")
        scope.cleanup()
