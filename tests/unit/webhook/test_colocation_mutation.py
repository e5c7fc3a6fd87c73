"""Table tests of the ClusterColocationProfile mutation.

Cases ``koord-*`` transcribe Koordinator's ``pkg/webhook/pod/mutating/cluster_colocation_profile_test.go``
(input pod, profile, expected pod) and ``extended_resource_spec_test.go``; their expectations are
Koordinator's, with Go's canonical quantity strings (``NewQuantity(1000, DecimalSI)`` is ``"1k"``).
The profile-only cases of that file do not run the extended-resource-spec step, so ``want`` there is
compared without that annotation (``ers=False``). Cases ``rule-*`` check one rule of the module
docstring each, with expectations worked out by hand from Koordinator's source.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from apis.colocation import ANNOTATION_EXTENDED_RESOURCE_SPEC, ANNOTATION_SKIP_UPDATE_RESOURCES, resolve_profile
from koord_scheduler.webhook.jsonpatch import apply_patch, create_patch
from koord_scheduler.webhook.mutation import (
    MutationError,
    PriorityClassInfo,
    ProfileSkip,
    match_profiles,
    mutate_pod,
)

Json = dict[str, Any]

QOS = "koordinator.sh/qosClass"
PRIO = "koordinator.sh/priority"
BCPU, BMEM = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
MCPU, MMEM = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"

PRIORITY_CLASSES = {
    "koordinator-batch": PriorityClassInfo("koordinator-batch", 5999, "fakePreemptionPolicy"),
    "koord-prod": PriorityClassInfo("koord-prod", 9000, "PreemptLowerPriority"),
    "koord-mid": PriorityClassInfo("koord-mid", 7000, "PreemptLowerPriority"),
    "koord-batch": PriorityClassInfo("koord-batch", 5000, "PreemptLowerPriority"),
    "koord-free": PriorityClassInfo("koord-free", 3000, "PreemptLowerPriority"),
}
NAMESPACE_LABELS = {"enable-koordinator-colocation": "true"}


def res(requests: Json | None = None, limits: Json | None = None) -> Json:
    out: Json = {}
    if limits is not None:
        out["limits"] = limits
    if requests is not None:
        out["requests"] = requests
    return out


def koord_pod(*, labels: Json | None = None, annotations: Json | None = None, **spec: Any) -> Json:
    """The input pod of Koordinator's test table (batch priority 5999, one init container)."""
    meta: Json = {
        "namespace": "default",
        "name": "test-pod-1",
        "labels": {"koordinator-colocation-pod": "true", **(labels or {})},
    }
    if annotations is not None:
        meta["annotations"] = annotations
    body: Json = {
        "initContainers": [
            {
                "name": "test-init-container-a",
                "resources": res({"cpu": "500m", "memory": "1Gi"}, {"cpu": "500m", "memory": "1Gi"}),
            }
        ],
        "containers": [
            {"name": "test-container-a", "resources": res({"cpu": "1", "memory": "4Gi"}, {"cpu": "1", "memory": "4Gi"})}
        ],
        "overhead": {"cpu": "1", "memory": "2Gi"},
        "schedulerName": "nonExistSchedulerName",
        "priority": 5999,
    }
    body.update(spec)
    return {"metadata": meta, "spec": {k: v for k, v in body.items() if v is not None}}


def renamed_spec(**spec: Any) -> Json:
    """The expected spec of the table's pod once resources are renamed to batch-*."""
    body: Json = {
        "initContainers": [
            {"name": "test-init-container-a", "resources": res({BCPU: "500", BMEM: "1Gi"}, {BCPU: "500", BMEM: "1Gi"})}
        ],
        "containers": [
            {"name": "test-container-a", "resources": res({BCPU: "1k", BMEM: "4Gi"}, {BCPU: "1k", BMEM: "4Gi"})}
        ],
        "overhead": {BCPU: "1k", BMEM: "2Gi"},
        "schedulerName": "koordinator-scheduler",
        "priority": 5999,
        "priorityClassName": "koordinator-batch",
        "preemptionPolicy": "fakePreemptionPolicy",
    }
    body.update(spec)
    return {k: v for k, v in body.items() if v is not None}


