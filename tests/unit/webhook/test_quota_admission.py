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


CPU4 = {"cpu": "4"}


def cluster() -> dict[str, QuotaRecord]:
    """org (parent, min 4 cpu) with team-a (min 2) and dept (parent, min 1) below it; team-b at the root."""
    return by_name(
        [
            q("org", min=CPU4, max={"cpu": "10"}, is_parent=True),
            q("team-a", min={"cpu": "2"}, max={"cpu": "4"}, parent="org", namespaces=("ns-a",)),
            q("dept", min={"cpu": "1"}, max={"cpu": "4"}, parent="org", is_parent=True),
            q("team-b", min={"cpu": "1"}, max={"cpu": "2"}),
            q("tree-x", min={"cpu": "1"}, max={"cpu": "2"}, is_parent=True, tree_id="x"),
        ]
    )


# ----- pykoord's own rule and the order of the checks -----


def test_a_new_parent_below_the_quota_is_a_cycle() -> None:
    """Koordinator's rules all pass here (it does not look for cycles): the quota tree would lose a subtree."""
    quotas = by_name(
        [
            q("a", min={"cpu": "1"}, max={"cpu": "4"}, is_parent=True),
            q("b", min={"cpu": "1"}, max={"cpu": "4"}, is_parent=True, parent="a"),
        ]
    )
    old = raw("a", min={"cpu": "1"}, max={"cpu": "4"}, is_parent=True)
    new = raw("a", min={"cpu": "1"}, max={"cpu": "4"}, is_parent=True, parent="b")
    assert check_update(new, old, quotas) == (
        "ElasticQuota team/a: metadata.labels[quota.scheduling.koordinator.sh/parent]: b is below a in the "
        "tree; the quota parents would form a cycle"
    )


def test_own_parent_passes_koordinators_rules_and_is_refused_as_a_cycle() -> None:
    quotas = with_builtins()
    old = raw("dept", min={"cpu": "1"}, max={"cpu": "4"}, parent="org", is_parent=True)
    new = raw("dept", min={"cpu": "1"}, max={"cpu": "4"}, parent="dept", is_parent=True)
    assert check_update(new, old, quotas) == (
        "ElasticQuota team/dept: metadata.labels[quota.scheduling.koordinator.sh/parent]: dept is below dept in the "
        "tree; the quota parents would form a cycle"
    )


def test_status_only_update_of_an_invalid_quota_is_allowed() -> None:
    quotas = cluster()
    bad = raw("bad", min={"cpu": "3"}, max={"cpu": "1"})
    with_status = json.loads(json.dumps(bad))
    with_status["status"] = {"used": {"cpu": "1"}}
    assert check_update(with_status, bad, quotas) == ""


def test_update_fixing_an_invalid_quota_is_allowed() -> None:
    quotas = cluster()
    quotas["bad"] = q("bad", min={"cpu": "3"}, max={"cpu": "1"})
    assert (
        check_update(
            raw("bad", min={"cpu": "1"}, max={"cpu": "1"}), raw("bad", min={"cpu": "3"}, max={"cpu": "1"}), quotas
        )
        == ""
    )


def test_create_at_the_root_is_not_summed() -> None:
    assert check_create(raw("c", min={"cpu": "100"}, max={"cpu": "100"}), cluster()) == ""


@pytest.mark.parametrize(
    ("name", "pods", "want"),
    [
        pytest.param("org", (), "delete quota failed, quota org has 2 child quotas", id="has-child-quotas"),
        pytest.param(
            "team-a",
            ("team/p1", "team/p2", "team/p3"),
            "delete quota failed, quota team-a has 3 child pods: p1, p2, ...",
            id="has-many-pods",
        ),
        pytest.param("koordinator-root-quota", (), "can not delete quotaGroup :koordinator-root-quota", id="builtin"),
        pytest.param("team-a", (), "", id="leaf-without-pods-allowed"),
    ],
)
def test_delete(name: str, pods: tuple[str, ...], want: str) -> None:
    assert check_delete(name, with_builtins(), pods) == want


