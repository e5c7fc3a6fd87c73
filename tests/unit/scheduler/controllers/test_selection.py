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
            "*", set(CONTROLLER_NAMES) - {"colocationprofile", "migration", "descheduler"},
            id="star-is-all-on-by-default",
        ),
        pytest.param("*,migration,descheduler", set(CONTROLLER_NAMES) - {"colocationprofile"},
                     id="descheduling-by-name"),
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