PATCH = {"metadata": {"labels": {"test-patch-label": "patch-a"}, "annotations": {"test-patch-annotation": "patch-b"}}}
MUTATED_LABELS = {
    "koordinator-colocation-pod": "true",
    "testLabelA": "valueA",
    "test-patch-label": "patch-a",
    QOS: "BE",
    PRIO: "1111",
}
MUTATED_ANNOTATIONS = {"testAnnotationA": "valueA", "test-patch-annotation": "patch-b"}


def koord_profile(*, name: str = "test-profile", annotations: Json | None = None, **spec: Any) -> Json:
    body: Json = {
        "namespaceSelector": {"matchLabels": {"enable-koordinator-colocation": "true"}},
        "selector": {"matchLabels": {"koordinator-colocation-pod": "true"}},
        "labels": {"testLabelA": "valueA"},
        "annotations": {"testAnnotationA": "valueA"},
        "schedulerName": "koordinator-scheduler",
        "qosClass": "BE",
        "priorityClassName": "koordinator-batch",
        "koordinatorPriority": 1111,
        "patch": PATCH,
    }
    body.update(spec)
    meta: Json = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {k: v for k, v in body.items() if v is not None}}


def want_pod(labels: Json, annotations: Json | None, spec: Json) -> Json:
    meta: Json = {"namespace": "default", "name": "test-pod-1", "labels": labels}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec}


def rolls(value: int) -> Callable[[], int]:
    return lambda: value


UNCHANGED_LABELS = {"koordinator-colocation-pod": "true"}
UNRENAMED_SPEC = koord_pod()["spec"]
SKIP_RESOURCES_SPEC = {
    **UNRENAMED_SPEC,
    "schedulerName": "koordinator-scheduler",
    "priorityClassName": "koordinator-batch",
    "preemptionPolicy": "fakePreemptionPolicy",
}

