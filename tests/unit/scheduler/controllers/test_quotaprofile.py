"""The quotaprofile controller: Koordinator's profile controller tests (tests/fixtures/
koordinator_quota_profile_cases.py) through :func:`decide_quota`, and the controller's event handling."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from apis.core.parse import parse_node, parse_resource_list
from apis.core.quantity import to_amount
from apis.quota import parse_quota_profile
from apis.scheduling.elasticquota import parse_elastic_quota
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.types import EventType
from koord_scheduler.scheduler.controllers import quotaprofile
from koord_scheduler.scheduler.controllers.decide import Write
from koord_scheduler.scheduler.controllers.quotaprofile import (
    MAX_QUOTA,
    QuotaProfileController,
    decide_quota,
    decide_tree_id,
    fnv1a_64,
    multiply,
    quantity_text,
    resource_ratio,
    tree_id_of,
)
from kubeapi.http import ApiError
from tests.fixtures.koordinator_quota_profile_cases import CASES, MULTIPLY_CASES, NODES, PREFIX, ZONE, ProfileCase

NAMESPACE = "team"


def node(name: str, zone: str, *, ready: bool = True, allocatable: dict[str, str] | None = None) -> Any:
    return parse_node(
        {
            "metadata": {"name": name, "labels": {ZONE: zone}},
            "status": {
                "allocatable": allocatable or {"cpu": "10", "memory": "1000"},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
    )


def nodes() -> list[Any]:
    return [node(n.name, n.zone, ready=n.ready, allocatable=n.allocatable) for n in NODES]


def profile(case: ProfileCase, namespace: str = NAMESPACE) -> Any:
    spec: dict[str, Any] = {"quotaName": case.quota_name, "nodeSelector": {"matchLabels": {ZONE: case.zone}}}
    if case.quota_labels:
        spec["quotaLabels"] = case.quota_labels
    if case.resource_ratio is not None:
        spec["resourceRatio"] = case.resource_ratio
    return parse_quota_profile(
        {
            "metadata": {
                "name": case.name,
                "namespace": namespace,
                "labels": case.profile_labels,
                "annotations": case.profile_annotations,
            },
            "spec": spec,
        }
    )


def stored_quota(case: ProfileCase) -> dict[str, Any] | None:
    if case.existing_quota is None:
        return None
    return {
        "metadata": {"name": case.quota_name, "namespace": NAMESPACE, "labels": case.existing_quota["labels"]},
        "spec": {"min": case.existing_quota["min"]},
    }


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def want_labels(case: ProfileCase, namespace: str = NAMESPACE) -> dict[str, str]:
    tree = str(fnv1a_64(f"{namespace}/{case.name}"))
    return {k: tree if v == f"TREE({case.name})" else v for k, v in case.want_labels.items()}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_koordinator_profile_table(case: ProfileCase) -> None:
    raw = stored_quota(case)
    writes = decide_quota(profile(case), nodes(), parse_elastic_quota(raw) if raw is not None else None)
    assert [w.verb for w in writes] == ["POST" if raw is None else "PATCH"]
    quota = writes[0].body if raw is None else merge(raw, writes[0].body)
    annotations = quota["metadata"]["annotations"]
    got = (
        parse_resource_list(quota["spec"]["min"]),
        parse_resource_list(json.loads(annotations[PREFIX + "total-resource"])),
        parse_resource_list(json.loads(annotations[PREFIX + "unschedulable-resource"])),
        quota["metadata"]["labels"],
    )
    want = (
        parse_resource_list(case.want_min),
        parse_resource_list(case.want_total),
        parse_resource_list(case.want_unschedulable),
        want_labels(case),
    )
    assert got == want
    assert parse_resource_list(quota["spec"]["max"]) == {
        k: MAX_QUOTA * (1000 if k == "cpu" else 1) for k in quota["spec"]["min"]
    }


@pytest.mark.parametrize(
    ("resource", "value", "ratio", "want"), [pytest.param(r, v, x, w, id=i) for i, r, v, x, w in MULTIPLY_CASES]
)
def test_multiply_quantity(resource: str, value: str, ratio: float, want: str) -> None:
    assert multiply(resource, to_amount(resource, value), ratio) == to_amount(resource, want)


def test_fnv1a_64_matches_the_reference_vectors() -> None:
    assert fnv1a_64("") == 0xCBF29CE484222325
    assert fnv1a_64("a") == 0xAF63DC4C8601EC8C
    assert fnv1a_64("foobar") == 0x85944171F73967E8


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0.9", 0.9),
        ("1", 1.0),
        ("0", 1.0),
        ("1.5", 1.0),
        ("-0.5", 1.0),
        ("abc", 1.0),
        (" 0.9", 1.0),
        (None, 1.0),
        (".5", 0.5),
        ("5e-1", 0.5),
    ],
)
def test_resource_ratio(text: str | None, want: float) -> None:
    assert resource_ratio(text) == want


@pytest.mark.parametrize(
    ("resource", "amount", "want"),
    [
        ("cpu", 20000, "20"),
        ("cpu", 1500, "1500m"),
        ("memory", 2000, "2k"),
        ("memory", 17179869184, "16Gi"),
        ("memory", 1800, "1800"),
        ("pods", 220, "220"),
        ("hugepages-2Mi", 4194304, "4Mi"),
    ],
)
def test_quantity_text_is_gos_canonical_form(resource: str, amount: int, want: str) -> None:
    assert quantity_text(resource, amount) == want


def test_profile_without_tree_id_gets_the_hash_written_back() -> None:
    p = profile(CASES[0])
    [write] = decide_tree_id(p)
    assert (write.verb, write.path, write.body) == (
        "PATCH",
        f"/apis/quota.koordinator.sh/v1alpha1/namespaces/{NAMESPACE}/elasticquotaprofiles/profile1",
        {"metadata": {"labels": {PREFIX + "tree-id": tree_id_of(p)}}},
    )
    assert decide_tree_id(profile(CASES[5])) == []  # labelled: kept


def test_a_resource_the_quota_no_longer_names_is_removed() -> None:
    case = CASES[6]  # resource-keys ["cpu"]
    raw = {
        "metadata": {"name": case.quota_name, "namespace": NAMESPACE},
        "spec": {"min": {"cpu": "1", "memory": "1"}, "max": {"cpu": "1", "memory": "1"}},
    }
    [write] = decide_quota(profile(case), nodes(), parse_elastic_quota(raw))
    assert write.body["spec"]["min"] == {"cpu": "18", "memory": None}


def test_nothing_is_written_when_the_quota_is_as_it_should_be() -> None:
    case = CASES[0]
    [create] = decide_quota(profile(case), nodes(), None)
    assert decide_quota(profile(case), nodes(), parse_elastic_quota(create.body)) == []


# ----- the controller -----


class Api:
    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.warnings: list[tuple[str, str]] = []
        self.fail = False

    async def send(self, write: Write) -> None:
        if self.fail:
            raise ClusterError("the API server is down")
        self.writes.append(write)

    def warn(self, profile: Any, *, reason: str, message: str) -> None:
        self.warnings.append((reason, message))


def controller_with_pool() -> tuple[QuotaProfileController, Api]:
    api = Api()
    controller = QuotaProfileController(api)
    for n in nodes():
        controller.on_node(EventType.ADDED, None, n)
    controller.on_object("ElasticQuotaProfile", EventType.ADDED, None, profile(CASES[5]))
    return controller, api


def test_a_node_joining_the_pool_raises_the_quota() -> None:
    controller, api = controller_with_pool()
    asyncio.run(controller.reconcile())
    assert [w.verb for w in api.writes] == ["POST"]
    assert api.writes[0].body["spec"]["min"] == {"cpu": "18", "memory": "1800"}
    controller.on_node(
        EventType.ADDED, None, node("node4", "cn-hangzhou-a", allocatable={"cpu": "10", "memory": "1000"})
    )
    asyncio.run(controller.reconcile())
    assert [w.verb for w in api.writes] == ["POST", "PATCH"]
    assert api.writes[1].body["spec"]["min"] == {"cpu": "27", "memory": "2700"}


def test_a_heartbeat_of_a_node_is_not_a_change_of_the_pool() -> None:
    controller, _api = controller_with_pool()
    asyncio.run(controller.reconcile())
    first = controller.nodes["node1"]
    controller.on_node(EventType.MODIFIED, first, first)
    assert controller.dirty == set()


def test_a_failed_write_is_reported_on_the_profile_and_retried() -> None:
    controller, api = controller_with_pool()
    api.fail = True

    async def once() -> None:
        controller.retry_seconds = 0.01
        await controller.reconcile()
        await asyncio.sleep(0.05)

    asyncio.run(once())
    assert api.warnings == [("CreateQuotaFailed", "failed to create quota, err: the API server is down")]
    assert controller.dirty == {f"{NAMESPACE}/profile1"}


def test_a_deleted_profile_is_forgotten_and_its_quota_left_alone() -> None:
    controller, api = controller_with_pool()
    controller.on_object("ElasticQuotaProfile", EventType.DELETED, profile(CASES[5]), None)
    asyncio.run(controller.reconcile())
    assert api.writes == []


class RefusingApi(Api):
    """Refuses every write for good (422), as the API server refuses an invalid object."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0

    async def send(self, write: Write) -> None:
        self.attempts += 1
        raise ApiError(422, "Invalid", "ElasticQuota is invalid", method=write.verb, path=write.path)


