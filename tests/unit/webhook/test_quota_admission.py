"""The ElasticQuota validating webhook: each refusal, the allowed cases, and the AdmissionReview round trip."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from apis.scheduling.elasticquota import (
    ANNOTATION_NAMESPACES,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    LABEL_TREE_ID,
    QuotaRecord,
    parse_elastic_quota,
)
from koord_scheduler.webhook.admission import BadReviewError, ClusterLookupError
from koord_scheduler.webhook.quota import (
    QuotaValidator,
    check_create,
    check_delete,
    check_update,
    needs_pods,
    refused,
)
from koord_scheduler.webhook.quota_kube import by_name


def raw(
    name: str,
    *,
    min: Mapping[str, str] | None = None,
    max: Mapping[str, str] | None = None,
    parent: str = "",
    is_parent: bool = False,
    tree_id: str = "",
    namespace: str = "team",
    namespaces: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if parent:
        labels[LABEL_PARENT] = parent
    if is_parent:
        labels[LABEL_IS_PARENT] = "true"
    if tree_id:
        labels[LABEL_TREE_ID] = tree_id
    notes = dict(annotations or {})
    if namespaces:
        notes[ANNOTATION_NAMESPACES] = json.dumps(list(namespaces))
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": notes},
        "spec": {"min": dict(min or {}), "max": dict(max or {})},
    }


def q(name: str, **kw: Any) -> QuotaRecord:
    return parse_elastic_quota(raw(name, **kw))


CPU4 = {"cpu": "4", "memory": "8Gi"}


def cluster() -> dict[str, QuotaRecord]:
    """org (parent, min 4 cpu) with team-a (min 2) and dept (parent, min 1) below it; team-b at the root."""
    return by_name([
        q("org", min=CPU4, max={"cpu": "10", "memory": "20Gi"}, is_parent=True),
        q("team-a", min={"cpu": "2"}, max={"cpu": "4"}, parent="org", namespaces=("ns-a",)),
        q("dept", min={"cpu": "1"}, max={"cpu": "4"}, parent="org", is_parent=True),
        q("team-b", min={"cpu": "1"}, max={"cpu": "2"}),
        q("tree-x", min={"cpu": "1"}, max={"cpu": "2"}, is_parent=True, tree_id="x"),
    ])


# ----- CREATE -----

CREATE_REFUSED = [
    pytest.param(q("c", min={"cpu": "4"}, max={"cpu": "2"}),
                 "ElasticQuota team/c: spec.min.cpu (4) is above spec.max.cpu (2)", id="max-below-min"),
    pytest.param(q("c", min={"cpu": "1", "memory": "1Gi"}, max={"cpu": "2"}),
                 "ElasticQuota team/c: spec.min.memory is set but spec.max.memory is not: every resource of min "
                 "must be in max", id="min-key-not-in-max"),
    pytest.param(q("c", min={"cpu": "1"}, max={"cpu": "2"}, parent="nobody"),
                 "ElasticQuota team/c: parent quota nobody does not exist", id="parent-missing"),
    pytest.param(q("c", min={"cpu": "1"}, max={"cpu": "2"}, parent="team-a"),
                 'ElasticQuota team/c: parent quota team-a is not labelled is-parent="true"',
                 id="parent-not-is-parent"),
    pytest.param(q("c", min={"cpu": "3"}, max={"cpu": "4"}, parent="org"),
                 "ElasticQuota team/c: spec.min: children's min of cpu would add up to 6, above the min of parent "
                 "quota org (4)", id="children-min-sum-over-parent-min"),
    pytest.param(q("a", min={"cpu": "2"}, max={"cpu": "4"}, parent="org"),
                 "ElasticQuota team/a: spec.min: children's min of cpu would add up to 5, above the min of parent "
                 "quota org (4)", id="min-sum-blames-new-quota-not-sibling"),
    pytest.param(q("c", min={"nvidia.com/gpu": "1"}, max={"nvidia.com/gpu": "1"}, parent="org"),
                 "ElasticQuota team/c: spec.min: children's min of nvidia.com/gpu would add up to 1, above the min "
                 "of parent quota org (0)", id="min-sum-counts-resource-parent-lacks"),
    pytest.param(q("c", min={"cpu": "1"}, max={"cpu": "2"}, parent="tree-x", tree_id="y"),
                 "ElasticQuota team/c: tree id 'y' is different from that of parent quota tree-x ('x')",
                 id="tree-id-differs-from-parent"),
    pytest.param(q("team-a", max={"cpu": "1"}, namespace="other"),
                 "ElasticQuota other/team-a: metadata.name: a quota named team-a already exists in namespace team; "
                 "quota names are cluster-wide", id="name-taken"),
    pytest.param(q("c", max={"cpu": "1"}, namespaces=("ns-a",)),
                 "ElasticQuota team/c: metadata.annotations[quota.scheduling.koordinator.sh/namespaces]: namespace "
                 "ns-a is already bound to quota team-a", id="namespace-bound"),
]


@pytest.mark.parametrize(("new", "want"), CREATE_REFUSED)
def test_create_refused(new: QuotaRecord, want: str) -> None:
    assert check_create(new, cluster()) == want


CREATE_ALLOWED = [
    pytest.param(q("c", min={"cpu": "1"}, max={"cpu": "2"}, parent="org"), id="fills-parent-min-exactly"),
    pytest.param(q("c", min={"cpu": "1"}, max={"cpu": "1"}, parent="dept"), id="grandchild-within-min"),
    pytest.param(q("c", min={"cpu": "100"}, max={"cpu": "100"}), id="first-level-not-summed"),
    pytest.param(q("c", max={"cpu": "2"}, parent="tree-x"), id="no-tree-id-inherits"),
    pytest.param(q("c", max={"cpu": "2"}, namespaces=("ns-c",)), id="free-namespace"),
]


@pytest.mark.parametrize("new", CREATE_ALLOWED)
def test_create_allowed(new: QuotaRecord) -> None:
    assert check_create(new, cluster()) == ""


# ----- UPDATE -----

UPDATE_REFUSED = [
    pytest.param("team-a", q("team-a", min={"cpu": "2"}, max={"cpu": "1"}, parent="org", namespaces=("ns-a",)),
                 False, "ElasticQuota team/team-a: spec.min.cpu (2) is above spec.max.cpu (1)", id="max-below-min"),
    pytest.param("team-a", q("team-a", min={"cpu": "4"}, max={"cpu": "4"}, parent="org", namespaces=("ns-a",)),
                 False, "ElasticQuota team/team-a: spec.min: children's min of cpu would add up to 5, above the min "
                 "of parent quota org (4)", id="raise-child-min-over-parent"),
    pytest.param("org", q("org", min={"cpu": "2", "memory": "8Gi"}, max={"cpu": "10", "memory": "20Gi"},
                          is_parent=True), False,
                 "ElasticQuota team/org: spec.min.cpu: the min of its child quotas (dept, team-a) adds up to 3, "
                 "above this quota's min (2)", id="lower-parent-min-under-children"),
    pytest.param("dept", q("dept", min={"cpu": "1"}, max={"cpu": "4"}, parent="dept", is_parent=True), False,
                 "ElasticQuota team/dept: metadata.labels[quota.scheduling.koordinator.sh/parent]: dept is below "
                 "dept in the tree; the quota parents would form a cycle", id="own-parent"),
    pytest.param("org", q("org", min=CPU4, max={"cpu": "10", "memory": "20Gi"}, is_parent=True, parent="dept"),
                 False, "ElasticQuota team/org: metadata.labels[quota.scheduling.koordinator.sh/parent]: dept is "
                 "below org in the tree; the quota parents would form a cycle", id="cycle-through-child"),
    pytest.param("team-a", q("team-a", min={"cpu": "2"}, max={"cpu": "4"}, parent="nobody", namespaces=("ns-a",)),
                 False, "ElasticQuota team/team-a: parent quota nobody does not exist", id="move-to-missing-parent"),
    pytest.param("team-b", q("team-b", min={"cpu": "1"}, max={"cpu": "2"}, parent="team-a"), False,
                 'ElasticQuota team/team-b: parent quota team-a is not labelled is-parent="true"',
                 id="move-under-leaf"),
    pytest.param("org", q("org", min=CPU4, max={"cpu": "10", "memory": "20Gi"}), False,
                 "ElasticQuota team/org: metadata.labels[quota.scheduling.koordinator.sh/is-parent]: cannot turn "
                 "false while the quota has child quotas (dept, team-a)", id="is-parent-off-with-children"),
    pytest.param("team-b", q("team-b", min={"cpu": "1"}, max={"cpu": "2"}, is_parent=True), True,
                 "ElasticQuota team/team-b: metadata.labels[quota.scheduling.koordinator.sh/is-parent]: cannot turn "
                 "true while pods are bound to the quota (label quota.scheduling.koordinator.sh/name)",
                 id="is-parent-on-with-pods"),
    pytest.param("tree-x", q("tree-x", min={"cpu": "1"}, max={"cpu": "2"}, is_parent=True, tree_id="z"), False,
                 "ElasticQuota team/tree-x: metadata.labels[quota.scheduling.koordinator.sh/tree-id]: the tree id "
                 "cannot change ('x' to 'z')", id="tree-id-changed"),
    pytest.param("koordinator-root-quota",
                 q("koordinator-root-quota", max={"cpu": "1"}, is_parent=True, namespace="koordinator-system"),
                 False, "ElasticQuota koordinator-system/koordinator-root-quota: the koordinator-root-quota quota "
                 "cannot be modified", id="root-quota"),
]


def with_builtins() -> dict[str, QuotaRecord]:
    quotas = cluster()
    quotas["koordinator-root-quota"] = q("koordinator-root-quota", is_parent=True, namespace="koordinator-system")
    return quotas


@pytest.mark.parametrize(("name", "new", "has_pods", "want"), UPDATE_REFUSED)
def test_update_refused(name: str, new: QuotaRecord, has_pods: bool, want: str) -> None:
    quotas = with_builtins()
    assert check_update(quotas[name], new, quotas, has_pods=has_pods) == want


UPDATE_ALLOWED = [
    pytest.param("team-a", q("team-a", min={"cpu": "1"}, max={"cpu": "8"}, parent="org", namespaces=("ns-a",)),
                 id="change-numbers-within-rules"),
    pytest.param("team-a", q("team-a", min={"cpu": "1"}, max={"cpu": "4"}, parent="dept", namespaces=("ns-a",)),
                 id="move-to-another-parent"),
    pytest.param("team-b", q("team-b", min={"cpu": "1"}, max={"cpu": "2"}, is_parent=True), id="is-parent-on-no-pods"),
    pytest.param("koordinator-root-quota", q("koordinator-root-quota", is_parent=True, namespace="koordinator-system",
                                             annotations={"quota.scheduling.koordinator.sh/runtime": "{}"}),
                 id="root-annotations-only"),
]


@pytest.mark.parametrize(("name", "new"), UPDATE_ALLOWED)
def test_update_allowed(name: str, new: QuotaRecord) -> None:
    quotas = with_builtins()
    assert check_update(quotas[name], new, quotas) == ""


def test_update_of_an_invalid_quota_that_leaves_it_invalid_is_refused() -> None:
    quotas = cluster()
    quotas["bad"] = q("bad", min={"cpu": "3"}, max={"cpu": "1"})  # slipped through while the webhook was off
    new = q("bad", min={"cpu": "3"}, max={"cpu": "2"})
    want = "ElasticQuota team/bad: spec.min.cpu (3) is above spec.max.cpu (2)"
    assert check_update(quotas["bad"], new, quotas) == want


def test_update_fixing_an_invalid_quota_is_allowed() -> None:
    quotas = cluster()
    quotas["bad"] = q("bad", min={"cpu": "3"}, max={"cpu": "1"})
    assert check_update(quotas["bad"], q("bad", min={"cpu": "1"}, max={"cpu": "1"}), quotas) == ""


# ----- DELETE -----

DELETE_CASES = [
    pytest.param("org", (), "ElasticQuota team/org: cannot be deleted: it has 2 child quota(s): dept, team-a",
                 id="has-child-quotas"),
    pytest.param("team-a", ("team/p1",), "ElasticQuota team/team-a: cannot be deleted: it has 1 pod(s): team/p1",
                 id="has-a-pod"),
    pytest.param("team-a", ("team/p1", "team/p2", "team/p3"),
                 "ElasticQuota team/team-a: cannot be deleted: it has 3 pod(s): team/p1, team/p2, ...",
                 id="has-many-pods"),
    pytest.param("koordinator-root-quota", (),
                 "ElasticQuota koordinator-system/koordinator-root-quota: the built-in quota koordinator-root-quota "
                 "cannot be deleted", id="builtin"),
    pytest.param("team-a", (), "", id="leaf-without-pods-allowed"),
    pytest.param("dept", (), "", id="parent-without-children-allowed"),
]


@pytest.mark.parametrize(("name", "pods", "want"), DELETE_CASES)
def test_delete(name: str, pods: tuple[str, ...], want: str) -> None:
    quotas = with_builtins()
    assert check_delete(quotas[name], quotas, pods) == want


@pytest.mark.parametrize(
    ("operation", "old", "new", "want"),
    [
        pytest.param("DELETE", q("a"), None, True, id="delete"),
        pytest.param("UPDATE", q("a"), q("a", is_parent=True), True, id="is-parent-on"),
        pytest.param("UPDATE", q("a", is_parent=True), q("a"), False, id="is-parent-off"),
        pytest.param("CREATE", None, q("a"), False, id="create"),
    ],
)
def test_needs_pods(operation: str, old: QuotaRecord | None, new: QuotaRecord | None, want: bool) -> None:
    assert needs_pods(operation, old, new) is want


# ----- the AdmissionReview -----


class FakeLookup:
    def __init__(self, watched: dict[str, QuotaRecord], *, listed: dict[str, QuotaRecord] | None = None,
                 pods: Sequence[str] = (), fail: bool = False) -> None:
        self.watched = watched
        self.listed = listed if listed is not None else watched
        self.pods = list(pods)
        self.fail = fail
        self.calls: list[str] = []

    def quotas(self) -> Mapping[str, QuotaRecord]:
        return self.watched

    async def relist(self) -> Mapping[str, QuotaRecord]:
        self.calls.append("relist")
        return self.listed

    async def pods_of(self, quota: str) -> Sequence[str]:
        self.calls.append(f"pods:{quota}")
        if self.fail:
            raise ClusterLookupError("connection refused")
        return self.pods


def review(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None, *,
           resource: str = "elasticquotas", version: str = "admission.k8s.io/v1") -> dict[str, Any]:
    return {
        "apiVersion": version, "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": operation, "object": obj, "oldObject": old, "namespace": "team",
                    "resource": {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "resource": resource}},
    }


def answer(lookup: FakeLookup, body: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(QuotaValidator(lookup).review(body))


def test_refusal_is_an_admission_review_with_code_400() -> None:
    got = answer(FakeLookup(cluster()), review("CREATE", raw("c", min={"cpu": "4"}, max={"cpu": "2"})))
    assert got == {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": "u-1", "allowed": False, "status": {
            "code": 400, "reason": "BadRequest",
            "message": "ElasticQuota team/c: spec.min.cpu (4) is above spec.max.cpu (2)"}},
    }


def test_valid_create_is_allowed_without_api_calls() -> None:
    lookup = FakeLookup(cluster())
    got = answer(lookup, review("CREATE", raw("c", min={"cpu": "1"}, max={"cpu": "2"}, parent="org")))
    assert got["response"] == {"uid": "u-1", "allowed": True}
    assert lookup.calls == []


def test_parent_not_yet_watched_is_relisted() -> None:
    fresh = cluster()
    fresh["new-parent"] = q("new-parent", min={"cpu": "1"}, max={"cpu": "1"}, is_parent=True)
    lookup = FakeLookup(cluster(), listed=fresh)
    got = answer(lookup, review("CREATE", raw("c", min={"cpu": "1"}, max={"cpu": "1"}, parent="new-parent")))
    assert refused(got) == ""
    assert lookup.calls == ["relist"]


def test_delete_lists_pods_and_refuses() -> None:
    lookup = FakeLookup(cluster(), pods=["team/p1"])
    got = answer(lookup, review("DELETE", None, raw("team-a", min={"cpu": "2"}, max={"cpu": "4"}, parent="org")))
    assert refused(got) == "ElasticQuota team/team-a: cannot be deleted: it has 1 pod(s): team/p1"
    assert lookup.calls == ["pods:team-a"]


def test_delete_refused_for_children_does_not_list_pods() -> None:
    lookup = FakeLookup(cluster())
    got = answer(lookup, review("DELETE", None, raw("org", min=CPU4, max={"cpu": "10"}, is_parent=True)))
    assert refused(got).startswith("ElasticQuota team/org: cannot be deleted: it has 2 child quota(s)")
    assert lookup.calls == []


def test_pod_lookup_failure_refuses_with_the_reason() -> None:
    lookup = FakeLookup(cluster(), fail=True)
    got = answer(lookup, review("DELETE", None, raw("team-a", max={"cpu": "4"}, parent="org")))
    assert refused(got) == "ElasticQuota team/team-a: cannot be checked: connection refused"


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({"max": {"cpu": "lots"}}, "ElasticQuota team/c: spec.max.cpu: ", id="not-a-quantity"),
        pytest.param({"min": {"cpu": "-1"}, "max": {"cpu": "2"}},
                     'ElasticQuota team/c: spec.min.cpu: "-1" must be greater than or equal to 0', id="negative-min"),
    ],
)
def test_malformed_quota_is_refused_naming_the_field(spec: dict[str, Any], want: str) -> None:
    obj = raw("c")
    obj["spec"] = spec
    got = answer(FakeLookup(cluster()), review("CREATE", obj))
    assert refused(got).startswith(want)


def test_other_resources_subresources_and_versions_are_refused_before_any_lookup() -> None:
    bad = raw("c", min={"cpu": "4"}, max={"cpu": "2"})
    status = review("UPDATE", bad, bad)
    status["request"]["subResource"] = "status"
    named = review("DELETE", None, raw("team-a", max={"cpu": "4"}, parent="org"))
    named["request"]["oldObject"]["metadata"]["name"] = "team-a,x!=y"
    lookup = FakeLookup(cluster())
    for body, want in [
        (review("CREATE", bad, resource="pods"), "this webhook serves CREATE/DELETE/UPDATE of "
                                                 "scheduling.sigs.k8s.io/elasticquotas; got 'CREATE' of"),
        (status, "subresource 'status'"),
        (review("CREATE", bad, version="admission.k8s.io/v1beta1"), "apiVersion: expected admission.k8s.io/v1"),
        (review("DELETE", None, None), "request.oldObject: expected the object of the DELETE"),
        (named, "request.oldObject.metadata.name 'team-a,x!=y' is invalid"),
    ]:
        with pytest.raises(BadReviewError) as info:
            answer(lookup, body)
        assert info.value.uid == "u-1"
        assert want in str(info.value)
    assert lookup.calls == []


def test_not_a_review_is_an_error() -> None:
    with pytest.raises(BadReviewError):
        answer(FakeLookup({}), {"kind": "Pod"})


def test_by_name_keeps_the_first_namespace_of_a_duplicate_name() -> None:
    got = by_name([q("x", namespace="b"), q("x", namespace="a")])
    assert got["x"].meta.namespace == "a"


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param([], "koord-scheduler-validating-webhook-configuration", id="default-is-the-chart-name"),
        pytest.param(["--webhook-validating-configuration-name", "mine"], "mine", id="flag"),
    ],
)
def test_validating_configuration_flag(argv: list[str], want: str) -> None:
    import argparse

    from koord_scheduler.webhook.flags import add_webhook_flags, webhook_options

    parser = argparse.ArgumentParser()
    add_webhook_flags(parser)
    assert webhook_options(parser.parse_args(argv)).validating_configuration_name == want


def test_tree_problem_names_another_quota_the_change_would_leave_out() -> None:
    from koord_scheduler.webhook.quota import tree_problem

    quotas = cluster()
    rest = {k: v for k, v in quotas.items() if k != "org"}
    not_parent = q("org", min=CPU4, max={"cpu": "10", "memory": "20Gi"})
    assert tree_problem(rest, not_parent, current=quotas) == (
        'quota dept would become invalid: parent quota org is not labelled is-parent="true"')
    # A quota that is already out of the tree today is not blamed on the change.
    assert tree_problem(rest, not_parent, current=rest) == ""