# (pod, profiles, roll, ers, want)
CASES = [
    pytest.param(
        koord_pod(),
        [koord_profile()],
        0,
        False,
        want_pod(MUTATED_LABELS, MUTATED_ANNOTATIONS, renamed_spec()),
        id="koord-mutating-pod",
    ),
    pytest.param(
        koord_pod(
            initContainers=None,
            overhead=None,
            containers=[{"name": "test-container-a", "resources": res(None, {"cpu": "1", "memory": "4Gi"})}],
        ),
        [koord_profile()],
        0,
        False,
        want_pod(
            MUTATED_LABELS,
            MUTATED_ANNOTATIONS,
            renamed_spec(
                initContainers=None,
                overhead=None,
                containers=[
                    {"name": "test-container-a", "resources": res({BCPU: "1k", BMEM: "4Gi"}, {BCPU: "1k", BMEM: "4Gi"})}
                ],
            ),
        ),
        id="koord-set-default-request-to-the-limit",
    ),
    pytest.param(
        koord_pod(
            initContainers=None,
            overhead=None,
            containers=[{"name": "test-container-a", "resources": res({"cpu": "1", "memory": "4Gi"})}],
        ),
        [koord_profile()],
        0,
        False,
        want_pod(
            MUTATED_LABELS,
            MUTATED_ANNOTATIONS,
            renamed_spec(
                initContainers=None,
                overhead=None,
                containers=[{"name": "test-container-a", "resources": res({BCPU: "1k", BMEM: "4Gi"})}],
            ),
        ),
        id="koord-keep-limit-unset",
    ),
    pytest.param(
        koord_pod(),
        [koord_profile(probability=100)],
        99,
        False,
        want_pod(MUTATED_LABELS, MUTATED_ANNOTATIONS, renamed_spec()),
        id="koord-percent-100",
    ),
    pytest.param(
        koord_pod(),
        [koord_profile(probability=0)],
        0,
        False,
        want_pod(
            UNCHANGED_LABELS,
            None,
            renamed_spec(schedulerName="nonExistSchedulerName", priorityClassName=None, preemptionPolicy=None),
        ),
        id="koord-percent-0-profile-skipped-resources-still-renamed",
    ),
    pytest.param(
        koord_pod(),
        [koord_profile(probability=50)],
        70,
        False,
        want_pod(
            UNCHANGED_LABELS,
            None,
            renamed_spec(schedulerName="nonExistSchedulerName", priorityClassName=None, preemptionPolicy=None),
        ),
        id="koord-percent-50-rand-70-skipped",
    ),
    pytest.param(
        koord_pod(),
        [koord_profile(probability=50)],
        30,
        False,
        want_pod(MUTATED_LABELS, MUTATED_ANNOTATIONS, renamed_spec()),
        id="koord-percent-50-rand-30-applied",
    ),
    pytest.param(
        koord_pod(),
        [koord_profile(annotations={ANNOTATION_SKIP_UPDATE_RESOURCES: "true"})],
        0,
        False,
        want_pod(MUTATED_LABELS, MUTATED_ANNOTATIONS, SKIP_RESOURCES_SPEC),
        id="koord-skip-update-resource-by-profile-annotation",
    ),
    pytest.param(
        koord_pod(labels={"label-key-to-load": "test-label-value"}),
        [
            koord_profile(
                labels={"testLabelA": "valueA", "koordinator.sh/scheduler-name": "koordinator-scheduler"},
                schedulerName=None,
                labelKeysMapping={
                    "label-key-to-load": "label-key-to-store",
                    "label-key-to-load-not-exist": "label-key-to-store-not-exist",
                },
            )
        ],
        0,
        False,
        want_pod(
            {
                **MUTATED_LABELS,
                "koordinator.sh/scheduler-name": "koordinator-scheduler",
                "label-key-to-load": "test-label-value",
                "label-key-to-store": "test-label-value",
                "label-key-to-store-not-exist": "",
            },
            MUTATED_ANNOTATIONS,
            renamed_spec(schedulerName="nonExistSchedulerName"),
        ),
        id="koord-mutate-pod-labels-according-to-labels-1",
    ),
    pytest.param(
        koord_pod(labels={"label-key-to-load": "test-label-value"}),
        [koord_profile(labelKeysMapping={"label-key-to-load": "label-key-to-store"})],
        0,
        False,
        want_pod(
            {**MUTATED_LABELS, "label-key-to-load": "test-label-value", "label-key-to-store": "test-label-value"},
            MUTATED_ANNOTATIONS,
            renamed_spec(),
        ),
        id="koord-mutate-pod-labels-according-to-labels",
    ),
    pytest.param(
        koord_pod(annotations={"annotation-key-to-load": "test-annotation-value"}),
        [koord_profile(annotationKeysMapping={"annotation-key-to-load": "annotation-key-to-store"})],
        0,
        False,
        want_pod(
            MUTATED_LABELS,
            {
                "annotation-key-to-load": "test-annotation-value",
                **MUTATED_ANNOTATIONS,
                "annotation-key-to-store": "test-annotation-value",
            },
            renamed_spec(),
        ),
        id="koord-mutate-pod-annotations-according-to-annotations",
    ),
    pytest.param(
        koord_pod(labels={"label-key-to-load": "test-label-value", "label-key-1": "label-value-1"}),
        [
            koord_profile(
                labels={"testLabelA": "valueA", "koordinator.sh/scheduler-name": "koordinator-scheduler"},
                schedulerName=None,
                labelKeysMapping={
                    "label-key-to-load": "label-key-to-store",
                    "label-key-to-load-not-exist": "label-key-to-store-not-exist",
                },
                labelSuffixes={
                    "label-key-1": "suffix",
                    "label-key-to-store": "suffix-0",
                    "suffix-label-key-1": "suffix-1",
                },
            )
        ],
        0,
        False,
        want_pod(
            {
                **MUTATED_LABELS,
                "label-key-to-load": "test-label-value",
                "label-key-1": "label-value-1suffix",
                "label-key-to-store": "test-label-valuesuffix-0",
                "label-key-to-store-not-exist": "",
                "koordinator.sh/scheduler-name": "koordinator-scheduler",
            },
            MUTATED_ANNOTATIONS,
            renamed_spec(schedulerName="nonExistSchedulerName"),
        ),
        id="koord-labels-with-suffixes",
    ),
    pytest.param(
        {
            "metadata": {"namespace": "default", "name": "test-pod-1", "labels": {QOS: "BE", PRIO: "1111"}},
            "spec": {
                "containers": [
                    {
                        "name": "test-container-a",
                        "resources": res(
                            {BCPU: "1000", BMEM: "4Gi", "unknown-resource": "1"},
                            {BCPU: "1000", BMEM: "4Gi", "unknown-resource": "1"},
                        ),
                    }
                ],
                "schedulerName": "koordinator-scheduler",
                "priority": 5999,
                "priorityClassName": "koordinator-batch",
            },
        },
        [],
        0,
        True,
        {
            "metadata": {
                "namespace": "default",
                "name": "test-pod-1",
                "labels": {QOS: "BE", PRIO: "1111"},
                "annotations": {
                    ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(
                        {
                            "containers": {
                                "test-container-a": {
                                    "limits": {BCPU: "1k", BMEM: "4Gi"},
                                    "requests": {BCPU: "1k", BMEM: "4Gi"},
                                }
                            }
                        },
                        separators=(",", ":"),
                    )
                },
            },
            "spec": {
                "containers": [
                    {
                        "name": "test-container-a",
                        "resources": res(
                            {BCPU: "1000", BMEM: "4Gi", "unknown-resource": "1"},
                            {BCPU: "1000", BMEM: "4Gi", "unknown-resource": "1"},
                        ),
                    }
                ],
                "schedulerName": "koordinator-scheduler",
                "priority": 5999,
                "priorityClassName": "koordinator-batch",
            },
        },
        id="koord-extended-resource-spec-from-containers",
    ),
]


