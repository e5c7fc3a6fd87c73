"""The elasticquota status controller: annotations and status.used as Koordinator writes them."""

from __future__ import annotations

import json

from apis.core.parse import parse_node, parse_pod
from apis.scheduling.elasticquota import parse_elastic_quota
from koord_scheduler.controllers.api import MemoryControllerApi
from koord_scheduler.controllers.quota_status import QuotaStatusController
from koord_scheduler.framework.types import EventType
from kubeapi.http import ApiError

BUILTINS = ("koordinator-root-quota", "koordinator-system-quota", "koordinator-default-quota")


def status_only(api: MemoryControllerApi) -> QuotaStatusController:
    """A controller whose built-in quotas already exist (these tests look at status writes only)."""
    controller = QuotaStatusController(api)
    controller.builtins_present.update(BUILTINS)
    return controller


QUOTA_EXAMPLE = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "ElasticQuota",
    "metadata": {
        "name": "quota-example",
        "namespace": "default",
        "labels": {"quota.scheduling.koordinator.sh/parent": "", "quota.scheduling.koordinator.sh/is-parent": "false"},
    },
    "spec": {"max": {"cpu": 40, "memory": "40Gi"}, "min": {"cpu": 10, "memory": "20Mi"}},
}


def pod_example(node_name: str = "") -> dict[str, object]:
    spec: dict[str, object] = {
        "schedulerName": "koord-scheduler",
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "40m", "memory": "40Mi"}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pod-example",
            "namespace": "default",
            "labels": {"quota.scheduling.koordinator.sh/name": "quota-example"},
        },
        "spec": spec,
    }


async def test_capacity_scheduling_manual_quota_example_annotations_and_used() -> None:
    api = MemoryControllerApi()
    controller = status_only(api)
    node = parse_node({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}})
    controller.on_node(EventType.ADDED, None, node)
    quota = parse_elastic_quota(QUOTA_EXAMPLE)
    controller.on_object("ElasticQuota", EventType.ADDED, None, quota)
    controller.on_pod(EventType.ADDED, None, parse_pod(pod_example("n1")))
    await controller.sync()
    assert len(api.writes) == 1
    write = api.writes[0]
    assert (write.verb, write.path) == (
        "PATCH",
        "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/default/elasticquotas/quota-example",
    )
    annotations = write.body["metadata"]["annotations"]
    assert json.loads(annotations["quota.scheduling.koordinator.sh/request"]) == {"cpu": "40m", "memory": "40Mi"}
    assert json.loads(annotations["quota.scheduling.koordinator.sh/runtime"]) == {"cpu": "40m", "memory": "40Mi"}
    assert write.body["status"] == {"used": {"cpu": "40m", "memory": "40Mi"}}

    await controller.sync()
    assert len(api.writes) == 1, "the same values are not sent again before the watch echoes them"

    echoed = dict(QUOTA_EXAMPLE)
    echoed["metadata"] = {**QUOTA_EXAMPLE["metadata"], "annotations": annotations}  # type: ignore[dict-item]
    echoed["status"] = write.body["status"]
    controller.on_object("ElasticQuota", EventType.MODIFIED, quota, parse_elastic_quota(echoed))
    await controller.sync()
    assert len(api.writes) == 1, "the echo shows the wanted values"

    overwritten = {**echoed, "status": {"used": {"cpu": "1"}}}
    controller.on_object("ElasticQuota", EventType.MODIFIED, quota, parse_elastic_quota(overwritten))
    await controller.sync()
    assert api.writes[-1].body["status"] == {"used": {"cpu": "40m", "memory": "40Mi"}}, (
        "someone else's value is corrected"
    )

    controller.on_pod(EventType.DELETED, parse_pod(pod_example("n1")), None)
    await controller.sync()
    assert api.writes[-1].body["status"] == {"used": {"cpu": "0", "memory": "0"}}
    assert api.writes[-1].body["metadata"]["annotations"]["quota.scheduling.koordinator.sh/runtime"] == "{}"


async def test_invalid_quota_is_left_alone() -> None:
    api = MemoryControllerApi()
    controller = status_only(api)
    bad = {**QUOTA_EXAMPLE, "spec": {"min": {"cpu": 50}, "max": {"cpu": 40}}}
    controller.on_object("ElasticQuota", EventType.ADDED, None, parse_elastic_quota(bad))
    await controller.sync()
    assert api.writes == []


async def test_missing_builtin_quotas_are_created_in_quota_group_namespace_once() -> None:
    from apis.config.elasticquota_args import ElasticQuotaArgs

    api = MemoryControllerApi()
    args = ElasticQuotaArgs.model_validate({"quotaGroupNamespace": "quotas", "defaultQuotaGroupMax": {"cpu": "8"}})
    controller = QuotaStatusController(api, args=args)
    system = {
        "metadata": {"name": "koordinator-system-quota", "namespace": "quotas"},
        "spec": {"max": {"cpu": "2"}},
    }
    controller.on_object("ElasticQuota", EventType.ADDED, None, parse_elastic_quota(system))
    await controller.sync()
    created = {w.body["metadata"]["name"]: w for w in api.writes}
    assert sorted(created) == ["koordinator-default-quota", "koordinator-root-quota"], "system exists already"
    for write in created.values():
        assert (write.verb, write.path) == (
            "POST",
            "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/quotas/elasticquotas",
        )
        assert write.body["metadata"]["namespace"] == "quotas"
    assert created["koordinator-default-quota"].body["spec"] == {"max": {"cpu": "8"}}
    assert created["koordinator-root-quota"].body["metadata"]["labels"] == {
        "quota.scheduling.koordinator.sh/is-parent": "true",
        "quota.scheduling.koordinator.sh/allow-lent-resource": "false",
        "quota.scheduling.koordinator.sh/parent": "",
    }
    await controller.sync()
    assert len(api.writes) == 2, "created once, not again before the watch shows them"


