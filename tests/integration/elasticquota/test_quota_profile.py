"""The quotaprofile controller against the real API server: Koordinator's profile controller tests
(tests/fixtures/koordinator_quota_profile_cases.py) over two node pools of kwok nodes (a third node, not
Ready, outside kwok), each case's quota compared with what Koordinator's test expects; then a node joins a
pool and the pool's quota follows."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

from apis.core.parse import parse_resource_list
from koord_scheduler.scheduler.controllers.quotaprofile import fnv1a_64
from tests.fixtures.koordinator_quota_profile_cases import CASES, NODES, PREFIX, ZONE, ProfileCase, resources

pytestmark = pytest.mark.integration

QUOTAS = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{ns}/elasticquotas"
PROFILES = "/apis/quota.koordinator.sh/v1alpha1/namespaces/{ns}/elasticquotaprofiles"


def node_body(name: str, zone: str, *, ready: bool, allocatable: dict[str, str]) -> dict[str, Any]:
    """A kwok node (kwok keeps it Ready and its allocatable as given), or, not ready, a node kwok leaves alone."""
    meta: dict[str, Any] = {"name": name, "labels": {ZONE: zone}}
    if ready:
        meta["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def profile_body(case: ProfileCase, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"quotaName": case.quota_name, "nodeSelector": {"matchLabels": {ZONE: case.zone}}}
    if case.quota_labels:
        spec["quotaLabels"] = case.quota_labels
    if case.resource_ratio is not None:
        spec["resourceRatio"] = case.resource_ratio
    return {
        "apiVersion": "quota.koordinator.sh/v1alpha1",
        "kind": "ElasticQuotaProfile",
        "metadata": {
            "name": case.name,
            "namespace": namespace,
            "labels": case.profile_labels,
            "annotations": case.profile_annotations,
        },
        "spec": spec,
    }


def view(quota: dict[str, Any]) -> tuple[object, ...]:
    annotations = quota["metadata"].get("annotations", {})
    return (
        parse_resource_list(quota.get("spec", {}).get("min", {})),
        parse_resource_list(json.loads(annotations.get(PREFIX + "total-resource", "{}"))),
        parse_resource_list(json.loads(annotations.get(PREFIX + "unschedulable-resource", "{}"))),
        quota["metadata"].get("labels", {}),
    )


def wanted(case: ProfileCase, namespace: str) -> tuple[object, ...]:
    tree = str(fnv1a_64(f"{namespace}/{case.name}"))
    labels = {k: tree if v == f"TREE({case.name})" else v for k, v in case.want_labels.items()}
    return (
        parse_resource_list(case.want_min),
        parse_resource_list(case.want_total),
        parse_resource_list(case.want_unschedulable),
        labels,
    )


def test_profiles_make_the_pool_quotas_and_follow_a_joining_node(control_plane: Any, tmp_path: Path) -> None:
    scope = Scope.create(control_plane, "eqp")
    ns = scope.namespace
    for fact in NODES:
        scope.add_node_body(node_body(f"{ns}-{fact.name}", fact.zone, ready=fact.ready, allocatable=fact.allocatable))
    scheduler = SchedulerProcess.start(
        control_plane,
        scheduler_config(scope),
        tmp_path,
        wait_ready=False,
        extra_args=("--scheduling=false", "--controllers=quotaprofile"),
    )
    failures: list[tuple[object, ...]] = []
    try:
        for case in CASES:
            quota_path = QUOTAS.format(ns=ns) + f"/{case.quota_name}"
            if case.existing_quota is not None:
                scope.ok(
                    "POST",
                    QUOTAS.format(ns=ns),
                    {
                        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                        "kind": "ElasticQuota",
                        "metadata": {"name": case.quota_name, "namespace": ns, "labels": case.existing_quota["labels"]},
                        "spec": {"min": case.existing_quota["min"]},
                    },
                )
            scope.ok("POST", PROFILES.format(ns=ns), profile_body(case, ns))
            want = wanted(case, ns)
            got: list[tuple[object, ...]] = []

            def done(path: str = quota_path, want: tuple[object, ...] = want, got: list[Any] = got) -> bool:
                assert scheduler.alive, scheduler.log_tail()
                result = control_plane.request("GET", path)
                got[:] = [view(result.json())] if result.status == 200 else []
                return got == [want]

            try:
                wait_until(done, timeout=30, what=f"the quota of case {case.id!r}")
            except AssertionError:
                failures.append((case.id, got, want))
            stored = scope.ok("GET", PROFILES.format(ns=ns) + f"/{case.name}")
            if stored["metadata"]["labels"].get(PREFIX + "tree-id") != want[3][PREFIX + "tree-id"]:  # type: ignore[index]
                failures.append((case.id, "profile tree-id label", stored["metadata"]["labels"]))
            # The profile first (the controller would put its quota back), then the quota.
            scope.ok("DELETE", PROFILES.format(ns=ns) + f"/{case.name}")
            time.sleep(1)
            scope.ok("DELETE", quota_path)
        assert failures == []

        # A pool of one ready node and one that is not; a ready node joins and the quota follows it.
        first = CASES[0]
        scope.ok("POST", PROFILES.format(ns=ns), profile_body(first, ns))
        quota_path = QUOTAS.format(ns=ns) + f"/{first.quota_name}"
        wait_until(lambda: control_plane.request("GET", quota_path).status == 200, timeout=30, what="the quota")
        scope.add_node_body(node_body(f"{ns}-node4", first.zone, ready=True, allocatable=resources(10, 1000, 1000)))

        def followed() -> bool:
            minimum = view(scope.ok("GET", quota_path))[0]
            return minimum == parse_resource_list(resources(30, 3000))

        wait_until(followed, timeout=30, what="the quota to follow the joining node")
        total = view(scope.ok("GET", quota_path))[1]
        assert total == parse_resource_list(resources(30, 3000, 3000))
    finally:
        scheduler.terminate()
        control_plane.request("DELETE", PROFILES.format(ns=ns))
        control_plane.request("DELETE", QUOTAS.format(ns=ns))
        scope.cleanup()
