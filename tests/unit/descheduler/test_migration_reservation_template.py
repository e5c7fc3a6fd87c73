from __future__ import annotations

from typing import Any

import pytest

from apis.scheduling.migration import parse_pod_migration_job
from koord_scheduler.descheduler.migration.reservation_template import (
    TemplateError,
    reservation_for_job,
    reservation_owners,
    skip_node_affinity,
)
from tests.builders import make_pod

SKIP_A = {"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]}


def _job(**spec: Any) -> Any:
    return parse_pod_migration_job(
        {
            "metadata": {"name": "j", "uid": "job-uid"},
            "spec": {"podRef": {"namespace": "default", "name": "web-0"}, **spec},
        }
    )


@pytest.mark.parametrize(
    ("affinity", "want_terms"),
    [
        pytest.param({}, [{"matchFields": [SKIP_A]}], id="no-affinity-one-term"),
        pytest.param(
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]},
                        ]
                    }
                }
            },
            [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}], "matchFields": [SKIP_A]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}, SKIP_A]},
            ],
            id="every-term-gets-the-field",
        ),
    ],
)
def test_skip_node_affinity(affinity: dict[str, Any], want_terms: list[dict[str, Any]]) -> None:
    got = skip_node_affinity(affinity, "node-a")
    assert got["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == want_terms


def test_reservation_from_pod() -> None:
    pod = (
        make_pod("web-0")
        .owner("ReplicaSet", "web-rs")
        .node("node-a")
        .phase("Running")
        .label("app", "web")
        .annotation("scheduling.koordinator.sh/reservation-allocated", '{"name":"old"}')
        .req(cpu="1")
        .obj()
    )
    got = reservation_for_job(_job(ttl="10m"), pod)
    assert got["metadata"] == {
        "name": "job-uid",
        "labels": {
            "app.kubernetes.io/created-by": "koord-descheduler",
        },
    }
    spec = got["spec"]
    assert spec["allocateOnce"] is True and spec["ttl"] == "10m"
    assert spec["owners"] == [
        {
            "controller": {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-rs",
                "uid": "uid-web-rs",
                "controller": True,
                "namespace": "default",
            }
        }
    ]
    template = spec["template"]
    assert template["metadata"] == {"name": "web-0", "namespace": "default", "labels": {"app": "web"}}
    assert "nodeName" not in template["spec"]
    assert template["spec"]["containers"] == pod["spec"]["containers"]
    terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {"nodeSelectorTerms": [{"matchFields": [SKIP_A]}]}
    assert "nodeName" in pod["spec"], "the pod given is not changed"


def test_job_template_wins_but_allocate_once_is_forced() -> None:
    pod = make_pod("web-0").owner("ReplicaSet", "web-rs").node("node-a").phase("Running").obj()
    template = {
        "metadata": {"name": "mine"},
        "spec": {"allocateOnce": False, "ttl": "1h", "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}]},
    }
    got = reservation_for_job(_job(ttl="10m", reservationOptions={"template": template}), pod)
    assert got["metadata"]["name"] == "mine"
    assert got["spec"]["allocateOnce"] is True
    assert got["spec"]["ttl"] == "1h"
    assert got["spec"]["owners"] == [{"labelSelector": {"matchLabels": {"app": "web"}}}]


def test_pending_unschedulable_pod_owns_its_reservation() -> None:
    pod = make_pod("web-0").owner("ReplicaSet", "web-rs").condition("PodScheduled", "False").obj()
    assert reservation_owners(pod) == [
        {"object": {"uid": "uid-default-web-0", "kind": "Pod", "name": "web-0", "namespace": "default"}}
    ]


def test_bare_pod_is_refused() -> None:
    pod = make_pod("web-0").node("node-a").phase("Running").obj()
    with pytest.raises(TemplateError, match="default/web-0 has no controller"):
        reservation_for_job(_job(), pod)
