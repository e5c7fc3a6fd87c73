"""ElasticQuota against the real API server: Koordinator's capacity-scheduling manual (quick start by
label and by namespace) as written, and a three-level tree where a quota borrows its sibling's idle min
and gives it back, by preemption, when the lender's pods arrive."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CRD = REPO / "deploy" / "crds" / "scheduling.sigs.k8s.io_elasticquotas.yaml"
GROUP_PATH = "/apis/scheduling.sigs.k8s.io/v1alpha1"
PLUGINS = {
    "preFilter": {"enabled": [{"name": "ElasticQuota"}]},
    "postFilter": {"disabled": [{"name": "*"}], "enabled": [{"name": "ElasticQuota"}]},
    "reserve": {"enabled": [{"name": "ElasticQuota"}]},
}
PREFIX = "quota.scheduling.koordinator.sh/"


def install_crd(plane: Any) -> None:
    doc = next(d for d in yaml.safe_load_all(CRD.read_text()) if d)
    result = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    assert result.status in (201, 409), result.body[:300]
    wait_until(
        lambda: plane.request("GET", f"{GROUP_PATH}/elasticquotas").status == 200,
        timeout=30,
        what="ElasticQuota CRD served",
    )


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    install_crd(control_plane)
    s = Scope.create(control_plane, "quota")
    yield s
    control_plane.request("DELETE", f"{GROUP_PATH}/namespaces/{s.namespace}/elasticquotas")
    s.cleanup()


def quota_body(
    scope: Scope, name: str, *, min_: dict[str, Any], max_: dict[str, Any], parent: str = "", is_parent: bool = False
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": scope.namespace,
            "labels": {PREFIX + "parent": parent, PREFIX + "is-parent": "true" if is_parent else "false"},
        },
        "spec": {"max": max_, "min": min_},
    }


def create_quota(scope: Scope, body: dict[str, Any]) -> None:
    scope.ok("POST", f"{GROUP_PATH}/namespaces/{scope.namespace}/elasticquotas", body)


def get_quota(scope: Scope, name: str) -> dict[str, Any]:
    quota: dict[str, Any] = scope.ok("GET", f"{GROUP_PATH}/namespaces/{scope.namespace}/elasticquotas/{name}")
    return quota


def kwok_node(scope: Scope, name: str, *, cpu: str) -> str:
    """A kwok-managed node: bound pods run, and a deleted pod really goes away."""
    body = scope.node_body(f"{scope.name}-{name}", cpu=cpu, memory="16Gi")
    body["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    return scope.add_node_body(body)


def quota_pod(scope: Scope, name: str, *, cpu: str, memory: str = "100Mi", quota: str = "") -> dict[str, Any]:
    body = scope.pod_body(name, cpu=cpu, memory=memory)
    body["spec"]["terminationGracePeriodSeconds"] = 0
    if quota:
        body["metadata"]["labels"] = {PREFIX + "name": quota}
    return body


def start(scope: Scope, tmp_path: Path) -> SchedulerProcess:
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    return SchedulerProcess.start(scope.plane, config, tmp_path, extra_args=("--controllers=elasticquota",))


def shows(scope: Scope, name: str, want: dict[str, str]) -> bool:
    quota = get_quota(scope, name)
    annotations = quota["metadata"].get("annotations", {})
    got = {
        "request": json.loads(annotations.get(PREFIX + "request", "{}")),
        "runtime": json.loads(annotations.get(PREFIX + "runtime", "{}")),
        "used": quota.get("status", {}).get("used", {}),
    }
    return got == {"request": want, "runtime": want, "used": want}


def test_capacity_scheduling_manual_quick_start(scope: Scope, tmp_path: Path) -> None:
    """The manual's quota-example (max cpu 40 / 40Gi, min cpu 10 / 20Mi) and pod-example (40m / 40Mi):
    by label, then by namespace (a quota named like the namespace needs no pod label)."""
    kwok_node(scope, "n1", cpu="8")
    min_: dict[str, Any] = {"cpu": 10, "memory": "20Mi"}
    max_: dict[str, Any] = {"cpu": 40, "memory": "40Gi"}
    by_label = f"{scope.namespace}-example"
    create_quota(scope, quota_body(scope, by_label, min_=min_, max_=max_))
    create_quota(scope, quota_body(scope, scope.namespace, min_=min_, max_=max_))
    proc = start(scope, tmp_path)
    try:
        scope.add_pods([quota_pod(scope, "pod-example", cpu="40m", memory="40Mi", quota=by_label)])
        scope.wait_all_bound(1, timeout=60)
        want = {"cpu": "40m", "memory": "40Mi"}
        wait_until(lambda: shows(scope, by_label, want), timeout=30, what="quota-example annotations and used")
        scope.add_pods([quota_pod(scope, "pod-example-ns", cpu="40m", memory="40Mi")])
        scope.wait_all_bound(2, timeout=60)
        wait_until(lambda: shows(scope, scope.namespace, want), timeout=30, what="namespace quota shows the pod")
        assert shows(scope, by_label, want)

        # An invalid quota (min above max) is skipped and reported on itself; scheduling goes on.
        bad = f"{scope.namespace}-bad"
        create_quota(scope, quota_body(scope, bad, min_={"cpu": 4}, max_={"cpu": 2}))
        wait_until(lambda: bool(scope.events(reason="InvalidQuotaTree")), timeout=30, what="InvalidQuotaTree event")
        event = scope.events(reason="InvalidQuotaTree")[0]
        assert (event["type"], event["regarding"]["kind"], event["regarding"]["name"]) == (
            "Warning",
            "ElasticQuota",
            bad,
        )
        assert event["note"] == "spec.min.cpu (4) is above spec.max.cpu (2)"
        scope.add_pods([quota_pod(scope, "in-bad-quota", cpu="40m", quota=bad)])
        scope.wait_all_bound(3, timeout=60)
    except AssertionError:
        print(proc.log_tail())
        raise
    finally:
        proc.terminate()


def test_three_level_tree_borrowing_then_lender_reclaims_its_min(scope: Scope, tmp_path: Path) -> None:
    """G (min=max 10) > P (min=max 10) > A (min 6) and B (min 4), both max 10, one 10-cpu node.
    B runs 4 pods x 2 cpu, borrowing A's idle min. A's 3 pods x 2 cpu arrive: A's runtime rises to 6,
    B's falls to 4, and B's pods are preempted until A holds its min: A used 6, B used 4."""
    kwok_node(scope, "n1", cpu="10")
    g, p, a, b = (f"{scope.namespace}-{n}" for n in ("g", "p", "a", "b"))
    create_quota(scope, quota_body(scope, g, min_={"cpu": 10}, max_={"cpu": 10}, is_parent=True))
    create_quota(scope, quota_body(scope, p, min_={"cpu": 10}, max_={"cpu": 10}, parent=g, is_parent=True))
    create_quota(scope, quota_body(scope, a, min_={"cpu": 6}, max_={"cpu": 10}, parent=p))
    create_quota(scope, quota_body(scope, b, min_={"cpu": 4}, max_={"cpu": 10}, parent=p))
    proc = start(scope, tmp_path)
    try:
        scope.add_pods(quota_pod(scope, f"b-{i}", cpu="2", quota=b) for i in range(4))
        scope.wait_all_bound(4, timeout=60)
        wait_until(
            lambda: get_quota(scope, b).get("status", {}).get("used") == {"cpu": "8"},
            timeout=30,
            what="B shows used cpu 8 (borrowing 4)",
        )
        scope.add_pods(quota_pod(scope, f"a-{i}", cpu="2", quota=a) for i in range(3))

        def settled() -> bool:
            pods = scope.pods()
            a_bound = [x for x in pods if x["metadata"]["name"].startswith("a-") and x["spec"].get("nodeName")]
            b_left = [x for x in pods if x["metadata"]["name"].startswith("b-")]
            return len(a_bound) == 3 and len(b_left) == 2

        wait_until(settled, timeout=90, interval=0.5, what="A's 3 pods bound after reclaiming from B")
        wait_until(
            lambda: (
                get_quota(scope, a).get("status", {}).get("used") == {"cpu": "6"}
                and get_quota(scope, b).get("status", {}).get("used") == {"cpu": "4"}
            ),
            timeout=30,
            what="A used 6, B used 4",
        )
        runtime_b = json.loads(get_quota(scope, b)["metadata"]["annotations"][PREFIX + "runtime"])
        assert runtime_b == {"cpu": "4"}
        assert len(scope.events(reason="Preempted")) >= 2
        scope.assert_within_capacity(scope.pods())
    except AssertionError:
        print(proc.log_tail())
        raise
    finally:
        proc.terminate()


def test_built_in_quotas_are_created_in_quota_group_namespace(scope: Scope, tmp_path: Path) -> None:
    """Koordinator's plugin creates root, system and default quotas in ``quotaGroupNamespace`` when missing;
    here the leader's elasticquota controller does (the namespace is this test's, so cleanup removes them)."""
    config = scheduler_config(scope)
    config["profiles"][0]["plugins"] = PLUGINS
    config["profiles"][0]["pluginConfig"] = [
        {"name": "ElasticQuota", "args": {"quotaGroupNamespace": scope.namespace, "defaultQuotaGroupMax": {"cpu": 8}}}
    ]
    proc = SchedulerProcess.start(scope.plane, config, tmp_path, extra_args=("--controllers=elasticquota",))
    names = ("koordinator-root-quota", "koordinator-system-quota", "koordinator-default-quota")
    path = f"{GROUP_PATH}/namespaces/{scope.namespace}/elasticquotas"
    try:
        wait_until(
            lambda: all(scope.plane.request("GET", f"{path}/{n}").status == 200 for n in names),
            timeout=60,
            what="built-in quotas created",
        )
        root = get_quota(scope, "koordinator-root-quota")
        assert root["metadata"]["labels"][PREFIX + "is-parent"] == "true"
        assert get_quota(scope, "koordinator-default-quota")["spec"]["max"] == {"cpu": "8"}
    except AssertionError:
        print(proc.log_tail())
        raise
    finally:
        proc.terminate()
