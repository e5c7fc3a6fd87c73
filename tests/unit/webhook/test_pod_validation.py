"""The pod validating webhook: Koordinator's test tables (tests/fixtures/koordinator_pod_webhook_cases.py)
through the AdmissionReview handler, the rules' edges, and the review envelope."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from apis.scheduling.elasticquota import LABEL_IS_PARENT, LABEL_PARENT, QuotaRecord, parse_elastic_quota
from koord_scheduler.webhook.gates import AdmissionGates
from koord_scheduler.webhook.pod_rules import aggregate, go_quote, quota_name_of_pod
from koord_scheduler.webhook.pod_validation import PodValidationMetrics, PodValidator
from koord_scheduler.webhook.quota import refused
from koord_scheduler.webhook.quota_kube import by_name
from koord_scheduler.webhook.review import BadReviewError
from tests.fixtures.koordinator_pod_webhook_cases import (
    ALL_CASES,
    QUOTA_NAME,
    QUOTA_POD_CASES,
    QUOTA_POD_TOPOLOGY,
    PodCase,
    container,
    pod,
)


def quota(spec: Mapping[str, Any], namespace: str = "team") -> QuotaRecord:
    labels = {}
    if spec.get("parent"):
        labels[LABEL_PARENT] = spec["parent"]
    if spec.get("is_parent"):
        labels[LABEL_IS_PARENT] = "true"
    annotations = dict(spec.get("annotations", {}))
    return parse_elastic_quota(
        {
            "metadata": {"name": spec["name"], "namespace": namespace, "labels": labels, "annotations": annotations},
            "spec": {"min": spec.get("min", {}), "max": spec.get("max", {})},
        }
    )


class Quotas:
    def __init__(self, records: list[QuotaRecord]) -> None:
        self.records = by_name(records)

    def quotas(self) -> Mapping[str, QuotaRecord]:
        return self.records


def review(
    operation: str, new: dict[str, Any], old: dict[str, Any] | None = None, *, namespace: str = "team"
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": "u-1",
        "operation": operation,
        "namespace": namespace,
        "object": new,
        "resource": {"group": "", "version": "v1", "resource": "pods"},
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def answer(case: PodCase, validator: PodValidator) -> dict[str, Any]:
    return asyncio.run(validator.review(review(case.operation, case.new, case.old)))


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in ALL_CASES])
def test_koordinator_pod_tables(case: PodCase) -> None:
    validator = PodValidator(gates=AdmissionGates.resolve(case.gates))
    got = answer(case, validator)
    assert (got["response"]["allowed"], refused(got)) == (case.want_allowed, case.want_message)
    if not case.want_allowed:
        assert got["response"]["status"]["code"] == 400


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in QUOTA_POD_CASES])
def test_koordinator_quota_pod_table(case: PodCase) -> None:
    quotas = Quotas([quota(q) for q in QUOTA_POD_TOPOLOGY])
    validator = PodValidator(quotas, gates=AdmissionGates.resolve(case.gates))
    got = answer(case, validator)
    assert (got["response"]["allowed"], refused(got)) == (case.want_allowed, case.want_message)


# ----- beyond the tables -----


def test_errors_of_one_step_are_aggregated_like_field_error_lists() -> None:
    old = pod(labels={"koordinator.sh/qosClass": "BE", "koordinator.sh/priority": "1"})
    new = pod(labels={"koordinator.sh/qosClass": "LS", "koordinator.sh/priority": "2"})
    got = asyncio.run(PodValidator().review(review("UPDATE", new, old)))
    assert refused(got) == (
        '[labels.koordinator.sh/qosClass: Invalid value: "LS": field is immutable, '
        'labels.koordinator.sh/priority: Invalid value: "2": field is immutable]'
    )


def test_reserve_pod_annotation_is_checked_before_the_colocation_rules() -> None:
    new = pod(labels={"koordinator.sh/qosClass": "BE"}, annotations={"scheduling.koordinator.sh/reserve-pod": "true"})
    got = asyncio.run(PodValidator().review(review("CREATE", new)))
    assert refused(got) == "annotations.scheduling.koordinator.sh/reserve-pod: Forbidden: cannot set in annotations"


@pytest.mark.parametrize(
    ("labels", "priority", "cpu", "want"),
    [
        pytest.param(
            {"koordinator.sh/qosClass": "LSE"},
            9500,
            "1500m",
            'pod.spec.containers[*].resources.requests: Invalid value: "1500m": the requested CPUs of LSR '
            "Pod must be integer",
            id="lse-needs-integer-cpus-too",
        ),
        pytest.param({"koordinator.sh/qosClass": "LSE"}, 3000, "2", "", id="lse-has-no-class-restriction"),
        pytest.param(
            {"koordinator.sh/qosClass": "LSR", "koordinator.sh/priority-class": "koord-prod"},
            None,
            "2",
            "",
            id="priority-class-label-wins-over-spec-priority",
        ),
        pytest.param(
            {"koordinator.sh/qosClass": "LSR", "koordinator.sh/priority-class": "nonsense"},
            9500,
            "2",
            "Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass= cannot be used in combination",
            id="unknown-priority-class-label-is-none",
        ),
        pytest.param({"koordinator.sh/qosClass": "bogus"}, None, "100m", "", id="unknown-qos-is-none"),
    ],
)
def test_qos_and_priority_edges(labels: dict[str, str], priority: int | None, cpu: str, want: str) -> None:
    new = pod(labels=labels, priority=priority, containers=[container("c", requests={"cpu": cpu})])
    assert refused(asyncio.run(PodValidator().review(review("CREATE", new)))) == want


def test_init_containers_and_overhead_count_in_the_cpu_request() -> None:
    """``PodRequests``: max(containers, init) plus overhead, so 1 + 0.5 overhead is not whole."""
    new = pod(
        labels={"koordinator.sh/qosClass": "LSR"}, priority=9500, containers=[container("c", requests={"cpu": "1"})]
    )
    new["spec"]["overhead"] = {"cpu": "500m"}
    new["spec"]["initContainers"] = [container("i", requests={"cpu": "1"})]
    assert refused(asyncio.run(PodValidator().review(review("CREATE", new)))) == (
        'pod.spec.containers[*].resources.requests: Invalid value: "1500m": the requested CPUs of LSR Pod must be '
        "integer"
    )


def test_preemptible_label_is_immutable() -> None:
    old = pod("p", labels={"quota.scheduling.koordinator.sh/preemptible": "false"})
    got = asyncio.run(PodValidator().review(review("UPDATE", pod("p"), old)))
    assert refused(got) == "Preemptible label is forbidden modify now."


def test_the_gate_off_allows_everything() -> None:
    validator = PodValidator(gates=AdmissionGates.resolve({"PodValidatingWebhook": False}))
    bad = pod(annotations={"scheduling.koordinator.sh/reserve-pod": ""})
    assert refused(asyncio.run(validator.review(review("CREATE", bad)))) == ""


def test_a_pod_the_parser_cannot_read_is_refused_naming_the_field() -> None:
    new = pod(containers=[container("c", requests={"cpu": "1e30"})])
    got = asyncio.run(PodValidator().review(review("CREATE", new)))
    assert "containers[0].resources.requests.cpu" in refused(got)


def test_update_without_the_old_pod_is_a_bad_review() -> None:
    with pytest.raises(BadReviewError) as info:
        asyncio.run(PodValidator().review(review("UPDATE", pod("p"))))
    assert info.value.uid == "u-1"


def test_metrics_count_refusals_by_rule() -> None:
    registry = CollectorRegistry()
    validator = PodValidator(metrics=PodValidationMetrics.create(registry))
    asyncio.run(validator.review(review("CREATE", pod(labels={"koordinator.sh/qosClass": "BE"}, priority=9500))))
    asyncio.run(validator.review(review("CREATE", pod())))
    assert registry.get_sample_value("koord_webhook_pods_refused_total", {"rule": "colocation"}) == 1
    assert registry.get_sample_value("koord_webhook_pod_validation_duration_seconds_count") == 2


@pytest.mark.parametrize(
    ("labels", "namespace", "disable_default", "want"),
    [
        pytest.param({}, "ns", False, "koordinator-default-quota", id="default-quota"),
        pytest.param({QUOTA_NAME: "test-quota"}, "test-ns", False, "test-quota", id="quota-name-from-label"),
        pytest.param({}, "test-ns", False, "test-ns", id="quota-name-from-namespace"),
        pytest.param({}, "bound-ns", False, "bound", id="quota-name-from-namespaces-annotation"),
        pytest.param({QUOTA_NAME: "ghost"}, "test-ns", False, "koordinator-default-quota", id="unknown-is-default"),
        pytest.param({}, "test-ns", True, "koordinator-default-quota", id="disable-default-quota-reads-label-only"),
    ],
)
def test_quota_of_a_pod(labels: dict[str, str], namespace: str, disable_default: bool, want: str) -> None:
    """Koordinator's ``TestQuotaTopology_getQuotaNameFromPod`` cases, and the namespaces annotation."""
    quotas = by_name(
        [
            quota({"name": "test-quota"}, "test-ns"),
            quota({"name": "parent-quota", "is_parent": True}, "test-ns"),
            quota({"name": "test-ns"}, "test-ns"),
            quota({"name": "bound", "annotations": {"quota.scheduling.koordinator.sh/namespaces": '["bound-ns"]'}}),
        ]
    )
    assert quota_name_of_pod(labels, namespace, quotas, disable_default_quota=disable_default) == want