def pod(
    labels: Json | None = None, *, containers: list[Json] | None = None, annotations: Json | None = None, **spec: Any
) -> Json:
    meta: Json = {"namespace": "default", "name": "p", "labels": dict(labels or {"app": "spark"})}
    if annotations is not None:
        meta["annotations"] = annotations
    body: Json = {
        "containers": containers
        if containers is not None
        else [{"name": "main", "resources": res({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "2Gi"})}]
    }
    body.update(spec)
    return {"metadata": meta, "spec": body}


def profile(name: str = "a-be", *, annotations: Json | None = None, **spec: Any) -> Json:
    meta: Json = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"selector": {"matchLabels": {"app": "spark"}}, **spec}}


def ers(containers: Json) -> Json:
    return {ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps({"containers": containers}, separators=(",", ":"))}


W1_RESOURCES = res({BCPU: "500", BMEM: "1Gi"}, {BCPU: "1k", BMEM: "2Gi"})
NATIVE = res({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "2Gi"})
BATCH_PC = {"priorityClassName": "koord-batch", "priority": 5000, "preemptionPolicy": "PreemptLowerPriority"}

CASES += [
    pytest.param(
        pod(),
        [
            profile(
                qosClass="BE",
                priorityClassName="koord-batch",
                koordinatorPriority=1000,
                schedulerName="koord-scheduler",
                labels={"team": "x"},
            )
        ],
        0,
        True,
        {
            "metadata": {
                "namespace": "default",
                "name": "p",
                "labels": {"app": "spark", "team": "x", QOS: "BE", PRIO: "1000"},
                "annotations": ers(
                    {"main": {"limits": {BCPU: "1k", BMEM: "2Gi"}, "requests": {BCPU: "500", BMEM: "1Gi"}}}
                ),
            },
            "spec": {
                "containers": [{"name": "main", "resources": W1_RESOURCES}],
                "schedulerName": "koord-scheduler",
                **BATCH_PC,
            },
        },
        id="rule-be-batch-renamed-with-extended-resource-spec",
    ),
    pytest.param(
        pod(
            containers=[
                {"name": "app", "resources": res({"cpu": "1500m", "memory": "3Gi"}, {"cpu": "3", "memory": "3Gi"})}
            ],
            initContainers=[
                {
                    "name": "setup",
                    "resources": res({"cpu": "250m", "memory": "256Mi"}, {"cpu": "250m", "memory": "256Mi"}),
                }
            ],
            overhead={"cpu": "100m", "memory": "64Mi"},
        ),
        [profile(priorityClassName="koord-mid")],
        0,
        True,
        {
            "metadata": {"namespace": "default", "name": "p", "labels": {"app": "spark"}},
            "spec": {
                "containers": [
                    {"name": "app", "resources": res({MCPU: "1500", MMEM: "3Gi"}, {MCPU: "3k", MMEM: "3Gi"})}
                ],
                "initContainers": [
                    {"name": "setup", "resources": res({MCPU: "250", MMEM: "256Mi"}, {MCPU: "250", MMEM: "256Mi"})}
                ],
                "overhead": {MCPU: "100", MMEM: "64Mi"},
                "priorityClassName": "koord-mid",
                "priority": 7000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        },
        id="rule-mid-renames-init-containers-and-overhead-no-annotation",
    ),
    pytest.param(
        pod(),
        [profile(qosClass="BE", priorityClassName="koord-free")],
        0,
        True,
        {
            "metadata": {"namespace": "default", "name": "p", "labels": {"app": "spark", QOS: "BE"}},
            "spec": {
                "containers": [{"name": "main", "resources": NATIVE}],
                "priorityClassName": "koord-free",
                "priority": 3000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        },
        id="rule-free-keeps-cpu-memory",
    ),
    pytest.param(
        pod(),
        [profile(qosClass="LS", priorityClassName="koord-prod")],
        0,
        True,
        {
            "metadata": {"namespace": "default", "name": "p", "labels": {"app": "spark", QOS: "LS"}},
            "spec": {
                "containers": [{"name": "main", "resources": NATIVE}],
                "priorityClassName": "koord-prod",
                "priority": 9000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        },
        id="rule-prod-keeps-cpu-memory",
    ),
    pytest.param(
        pod(),
        [profile(qosClass="BE", namespaceSelector={"matchLabels": {"colocation": "on"}})],
        0,
        True,
        pod(),
        id="rule-namespace-selector-mismatch-untouched",
    ),
    pytest.param(
        pod({"app": "web"}),
        [profile(qosClass="BE", priorityClassName="koord-batch")],
        0,
        True,
        pod({"app": "web"}),
        id="rule-selector-mismatch-untouched",
    ),
    pytest.param(pod(priority=5500), [], 0, True, pod(priority=5500), id="rule-no-profile-matched-no-rename"),
    pytest.param(
        pod(qosClass=None),
        [profile("b-team", labels={"team": "b"}), profile("a-team", labels={"team": "a"})],
        0,
        True,
        {
            "metadata": {"namespace": "default", "name": "p", "labels": {"app": "spark", "team": "b"}},
            "spec": {"containers": [{"name": "main", "resources": NATIVE}], "qosClass": None},
        },
        id="rule-profiles-applied-by-name-later-wins",
    ),
    pytest.param(
        pod(),
        [
            profile("a-skip", probability=0, annotations={ANNOTATION_SKIP_UPDATE_RESOURCES: ""}),
            profile("b-batch", qosClass="BE", priorityClassName="koord-batch"),
        ],
        0,
        True,
        {
            "metadata": {"namespace": "default", "name": "p", "labels": {"app": "spark", QOS: "BE"}},
            "spec": {"containers": [{"name": "main", "resources": NATIVE}], **BATCH_PC},
        },
        id="rule-skip-annotation-counts-even-when-probability-skips",
    ),
    pytest.param(
        pod(),
        [profile(probability="50%", labels={"rolled": "in"})],
        50,
        True,
        {
            "metadata": {"namespace": "default", "name": "p", "labels": {"app": "spark", "rolled": "in"}},
            "spec": {"containers": [{"name": "main", "resources": NATIVE}]},
        },
        id="rule-percent-string-roll-equal-applies",
    ),
    pytest.param(
        pod(),
        [profile(probability="50%", labels={"rolled": "in"})],
        51,
        True,
        pod(),
        id="rule-percent-string-roll-above-skips",
    ),
    pytest.param(
        pod(),
        [profile(qosClass="BE")],
        0,
        True,
        {
            "metadata": {
                "namespace": "default",
                "name": "p",
                "labels": {"app": "spark", QOS: "BE"},
                "annotations": ers(
                    {"main": {"limits": {BCPU: "1k", BMEM: "2Gi"}, "requests": {BCPU: "500", BMEM: "1Gi"}}}
                ),
            },
            "spec": {"containers": [{"name": "main", "resources": W1_RESOURCES}]},
        },
        id="rule-be-label-without-priority-defaults-to-batch",
    ),
    pytest.param(
        pod({"app": "spark", "koordinator.sh/priority-class": "koord-mid"}, priority=5500),
        [profile(labels={"seen": "yes"})],
        0,
        True,
        {
            "metadata": {
                "namespace": "default",
                "name": "p",
                "labels": {"app": "spark", "koordinator.sh/priority-class": "koord-mid", "seen": "yes"},
            },
            "spec": {
                "containers": [
                    {"name": "main", "resources": res({MCPU: "500", MMEM: "1Gi"}, {MCPU: "1k", MMEM: "2Gi"})}
                ],
                "priority": 5500,
            },
        },
        id="rule-priority-class-label-beats-priority-band",
    ),
    pytest.param(
        pod(annotations=ers({"main": {"requests": {BCPU: "1"}}})),
        [],
        0,
        True,
        pod(annotations={ANNOTATION_EXTENDED_RESOURCE_SPEC: "{}"}),
        id="rule-stale-extended-resource-spec-cleared",
    ),
    pytest.param(
        pod(),
        [
            profile(
                patch={
                    "spec": {
                        "containers": [{"name": "main", "env": [{"name": "MODE", "value": "batch"}]}],
                        "tolerations": [{"key": "batch", "operator": "Exists"}],
                    }
                }
            )
        ],
        0,
        True,
        {
            "metadata": {"namespace": "default", "name": "p", "labels": {"app": "spark"}},
            "spec": {
                "containers": [{"name": "main", "resources": NATIVE, "env": [{"name": "MODE", "value": "batch"}]}],
                "tolerations": [{"key": "batch", "operator": "Exists"}],
            },
        },
        id="rule-patch-merges-containers-by-name",
    ),
]


def _without_ers(obj: Json) -> Json:
    out = copy.deepcopy(obj)
    annotations = out["metadata"].get("annotations")
    if annotations is not None:
        annotations.pop(ANNOTATION_EXTENDED_RESOURCE_SPEC, None)
        if not annotations:
            del out["metadata"]["annotations"]
    return out


def _clean(obj: Json) -> Json:
    out = copy.deepcopy(obj)
    out["spec"] = {k: v for k, v in out["spec"].items() if v is not None}
    return out


@pytest.mark.parametrize(("pod_in", "profiles", "roll", "with_ers", "want"), CASES)
def test_mutation_table(pod_in: Json, profiles: list[Json], roll: int, with_ers: bool, want: Json) -> None:
    pod_in = _clean(pod_in)
    before = copy.deepcopy(pod_in)
    resolved = [resolve_profile(p) for p in profiles]
    matched = match_profiles(pod_in["metadata"]["labels"], resolved, NAMESPACE_LABELS)
    result = mutate_pod(pod_in, matched, priority_classes=PRIORITY_CLASSES, roll=rolls(roll))
    got = result.pod if with_ers else _without_ers(result.pod)
    assert got == _clean(want)
    assert result.skipped == []
    assert pod_in == before, "the input pod must not change"
    assert apply_patch(pod_in, create_patch(pod_in, result.pod)) == result.pod


def test_enough_cases() -> None:
    assert len(CASES) >= 20


def test_missing_priority_class_skips_that_profile_only() -> None:
    profiles = [
        resolve_profile(profile("a-missing", priorityClassName="nope", labels={"x": "1"})),
        resolve_profile(profile("b-ok", labels={"y": "2"})),
    ]
    result = mutate_pod(pod(), profiles, priority_classes=PRIORITY_CLASSES, roll=rolls(0))
    assert result.pod["metadata"]["labels"] == {"app": "spark", "y": "2"}
    assert result.applied == ["b-ok"]
    assert result.skipped == [ProfileSkip("a-missing", "PriorityClassNotFound", "PriorityClass 'nope' not found")]


def test_patch_leaving_an_invalid_pod_skips_the_profile() -> None:
    bad = resolve_profile(
        profile(patch={"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "lots"}}}]}})
    )
    result = mutate_pod(pod(), [bad], priority_classes=PRIORITY_CLASSES, roll=rolls(0))
    assert result.pod == pod()
    assert [s.reason for s in result.skipped] == ["InvalidPatch"]


def test_unparsable_annotation_is_a_mutation_error() -> None:
    with pytest.raises(MutationError, match="extended-resource-spec"):
        mutate_pod(
            pod(annotations={ANNOTATION_EXTENDED_RESOURCE_SPEC: "{not json"}),
            [],
            priority_classes=PRIORITY_CLASSES,
            roll=rolls(0),
        )
