"""Koordinator's ElasticQuota webhook test tables (tests/fixtures/koordinator_quota_webhook_cases.py) against
pykoord's checks: the pure functions for the single-function tables, the AdmissionReview handlers (defaults,
then validation, as the API server calls them) for the sequences and the handler tables."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch
import pytest

from apis.scheduling.elasticquota import LABEL_QUOTA_NAME, QuotaRecord, parse_elastic_quota
from koord_scheduler.webhook.gates import AdmissionGates
from koord_scheduler.webhook.quota import QuotaDefaulter, QuotaValidator, check_delete, check_update, refused
from koord_scheduler.webhook.quota_kube import by_name
from koord_scheduler.webhook.quota_topology import (
    children_of,
    guarantee_problem,
    info_of,
    key_problem,
    min_sum_problem,
    parent_problem,
    quota_defaults,
    self_item_problem,
    tree_id_problem,
)
from tests.fixtures.koordinator_quota_webhook_cases import (
    DEFAULTS,
    GUARANTEE_CASES,
    KEY_CASES,
    MIN_SUM_CASES,
    MUTATING_HANDLER,
    PARENT_INFO_CASES,
    PREFIX,
    SELF_ITEM,
    SEQUENCES,
    SHARED_WEIGHT,
    TREE_ID_CASES,
    VALIDATING_HANDLER,
    DefaultCase,
    HandlerCase,
    ItemCase,
    Step,
    TopologyCase,
)

NAMESPACE = "team"


def record(obj: Mapping[str, Any]) -> QuotaRecord:
    meta = dict(obj["metadata"])
    meta.setdefault("namespace", NAMESPACE)
    return parse_elastic_quota({**obj, "metadata": meta})


def topology(*objs: Mapping[str, Any] | None) -> dict[str, QuotaRecord]:
    """Quotas added as Koordinator's ``OnQuotaAdd`` adds them: without any check."""
    return by_name([record(o) for o in objs if o is not None])


# ----- single functions -----


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in SELF_ITEM])
def test_basic_item_check(case: ItemCase) -> None:
    defaulted, problem = quota_defaults(case.quota, {})
    assert problem == ""
    assert self_item_problem(defaulted) == case.want_message


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in DEFAULTS])
def test_fill_quota_default_information(case: DefaultCase) -> None:
    added: list[QuotaRecord] = []
    for obj, want_parent, want_weight, want_tree in case.quotas:
        defaulted, problem = quota_defaults(obj, by_name(added))
        assert problem == ""
        labels, annotations = defaulted["metadata"]["labels"], defaulted["metadata"]["annotations"]
        got = (labels.get(PREFIX + "parent"), annotations.get(SHARED_WEIGHT), labels.get(PREFIX + "tree-id", ""))
        assert got == (want_parent, want_weight, want_tree)
        added.append(record(defaulted))


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in KEY_CASES])
def test_check_sub_and_parent_group_quota_key(case: TopologyCase) -> None:
    quotas = topology(case.parent, case.quota, case.child)
    me = info_of(record(case.quota))
    assert bool(key_problem(me, quotas, children_of(me.name, quotas), case.gate_on)) is case.want_error


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in TREE_ID_CASES])
def test_check_tree_id(case: TopologyCase) -> None:
    quotas = topology(case.parent, case.quota, case.child)
    me = info_of(record(case.quota))
    assert bool(tree_id_problem(None, me, quotas, children_of(me.name, quotas))) is case.want_error


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in MIN_SUM_CASES])
def test_check_min_quota_sum(case: TopologyCase) -> None:
    quotas = topology(case.parent, case.quota, case.child)
    me = info_of(record(case.quota))
    assert bool(min_sum_problem(me, quotas, children_of(me.name, quotas))) is case.want_error


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in GUARANTEE_CASES])
def test_check_guarantee_for_min(case: TopologyCase) -> None:
    quotas = topology(case.parent, case.quota, case.child)
    assert bool(guarantee_problem(info_of(record(case.quota)), quotas)) is case.want_error


def test_check_guarantee_message_names_the_tree_root() -> None:
    case = GUARANTEE_CASES[2]
    quotas = topology(case.parent, case.quota, case.child)
    assert guarantee_problem(info_of(record(case.quota)), quotas) == "tree root quota temp can't guarantee for min"


@pytest.mark.parametrize(("parent", "name", "want"), [pytest.param(p, n, w, id=i) for i, p, n, w in PARENT_INFO_CASES])
def test_check_parent_quota_info(parent: dict[str, Any] | None, name: str, want: str) -> None:
    assert parent_problem("", name, topology(parent)) == want


# ----- the sequences, through the handlers -----