@pytest.mark.parametrize(
    ("operation", "new", "want"),
    [
        pytest.param("DELETE", None, True, id="delete"),
        pytest.param("UPDATE", q("team-b", is_parent=True), True, id="is-parent-on"),
        pytest.param("UPDATE", q("org"), False, id="is-parent-off"),
        pytest.param("UPDATE", q("ghost", is_parent=True), False, id="unknown-quota"),
        pytest.param("CREATE", q("a", is_parent=True), False, id="create"),
    ],
)
def test_needs_pods(operation: str, new: QuotaRecord | None, want: bool) -> None:
    assert needs_pods(operation, new, cluster()) is want


def with_builtins() -> dict[str, QuotaRecord]:
    quotas = cluster()
    quotas["koordinator-root-quota"] = q("koordinator-root-quota", is_parent=True, namespace="koordinator-system")
    return quotas


# ----- the AdmissionReview -----


class FakeLookup:
    def __init__(
        self,
        watched: dict[str, QuotaRecord],
        *,
        listed: dict[str, QuotaRecord] | None = None,
        pods: Sequence[str] = (),
        fail: bool = False,
    ) -> None:
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

    async def has_pods(self, quota: str, namespaces: Sequence[str]) -> bool:
        self.calls.append(f"has-pods:{quota}:{','.join(namespaces)}")
        if self.fail:
            raise ClusterLookupError("connection refused")
        return bool(self.pods)

    def admitted(self, name: str, record: QuotaRecord | None) -> None:
        self.calls.append(f"admitted:{name}")


def review(
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    *,
    resource: str = "elasticquotas",
    version: str = "admission.k8s.io/v1",
) -> dict[str, Any]:
    return {
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": operation,
            "object": obj,
            "oldObject": old,
            "namespace": "team",
            "resource": {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "resource": resource},
        },
    }


def answer(lookup: FakeLookup, body: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(QuotaValidator(lookup).review(body))


def test_refusal_is_an_admission_review_with_code_400() -> None:
    got = answer(FakeLookup(cluster()), review("CREATE", raw("c", min={"cpu": "4"}, max={"cpu": "2"})))
    assert got == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "u-1",
            "allowed": False,
            "status": {"code": 400, "reason": "BadRequest", "message": "resourceKey cpu of quota c min 4 > max 2"},
        },
    }


def test_valid_create_is_allowed_without_api_calls() -> None:
    lookup = FakeLookup(cluster())
    got = answer(lookup, review("CREATE", raw("c", min={"cpu": "1"}, max={"cpu": "2"}, parent="org")))
    assert got["response"] == {"uid": "u-1", "allowed": True}
    assert lookup.calls == ["admitted:c"]  # no API call; the allowed quota counts at once


def test_parent_not_yet_watched_is_relisted() -> None:
    fresh = cluster()
    fresh["new-parent"] = q("new-parent", min={"cpu": "1"}, max={"cpu": "1"}, is_parent=True)
    lookup = FakeLookup(cluster(), listed=fresh)
    got = answer(lookup, review("CREATE", raw("c", min={"cpu": "1"}, max={"cpu": "1"}, parent="new-parent")))
    assert refused(got) == ""
    assert lookup.calls == ["relist", "admitted:c"]


def test_delete_lists_pods_and_refuses() -> None:
    lookup = FakeLookup(cluster(), pods=["team/p1"])
    got = answer(lookup, review("DELETE", None, raw("team-a", min={"cpu": "2"}, max={"cpu": "4"}, parent="org")))
    assert refused(got) == "delete quota failed, quota team-a has 1 child pods: p1"
    assert lookup.calls == ["pods:team-a"]


