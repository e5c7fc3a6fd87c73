from typing import Any

import pytest

from apis.scheduling.migration import (
    MODE_EVICT_DIRECTLY,
    PodMigrationJob,
    parse_pod_migration_job,
)


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": "migrate-1", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"podRef": {"namespace": "default", "name": "web-0"}, **spec},
    }


def test_parse_reads_the_fields_the_controller_needs() -> None:
    raw = _job(ttl="5m", mode="EvictDirectly", reservationOptions={"reservationRef": {"name": "r1"}})
    raw["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Eviction", "status": "False", "reason": "Evicting"}],
        "podRef": {"namespace": "default", "name": "web-1", "uid": "u2"},
    }
    record = parse_pod_migration_job(raw)
    assert (record.name, record.uid, record.ttl_seconds, record.mode) == ("migrate-1", "u1", 300.0, MODE_EVICT_DIRECTLY)
    assert (record.pod_namespace, record.pod_name, record.reservation_name) == ("default", "web-0", "r1")
    assert record.creation_timestamp == 1767225600.0
    assert record.phase == "Running" and not record.finished
    cond = record.condition("Eviction")
    assert cond is not None and cond.reason == "Evicting"
    assert record.new_pod == ("default", "web-1", "u2")


@pytest.mark.parametrize(
    ("spec", "want_field"),
    [
        pytest.param({"ttl": "soon"}, "spec.ttl", id="ttl-not-a-duration"),
        pytest.param({"mode": "Teleport"}, "spec.mode", id="unknown-mode"),
        pytest.param({"reservationOptions": {"template": [1]}}, "spec.reservationOptions.template", id="template-list"),
    ],
)
def test_parse_names_the_bad_field(spec: dict[str, Any], want_field: str) -> None:
    with pytest.raises(ValueError, match=want_field.replace(".", r"\.")):
        parse_pod_migration_job(_job(**spec))


def test_parse_refuses_a_job_without_pod_ref() -> None:
    raw = _job()
    del raw["spec"]["podRef"]
    with pytest.raises(ValueError, match="podRef"):
        parse_pod_migration_job(raw)


def test_deep_template_is_refused() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(200):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ValueError, match="nested deeper"):
        parse_pod_migration_job(_job(reservationOptions={"template": deep}))


def test_model_round_trips_the_wire_form() -> None:
    raw = _job(ttl="30m", paused=True, deleteOptions={"gracePeriodSeconds": 5})
    assert PodMigrationJob.model_validate(raw).to_wire() == raw