async def test_builtin_quota_in_another_namespace_does_not_count_and_conflict_means_present() -> None:
    api = MemoryControllerApi()
    controller = QuotaStatusController(api)  # quotaGroupNamespace: koordinator-system
    elsewhere = {"metadata": {"name": "koordinator-default-quota", "namespace": "default"}, "spec": {}}
    controller.on_object("ElasticQuota", EventType.ADDED, None, parse_elastic_quota(elsewhere))
    assert "koordinator-system/koordinator-default-quota" in {w.node for w in controller.missing_builtins()}
    path = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/koordinator-system/elasticquotas"
    api.fail[path] = ApiError(409, "AlreadyExists", "exists", method="POST", path=path)
    await controller.sync()
    assert api.writes == []
    assert controller.builtins_present == set(BUILTINS)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def over_used_pod(name: str, cpu: str, priority: int, created: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "creationTimestamp": created,
            "labels": {"quota.scheduling.koordinator.sh/name": "q"},
        },
        "spec": {
            "nodeName": "n1",
            "priority": priority,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


async def test_over_use_revoke_evicts_after_delay_evict_time() -> None:
    from apis.config.elasticquota_args import ElasticQuotaArgs

    api = MemoryControllerApi()
    clock = Clock()
    args = ElasticQuotaArgs.model_validate({"monitorAllQuotas": True, "delayEvictTime": "60s"})
    controller = QuotaStatusController(api, args=args, clock=clock)
    controller.builtins_present.update(BUILTINS)
    controller.on_node(
        EventType.ADDED, None, parse_node({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "100"}}})
    )
    q = {"metadata": {"name": "q", "namespace": "team"}, "spec": {"min": {"cpu": "3"}, "max": {"cpu": "3"}}}
    controller.on_object("ElasticQuota", EventType.ADDED, None, parse_elastic_quota(q))
    controller.on_pod(EventType.ADDED, None, parse_pod(over_used_pod("old", "2", 5, "2026-01-01T00:00:00Z")))
    controller.on_pod(EventType.ADDED, None, parse_pod(over_used_pod("new", "2", 5, "2026-01-02T00:00:00Z")))
    controller.on_pod(EventType.ADDED, None, parse_pod(over_used_pod("low", "1", 1, "2026-01-01T00:00:00Z")))
    evictions = lambda: [w for w in api.writes if w.note == "revoke"]  # noqa: E731
    await controller.sync()
    assert evictions() == [], "used 5 > runtime 3, but not yet for 60 s"
    clock.now += 61
    await controller.sync()
    assert [(w.verb, w.path) for w in evictions()] == [
        ("POST", "/api/v1/namespaces/team/pods/new/eviction"),
    ], "low (1 cpu) is taken first but given back; new (2 cpu, started last) goes"
    assert evictions()[0].body["kind"] == "Eviction"
    clock.now += 1
    await controller.sync()
    assert len(evictions()) == 1, "the clock restarted: no second eviction before another 60 s"


async def test_revoke_is_off_by_default() -> None:
    controller = QuotaStatusController(MemoryControllerApi())
    assert not controller.revoking and controller.decide_revocations(10**9) == []


async def test_runtime_annotation_follows_each_tree_budget() -> None:
    api = MemoryControllerApi()
    controller = status_only(api)
    controller.on_node(
        EventType.ADDED, None, parse_node({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "30"}}})
    )
    prefix = "quota.scheduling.koordinator.sh/"
    tree_root = {
        "metadata": {
            "name": "t1-root",
            "namespace": "team",
            "labels": {prefix + "tree-id": "t1", prefix + "is-root": "true", prefix + "is-parent": "true"},
            "annotations": {prefix + "total-resource": '{"cpu": "10"}'},
        },
        "spec": {"max": {"cpu": "100"}},
    }
    leaves = [
        {"metadata": {"name": "a", "namespace": "team"}, "spec": {"max": {"cpu": "100"}}},
        {
            "metadata": {"name": "t1-a", "namespace": "team", "labels": {prefix + "parent": "t1-root"}},
            "spec": {"max": {"cpu": "100"}},
        },
    ]
    for obj in (tree_root, *leaves):
        controller.on_object("ElasticQuota", EventType.ADDED, None, parse_elastic_quota(obj))
    for name in ("a", "t1-a"):
        pod = over_used_pod(f"p-{name}", "50", 0, "2026-01-01T00:00:00Z")
        pod["metadata"]["labels"] = {prefix + "name": name}  # type: ignore[index]
        del pod["spec"]["nodeName"]  # type: ignore[attr-defined]
        controller.on_pod(EventType.ADDED, None, parse_pod(pod))
    await controller.sync()
    runtime = {
        w.node: json.loads(w.body["metadata"]["annotations"][prefix + "runtime"])
        for w in api.writes
        if w.verb == "PATCH"
    }
    assert runtime["team/a"] == {"cpu": "20"}, "30 in the cluster less tree t1's 10"
    assert runtime["team/t1-a"] == {"cpu": "10"}, "t1-a has no tree-id: it is in its parent's tree t1"
