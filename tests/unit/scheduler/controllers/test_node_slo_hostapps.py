"""NodeSLO ``hostApplications`` from ``host-application-config`` and the ``extensions`` passthrough."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.configuration import parse_slo_config
from koord_scheduler.scheduler.controllers.decide import NodeSLORecord, decide_node_slo, passthrough_extensions
from tests.builders import make_node

NGINX = {
    "name": "nginx",
    "priority": "koord-prod",
    "qos": "LS",
    "cgroupPath": {"base": "CgroupRoot", "parentDir": "host-latency-sensitive/", "relativePath": "nginx/"},
}
YARN = {"name": "yarn", "priority": "koord-batch", "qos": "BE"}
HOST_APPS = json.dumps(
    {
        "applications": [NGINX],
        "nodeConfigs": [
            {
                "name": "colocation-pool",
                "nodeSelector": {"matchLabels": {"node-pool": "colocation"}},
                "applications": [YARN],
            },
            {"name": "bare", "nodeSelector": {"matchLabels": {"node-pool": "bare"}}},
        ],
    }
)


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        pytest.param({}, [NGINX], id="cluster-applications"),
        pytest.param({"node-pool": "colocation"}, [YARN], id="node-entry-replaces-the-list"),
        pytest.param({"node-pool": "bare"}, None, id="node-entry-without-applications-gives-none"),
    ],
)
def test_host_applications(labels: dict[str, str], want: list[dict[str, Any]] | None) -> None:
    config, problems = parse_slo_config({"host-application-config": HOST_APPS})
    assert problems == []
    write = decide_node_slo(make_node("n").labels(labels).build(), "n", None, config)
    assert write is not None and write.verb == "POST"
    assert write.body["spec"].get("hostApplications") == want


def test_bad_host_application_config_is_refused_by_field() -> None:
    _, problems = parse_slo_config({"host-application-config": '{"applications": [{"name": 3}]}'})
    assert [p.key for p in problems] == ["host-application-config"]
    assert "applications.0.name" in problems[0].message


@pytest.mark.parametrize(
    ("existing", "want"),
    [
        pytest.param(None, {"Object": {}}, id="new-node-slo"),
        pytest.param({"Object": {"vendor": {"x": 1}}}, {"Object": {"vendor": {"x": 1}}}, id="object-kept"),
        pytest.param({"object": {"y": 2}}, {"Object": {"y": 2}}, id="matched-regardless-of-case-as-go"),
        pytest.param({"vendor": {"x": 1}}, {"Object": {}}, id="keys-beside-object-dropped-as-go-drops-them"),
    ],
)
def test_extensions_passthrough(existing: Any, want: dict[str, Any]) -> None:
    assert passthrough_extensions(existing) == want


def test_existing_extensions_survive_the_rendering() -> None:
    config, _ = parse_slo_config({"colocation-config": '{"enable": true}'})
    node = make_node("n").build()
    first = decide_node_slo(node, "n", None, config)
    assert first is not None
    spec = {**first.body["spec"], "extensions": {"Object": {"vendor": {"x": 1}}}}
    record = NodeSLORecord("n", json.dumps(spec, sort_keys=True, separators=(",", ":")), spec["extensions"])
    assert decide_node_slo(node, "n", record, config) is None  # nothing to revert
