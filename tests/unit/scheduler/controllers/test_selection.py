from __future__ import annotations

import pytest

from koord_scheduler.scheduler.controllers.selection import (
    CONTROLLER_NAMES,
    ControllerSelectionError,
    parse_controllers,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param(
            "*",
            set(CONTROLLER_NAMES) - {"colocationprofile", "migration", "descheduler"},
            id="star-is-all-on-by-default",
        ),
        pytest.param(
            "*,migration,descheduler", set(CONTROLLER_NAMES) - {"colocationprofile"}, id="descheduling-by-name"
        ),
        pytest.param("migration,-migration", set(), id="migration-off-wins"),
        pytest.param(
            "*,-nodemetric",
            {"reservation", "nodeslo", "noderesource", "elasticquota", "podgroup", "deviceresource", "quotaprofile"},
            id="star-minus-one",
        ),
        pytest.param(
            "*,colocationprofile", set(CONTROLLER_NAMES) - {"migration", "descheduler"}, id="off-by-default-when-named"
        ),
        pytest.param("nodeslo,noderesource", {"nodeslo", "noderesource"}, id="named-only"),
        pytest.param(
            "-nodeslo,*",
            {"reservation", "noderesource", "nodemetric", "elasticquota", "podgroup", "deviceresource", "quotaprofile"},
            id="minus-wins-in-any-order",
        ),
        pytest.param("nodeslo,-nodeslo", set(), id="minus-wins-over-name"),
        pytest.param(" nodeslo , reservation ", {"nodeslo", "reservation"}, id="spaces"),
    ],
)
def test_parse_controllers(text: str, want: set[str]) -> None:
    assert parse_controllers(text) == want


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("*,nodeslos", "unknown controller 'nodeslos'", id="typo"),
        pytest.param("-bogus", "unknown controller 'bogus'", id="negated-unknown"),
        pytest.param("nodeslo,,x", "empty entry", id="empty-entry"),
    ],
)
def test_refused(text: str, message: str) -> None:
    with pytest.raises(ControllerSelectionError, match=message):
        parse_controllers(text)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param(
            "*", {"CPUNormalization", "ResourceAmplification", "MidResource", "BatchResource"}, id="star-is-all"
        ),
        pytest.param(
            "*,-MidResource", {"CPUNormalization", "ResourceAmplification", "BatchResource"}, id="all-but-mid"
        ),
        pytest.param("BatchResource", {"BatchResource"}, id="batch-only"),
        pytest.param("MidResource", {"MidResource"}, id="named-only"),
    ],
)
def test_parse_noderesource_plugins(text: str, want: set[str]) -> None:
    from koord_scheduler.scheduler.controllers.selection import parse_noderesource_plugins

    assert parse_noderesource_plugins(text) == want


def test_unknown_noderesource_plugin_is_named() -> None:
    from koord_scheduler.scheduler.controllers.selection import parse_noderesource_plugins

    with pytest.raises(ControllerSelectionError, match="--noderesource-plugins: unknown plugin 'GPU'"):
        parse_noderesource_plugins("*,GPU")


def test_batch_only_leaves_mid_keys_alone() -> None:
    from apis.configuration import parse_slo_config
    from apis.slo.nodemetric_record import NodeMetricRecord
    from koord_scheduler.scheduler.controllers.noderesource import decide_node_resources
    from tests.builders import make_node

    config, _ = parse_slo_config({"colocation-config": '{"enable": true}'})
    node = make_node("n").capacity({"cpu": "10", "memory": "40Gi", "kubernetes.io/mid-cpu": "7"}).build()
    metric = NodeMetricRecord("n", update_time=100.0, has_node_metric=True)
    decision = decide_node_resources(
        node, [], metric, config, now=160.0, last_sync=None, plugins=frozenset({"BatchResource"})
    )
    assert decision.write is not None
    written = set(decision.write.body["status"]["allocatable"])
    assert written == {"kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"}