def test_a_write_refused_for_good_is_reported_once_and_not_retried_until_it_changes() -> None:
    api = RefusingApi()
    controller = QuotaProfileController(api, retry_seconds=0.01)
    for n in nodes():
        controller.on_node(EventType.ADDED, None, n)
    controller.on_object("ElasticQuotaProfile", EventType.ADDED, None, profile(CASES[5]))

    async def rounds() -> None:
        await controller.reconcile()
        await asyncio.sleep(0.05)
        assert controller.dirty == set()  # no retry timer
        controller._mark(*controller.profiles)  # the periodic resync
        await controller.reconcile()

    asyncio.run(rounds())
    assert api.attempts == 1
    assert [reason for reason, _ in api.warnings] == ["CreateQuotaFailed"]
    assert controller.contained.object_errors.count("ElasticQuotaProfile", "ReconcileError") == 1
    controller.on_node(  # the pool changed: the quota it wants changed
        EventType.ADDED, None, node("node4", "cn-hangzhou-a", allocatable={"cpu": "10", "memory": "1000"})
    )
    asyncio.run(controller.reconcile())
    assert api.attempts == 2


def test_a_profile_whose_decision_raises_costs_that_profile_only(monkeypatch: pytest.MonkeyPatch) -> None:
    controller, api = controller_with_pool()
    controller.on_object("ElasticQuotaProfile", EventType.ADDED, None, profile(CASES[5], namespace="other"))
    real = quotaprofile.decide_quota

    def decide(p: Any, pool: Any, current: Any) -> Any:
        if p.namespace == "other":
            raise RecursionError("maximum recursion depth exceeded")
        return real(p, pool, current)

    monkeypatch.setattr(quotaprofile, "decide_quota", decide)
    assert asyncio.run(controller.reconcile()) == 1
    assert [w.verb for w in api.writes] == ["POST"]
    assert controller.contained.failures == 1