class FakeCluster:
    """Quotas and pods as the API server keeps them, and the lookup the webhooks read."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.pods: list[dict[str, Any]] = []

    def quotas(self) -> Mapping[str, QuotaRecord]:
        return by_name([record(o) for o in self.objects.values()])

    async def relist(self) -> Mapping[str, QuotaRecord]:
        return self.quotas()

    async def pods_of(self, quota: str) -> Sequence[str]:
        return sorted(
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in self.pods
            if p["metadata"].get("labels", {}).get(LABEL_QUOTA_NAME) == quota
        )

    async def has_pods(self, quota: str, namespaces: Sequence[str]) -> bool:
        return any(
            p["metadata"].get("labels", {}).get(LABEL_QUOTA_NAME) == quota
            or p["metadata"]["namespace"] in (quota, *namespaces)
            for p in self.pods
        )

    def admitted(self, name: str, record: QuotaRecord | None) -> None:
        pass  # the replay stores allowed writes itself (run_step)


def review(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "operation": operation,
            "namespace": NAMESPACE,
            "object": obj,
            "oldObject": old,
            "resource": {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "resource": "elasticquotas"},
        },
    }


def patched(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    raw = answer["response"].get("patch")
    if not raw:
        return obj
    result: dict[str, Any] = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(raw)))
    return result


def run_step(cluster: FakeCluster, step: Step, gates: AdmissionGates) -> tuple[bool, str]:
    validator, defaulter = QuotaValidator(cluster, gates=gates), QuotaDefaulter(cluster, gates=gates)
    if step.action in ("pod", "delete-pod"):
        meta = step.obj["metadata"]
        key = (meta["namespace"] or NAMESPACE, meta["name"])
        cluster.pods = [p for p in cluster.pods if (p["metadata"]["namespace"], p["metadata"]["name"]) != key]
        if step.action == "pod":
            cluster.pods.append({**step.obj, "metadata": {**meta, "namespace": key[0]}})
        return True, ""
    if not step.via_api:  # no API server would send it (a name that is not a Kubernetes name, say): direct call
        quotas = cluster.quotas()
        if step.action == "delete":
            message = check_delete(step.obj["name"], quotas)
        else:
            message = check_update(step.obj, cluster.objects[step.update_of], quotas)
        return not message, message
    if step.action == "delete":
        old = cluster.objects.get(step.obj["name"], {"metadata": {"name": step.obj["name"], "namespace": NAMESPACE}})
        got = asyncio.run(validator.review(review("DELETE", None, old)))
        if got["response"]["allowed"]:
            cluster.objects.pop(step.obj["name"], None)
        return got["response"]["allowed"], refused(got)
    obj = json.loads(json.dumps(step.obj))
    obj["metadata"].setdefault("namespace", NAMESPACE)
    name = obj["metadata"]["name"]
    stored = cluster.objects.get(step.update_of or name)
    if stored is not None and stored["metadata"]["namespace"] == obj["metadata"]["namespace"]:
        got = asyncio.run(validator.review(review("UPDATE", obj, stored)))
    else:
        if step.defaulted:
            obj = patched(obj, asyncio.run(defaulter.review(review("CREATE", obj, None))))
        got = asyncio.run(validator.review(review("CREATE", obj, None)))
    if got["response"]["allowed"]:
        cluster.objects[name] = obj
    return got["response"]["allowed"], refused(got)


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_koordinator_sequences(name: str) -> None:
    cluster = FakeCluster()
    for i, step in enumerate(SEQUENCES[name]):
        allowed, message = run_step(cluster, step, AdmissionGates())
        assert (i, allowed, message) == (i, step.want_allowed, step.want_message)
        if step.action == "apply" and allowed:
            labels = cluster.objects[step.obj["metadata"]["name"]]["metadata"]["labels"]
            assert {k: labels.get(k) for k in step.want_labels} == dict(step.want_labels)


def test_add_without_defaults_is_allowed_once_the_defaults_fill_the_tree_id() -> None:
    """The live outcome of ``TestQuotaTopology_ValidAddQuota``'s last step: the mutating webhook gives
    ``sub-3`` its parent's tree id, and the validating one then allows it."""
    cluster = FakeCluster()
    steps = SEQUENCES["TestQuotaTopology_ValidAddQuota"]
    for step in steps[:-1]:
        run_step(cluster, step, AdmissionGates())
    last = steps[-1]
    live = Step(last.action, last.obj)
    assert run_step(cluster, live, AdmissionGates()) == (last.live_allowed, "")
    labels = cluster.objects["sub-3"]["metadata"]["labels"]
    assert {k: labels.get(k) for k in last.live_labels} == dict(last.live_labels)


# ----- the handler tables -----


def _handler_body(case: HandlerCase) -> dict[str, Any]:
    body = review(case.operation, case.obj, case.old)
    if case.obj is None:
        del body["request"]["object"]
    return body