def test_a_pod_in_a_parent_quota_by_namespace_is_refused() -> None:
    quotas = Quotas([quota({"name": "team", "is_parent": True}, "team")])
    got = asyncio.run(PodValidator(quotas).review(review("CREATE", pod("p"), namespace="team")))
    assert refused(got) == "pod can not be linked to a parentQuotaGroup,quota:team, pod:p"


@pytest.mark.parametrize(
    ("text", "want"),
    [("LS", '"LS"'), ('a"b\\c', '"a\\"b\\\\c"'), ("x\ny", '"x\\ny"'), ("\x01", '"\\x01"'), ("é", '"é"')],
)
def test_go_quote(text: str, want: str) -> None:
    assert go_quote(text) == want


def test_aggregate_drops_duplicates() -> None:
    assert aggregate(["a", "a"]) == "a"
    assert aggregate(["a", "b", "a"]) == "[a, b]"
    assert aggregate([]) == ""


def test_admission_gates_come_from_feature_gates_with_koordinators_defaults() -> None:
    from apis.feature_gates import DEFAULT_FEATURE_GATES, SchedulerFeatureGates
    from koord_scheduler.webhook.gates import ADMISSION_GATES

    assert AdmissionGates().values() == {name: DEFAULT_FEATURE_GATES.enabled(name) for name in ADMISSION_GATES}
    gates = AdmissionGates.from_feature_gates(SchedulerFeatureGates.resolve({"PodValidatingWebhook": "false"}))
    assert gates == AdmissionGates(pod_validating_webhook=False)


def test_the_serve_flags_give_the_webhook_its_gates_and_the_gated_controller() -> None:
    from koord_scheduler.app.serve import _options, _parser

    ns = _parser().parse_args(
        ["--leader-elect=false", "--feature-gates", "PodValidatingWebhook=false,ColocationProfileController=true"]
    )
    options = _options(ns)
    assert options.webhook.gates == AdmissionGates(pod_validating_webhook=False)
    assert "colocationprofile" in options.controllers.enabled
    assert "colocationprofile" not in _options(_parser().parse_args(["--leader-elect=false"])).controllers.enabled


def test_pod_mutating_webhook_off_admits_pods_unchanged() -> None:
    from koord_scheduler.webhook.options import allow_pod_create

    body = review("CREATE", pod("p", labels={"a": "b"}))
    assert asyncio.run(allow_pod_create(body)) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u-1", "allowed": True},
    }
