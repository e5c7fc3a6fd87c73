"""The evictors a job's pod goes through: Koordinator's ``evictor`` package (policy choice, the
soft-eviction annotation) and the controller carrying each one out."""

from __future__ import annotations

import json

import pytest

from koord_scheduler.descheduler.migration.evictors import (
    ANNOTATION_SOFT_EVICTION,
    eviction_policy,
    soft_eviction_spec,
    trigger_and_reason,
)
from tests.unit.descheduler.test_migration_controller import T0, Harness, _job

POLICY = "koordinator.sh/evict-policy"


@pytest.mark.parametrize(
    ("pod_labels", "job_labels", "default", "want"),
    [
        ({}, {}, "Eviction", "Eviction"),
        ({}, {}, "Delete", "Delete"),
        ({POLICY: "SoftEviction"}, {}, "Eviction", "SoftEviction"),  # the pod's label first
        ({POLICY: "Delete"}, {POLICY: "SoftEviction"}, "Eviction", "Delete"),
        ({}, {POLICY: "SoftEviction"}, "Eviction", "SoftEviction"),  # then the job's
        ({POLICY: ""}, {POLICY: "Delete"}, "Eviction", "Delete"),  # an empty label is not set
        ({POLICY: "Drain"}, {}, "Eviction", "Eviction"),  # an unknown evictor: the default
    ],
)
def test_eviction_policy(pod_labels: dict[str, str], job_labels: dict[str, str], default: str, want: str) -> None:
    assert eviction_policy(pod_labels, job_labels, default=default) == want


@pytest.mark.parametrize(
    ("annotations", "want"),
    [  # Koordinator's GetEvictionTriggerAndReason
        ({}, ("", "NotSet")),
        ({"koordinator.sh/evict-trigger": "LowNodeLoad"}, ("LowNodeLoad", "LowNodeLoad")),
        (
            {"koordinator.sh/evict-trigger": "LowNodeLoad", "koordinator.sh/evict-reason": "node is hot"},
            ("LowNodeLoad", "node is hot"),
        ),
    ],
)
def test_trigger_and_reason(annotations: dict[str, str], want: tuple[str, str]) -> None:
    assert trigger_and_reason(annotations) == want


def test_soft_eviction_spec_is_koordinators_json() -> None:
    annotations = {"koordinator.sh/evict-trigger": "LowNodeLoad", "koordinator.sh/evict-reason": "hot"}
    got = soft_eviction_spec(annotations, {"gracePeriodSeconds": 30}, now=T0)
    assert got == (
        '{"timestamp":"2026-01-01T00:00:00Z","deleteOptions":{"gracePeriodSeconds":30},'
        '"initiator":"LowNodeLoad","reason":"hot"}'
    )
    assert json.loads(soft_eviction_spec({}, None, now=T0)) == {"timestamp": "2026-01-01T00:00:00Z", "reason": "NotSet"}


async def test_delete_policy_deletes_the_pod() -> None:
    h = Harness()
    h.controller.eviction_policy = "Delete"
    h.api.jobs["job-1"] = _job(mode="EvictDirectly")
    await h.run()
    assert ("delete_pod", "default/web-0") in h.api.calls
    assert not [c for c in h.api.calls if c[0] == "evict"]
    await h.run()
    assert h.job()["status"]["phase"] == "Succeeded"


async def test_soft_eviction_annotates_and_leaves_the_pod() -> None:
    h = Harness()
    h.controller.eviction_policy = "SoftEviction"
    job = _job(mode="EvictDirectly")
    job["metadata"]["annotations"] = {"koordinator.sh/evict-trigger": "LowNodeLoad"}
    h.api.jobs["job-1"] = job
    await h.run()
    pod = h.api.pods[("default", "web-0")]
    spec = json.loads(pod["metadata"]["annotations"][ANNOTATION_SOFT_EVICTION])
    assert spec == {"timestamp": "2026-01-01T00:00:10Z", "initiator": "LowNodeLoad", "reason": "LowNodeLoad"}
    assert not [c for c in h.api.calls if c[0] in ("evict", "delete_pod")]
    assert h.job()["status"]["phase"] == "Running"  # until the workload's own controller removes the pod
    del h.api.pods[("default", "web-0")]
    await h.run()
    assert h.job()["status"]["phase"] == "Succeeded"


async def test_the_job_label_picks_the_evictor() -> None:
    h = Harness()
    job = _job(mode="EvictDirectly")
    job["metadata"]["labels"] = {POLICY: "Delete"}
    h.api.jobs["job-1"] = job
    await h.run()
    assert ("delete_pod", "default/web-0") in h.api.calls