def test_validating_handler_table() -> None:
    cluster = FakeCluster()
    validator = QuotaValidator(cluster)
    for case in VALIDATING_HANDLER:
        try:
            got = asyncio.run(validator.review(_handler_body(case)))
        except Exception as exc:  # a review the handler cannot read: the server answers 400
            assert case.want_allowed is False, (case.id, exc)
            assert getattr(exc, "uid", "") == "u"
            continue
        assert (case.id, got["response"]["allowed"]) == (case.id, case.want_allowed)
        if got["response"]["allowed"] and case.operation == "CREATE" and case.obj is not None:
            cluster.objects[case.obj["metadata"]["name"]] = {
                **case.obj,
                "metadata": {**case.obj["metadata"], "namespace": NAMESPACE},
            }
        if not got["response"]["allowed"]:
            assert got["response"]["status"]["code"] == 400


def test_mutating_handler_table() -> None:
    defaulter = QuotaDefaulter(FakeCluster())
    for case in MUTATING_HANDLER:
        try:
            got = asyncio.run(defaulter.review(_handler_body(case)))
        except Exception as exc:
            assert case.want_allowed is False, (case.id, exc)
            continue
        assert (case.id, got["response"]["allowed"]) == (case.id, case.want_allowed)


def test_defaults_refuse_a_child_whose_parent_does_not_exist() -> None:
    obj = {"metadata": {"name": "c", "namespace": NAMESPACE, "labels": {PREFIX + "parent": "ghost"}}}
    assert quota_defaults(obj, {})[1] == "fill quota c failed, parent not exist"
    got = asyncio.run(QuotaDefaulter(FakeCluster()).review(review("CREATE", obj, None)))
    assert refused(got) == "fill quota c failed, parent not exist"


def test_defaults_leave_the_root_quota_alone() -> None:
    root = {"metadata": {"name": "koordinator-root-quota", "namespace": NAMESPACE}, "spec": {"max": {"cpu": "1"}}}
    got = asyncio.run(QuotaDefaulter(FakeCluster()).review(review("CREATE", root, None)))
    assert got["response"] == {"uid": "u", "allowed": True}


def test_defaults_write_null_weight_for_a_quota_without_max() -> None:
    obj = {"metadata": {"name": "q", "namespace": NAMESPACE}}
    got = patched(obj, asyncio.run(QuotaDefaulter(FakeCluster()).review(review("CREATE", obj, None))))
    assert got["metadata"] == {
        "name": "q",
        "namespace": NAMESPACE,
        "labels": {PREFIX + "parent": "koordinator-root-quota"},
        "annotations": {SHARED_WEIGHT: "null"},
    }


def test_gates_turn_the_quota_webhooks_off() -> None:
    gates = AdmissionGates.resolve({"ElasticQuotaValidatingWebhook": False, "ElasticQuotaMutatingWebhook": False})
    bad = {"metadata": {"name": "q", "namespace": NAMESPACE}, "spec": {"min": {"cpu": "2"}, "max": {"cpu": "1"}}}
    assert refused(asyncio.run(QuotaValidator(FakeCluster(), gates=gates).review(review("CREATE", bad, None)))) == ""
    got = asyncio.run(QuotaDefaulter(FakeCluster(), gates=gates).review(review("CREATE", bad, None)))
    assert "patch" not in got["response"]


@pytest.mark.parametrize(
    ("gates", "want"),
    [
        pytest.param(
            {},
            "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
            "p's max keys are not the same with c's",
            id="keys-must-match",
        ),
        pytest.param({"ElasticQuotaEnableUpdateResourceKey": True}, "", id="gate-allows-a-subset"),
    ],
)
def test_update_resource_key_gate_through_the_handler(gates: dict[str, bool], want: str) -> None:
    cluster = FakeCluster()
    cluster.objects["p"] = {
        "metadata": {"name": "p", "namespace": NAMESPACE, "labels": {PREFIX + "is-parent": "true"}},
        "spec": {"min": {"cpu": "4"}, "max": {"cpu": "8", "memory": "8Gi"}},
    }
    child = {
        "metadata": {"name": "c", "namespace": NAMESPACE, "labels": {PREFIX + "parent": "p"}},
        "spec": {"min": {"cpu": "1"}, "max": {"cpu": "2"}},
    }
    got = asyncio.run(
        QuotaValidator(cluster, gates=AdmissionGates.resolve(gates)).review(review("CREATE", child, None))
    )
    assert refused(got) == want


def test_allow_force_update_skips_the_min_sums() -> None:
    cluster = FakeCluster()
    cluster.objects["p"] = {
        "metadata": {"name": "p", "namespace": NAMESPACE, "labels": {PREFIX + "is-parent": "true"}},
        "spec": {"min": {"cpu": "1"}, "max": {"cpu": "8"}},
    }
    child = {
        "metadata": {"name": "c", "namespace": NAMESPACE, "labels": {PREFIX + "parent": "p"}},
        "spec": {"min": {"cpu": "4"}, "max": {"cpu": "8"}},
    }
    validator = QuotaValidator(cluster)
    assert refused(asyncio.run(validator.review(review("CREATE", child, None)))) == (
        "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: p"
    )
    child["metadata"]["labels"][PREFIX + "allow-force-update"] = "true"  # type: ignore[index]
    assert refused(asyncio.run(validator.review(review("CREATE", child, None)))) == ""