def test_delete_refused_for_children_does_not_list_pods() -> None:
    lookup = FakeLookup(cluster())
    got = answer(lookup, review("DELETE", None, raw("org", min=CPU4, max={"cpu": "10"}, is_parent=True)))
    assert refused(got) == "delete quota failed, quota org has 2 child quotas"
    assert lookup.calls == []


def test_pod_lookup_failure_refuses_with_the_reason() -> None:
    lookup = FakeLookup(cluster(), fail=True)
    got = answer(lookup, review("DELETE", None, raw("team-a", max={"cpu": "4"}, parent="org")))
    assert refused(got) == "ElasticQuota team/team-a: cannot be checked: connection refused"


def test_is_parent_turning_true_asks_for_pods_by_label_and_namespaces() -> None:
    lookup = FakeLookup(cluster(), pods=["team/p1"])
    old = raw("team-a", min={"cpu": "2"}, max={"cpu": "4"}, parent="org", namespaces=("ns-a",))
    new = raw("team-a", min={"cpu": "2"}, max={"cpu": "4"}, parent="org", namespaces=("ns-a",), is_parent=True)
    got = answer(lookup, review("UPDATE", new, old))
    assert refused(got) == "quota has bound pods, isParent is forbidden to modify as true, quotaName: team-a"
    assert lookup.calls == ["has-pods:team-a:ns-a"]


def test_update_of_a_quota_not_yet_watched_relists() -> None:
    fresh = cluster()
    fresh["new"] = q("new", min={"cpu": "1"}, max={"cpu": "1"})
    lookup = FakeLookup(cluster(), listed=fresh)
    got = answer(
        lookup,
        review(
            "UPDATE", raw("new", min={"cpu": "1"}, max={"cpu": "2"}), raw("new", min={"cpu": "1"}, max={"cpu": "1"})
        ),
    )
    assert refused(got) == ""
    assert lookup.calls == ["relist", "admitted:new"]


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({"max": {"cpu": "lots"}}, "ElasticQuota team/c: spec.max.cpu: ", id="not-a-quantity"),
        pytest.param(
            {"min": {"cpu": "-1"}, "max": {"cpu": "2"}},
            "c quota.Spec.Min's value < 0, in dimensions :[cpu]",
            id="negative-min",
        ),
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
        (
            review("CREATE", bad, resource="pods"),
            "this webhook serves CREATE/DELETE/UPDATE of scheduling.sigs.k8s.io/elasticquotas; got 'CREATE' of",
        ),
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


def test_allowed_writes_count_until_the_watch_delivers_them() -> None:
    from koord_scheduler.webhook.quota_kube import ADMITTED_SECONDS, KubeQuotaLookup

    now = [0.0]
    lookup = KubeQuotaLookup(None, clock=lambda: now[0])  # type: ignore[arg-type]  # no API call is made
    lookup._on_quota(None, None, None)
    assert lookup.quotas() == {}
    lookup.admitted("a", q("a"))
    lookup.admitted("b", None)
    assert sorted(lookup.quotas()) == ["a"]
    now[0] = ADMITTED_SECONDS + 1
    assert lookup.quotas() == {}


def test_a_parent_then_its_children_back_to_back_are_checked_against_each_other() -> None:
    """A tree applied from one file: the second child's min sum counts the first before any watch event."""
    from koord_scheduler.webhook.quota_kube import KubeQuotaLookup

    class Watchless(KubeQuotaLookup):
        async def relist(self) -> Mapping[str, QuotaRecord]:
            return self.quotas()

    lookup = Watchless(None)  # type: ignore[arg-type]
    validator = QuotaValidator(lookup)
    steps = [
        raw("p", min={"cpu": "4"}, max={"cpu": "8"}, is_parent=True),
        raw("c1", min={"cpu": "3"}, max={"cpu": "8"}, parent="p"),
        raw("c2", min={"cpu": "3"}, max={"cpu": "8"}, parent="p"),
    ]
    got = [refused(asyncio.run(validator.review(review("CREATE", obj)))) for obj in steps]
    assert got == ["", "", "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: p"]
