import pytest

from apis.core.frozendict import FrozenDict
from apis.core.selectors import (
    label_selector_matches,
    node_selector_map_matches,
    node_selector_matches,
    node_selector_term_matches,
    parse_go_int64,
)
from apis.core.types import LabelSelector, NodeSelectorTerm, Operator, SelectorRequirement

LABELS = FrozenDict({"app": "web", "tier": "front", "cores": "8"})


def req(key: str, operator: Operator, *values: str) -> SelectorRequirement:
    return SelectorRequirement(key, operator, values)


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        pytest.param(None, False, id="nil-matches-nothing"),
        pytest.param(LabelSelector(), True, id="empty-matches-everything"),
        pytest.param(LabelSelector(FrozenDict({"app": "web"})), True, id="match-labels"),
        pytest.param(LabelSelector(FrozenDict({"app": "db"})), False, id="match-labels-wrong-value"),
        pytest.param(LabelSelector(FrozenDict({"zone": ""})), False, id="match-labels-empty-value-needs-key"),
        pytest.param(LabelSelector(match_expressions=(req("app", Operator.IN, "db", "web"),)), True, id="in"),
        pytest.param(LabelSelector(match_expressions=(req("app", Operator.IN, "db"),)), False, id="in-miss"),
        pytest.param(LabelSelector(match_expressions=(req("zone", Operator.IN, "a"),)), False, id="in-absent"),
        pytest.param(LabelSelector(match_expressions=(req("app", Operator.NOT_IN, "db"),)), True, id="notin"),
        pytest.param(LabelSelector(match_expressions=(req("app", Operator.NOT_IN, "web"),)), False, id="notin-hit"),
        pytest.param(
            LabelSelector(match_expressions=(req("zone", Operator.NOT_IN, "a"),)),
            True,
            id="notin-absent-matches",
        ),
        pytest.param(LabelSelector(match_expressions=(req("app", Operator.EXISTS),)), True, id="exists"),
        pytest.param(LabelSelector(match_expressions=(req("zone", Operator.EXISTS),)), False, id="exists-absent"),
        pytest.param(
            LabelSelector(match_expressions=(req("zone", Operator.DOES_NOT_EXIST),)),
            True,
            id="does-not-exist",
        ),
        pytest.param(
            LabelSelector(match_expressions=(req("app", Operator.DOES_NOT_EXIST),)),
            False,
            id="does-not-exist-hit",
        ),
        pytest.param(
            LabelSelector(FrozenDict({"app": "web"}), (req("tier", Operator.IN, "back"),)),
            False,
            id="labels-and-expressions-anded",
        ),
        pytest.param(
            LabelSelector(match_expressions=(req("cores", Operator.GT, "4"),)),
            False,
            id="gt-invalid-for-labels",
        ),
        pytest.param(LabelSelector(match_expressions=(req("app", Operator.IN),)), False, id="in-without-values"),
        pytest.param(LabelSelector(match_expressions=(req("app", Operator.NOT_IN),)), False, id="notin-without-values"),
        pytest.param(
            LabelSelector(match_expressions=(req("app", Operator.EXISTS, "web"),)),
            False,
            id="exists-with-values",
        ),
    ],
)
def test_label_selector_matches(selector: LabelSelector | None, want: bool) -> None:
    assert label_selector_matches(selector, LABELS) is want


def term(*requirements: SelectorRequirement, fields: tuple[SelectorRequirement, ...] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=requirements, match_fields=fields)


@pytest.mark.parametrize(
    ("node_term", "want"),
    [
        pytest.param(term(), False, id="empty-term-matches-nothing"),
        pytest.param(term(req("app", Operator.IN, "web")), True, id="in"),
        pytest.param(term(req("app", Operator.NOT_IN, "web")), False, id="notin"),
        pytest.param(term(req("zone", Operator.NOT_IN, "a")), True, id="notin-absent"),
        pytest.param(term(req("app", Operator.EXISTS)), True, id="exists"),
        pytest.param(term(req("zone", Operator.DOES_NOT_EXIST)), True, id="does-not-exist"),
        pytest.param(term(req("cores", Operator.GT, "4")), True, id="gt"),
        pytest.param(term(req("cores", Operator.GT, "8")), False, id="gt-equal-is-false"),
        pytest.param(term(req("cores", Operator.LT, "16")), True, id="lt"),
        pytest.param(term(req("cores", Operator.LT, "+8")), False, id="lt-signed-value"),
        pytest.param(term(req("cores", Operator.GT, "-1")), True, id="gt-negative"),
        pytest.param(term(req("app", Operator.GT, "1")), False, id="gt-non-integer-label"),
        pytest.param(term(req("cores", Operator.GT, "four")), False, id="gt-non-integer-value"),
        pytest.param(term(req("cores", Operator.GT, "1_0")), False, id="gt-go-rejects-underscore"),
        pytest.param(term(req("cores", Operator.GT, "1", "2")), False, id="gt-needs-one-value"),
        pytest.param(term(req("zone", Operator.GT, "1")), False, id="gt-absent"),
        pytest.param(term(req("app", Operator.IN, "web"), req("tier", Operator.IN, "back")), False, id="anded"),
        pytest.param(term(fields=(req("metadata.name", Operator.IN, "n1"),)), True, id="field-in"),
        pytest.param(term(fields=(req("metadata.name", Operator.IN, "n2"),)), False, id="field-in-miss"),
        pytest.param(term(fields=(req("metadata.name", Operator.NOT_IN, "n2"),)), True, id="field-notin"),
        pytest.param(term(fields=(req("metadata.name", Operator.IN, "n1", "n2"),)), False, id="field-needs-one-value"),
        pytest.param(term(fields=(req("metadata.name", Operator.EXISTS),)), False, id="field-bad-operator"),
        pytest.param(
            term(req("app", Operator.IN, "web"), fields=(req("metadata.name", Operator.IN, "n2"),)),
            False,
            id="fields-and-expressions-anded",
        ),
    ],
)
def test_node_selector_term_matches(node_term: NodeSelectorTerm, want: bool) -> None:
    assert node_selector_term_matches(node_term, LABELS, "n1") is want


@pytest.mark.parametrize(
    ("terms", "want"),
    [
        pytest.param((), False, id="no-terms"),
        pytest.param((term(req("app", Operator.IN, "db")), term(req("app", Operator.EXISTS))), True, id="ored"),
        pytest.param((term(), term(req("app", Operator.IN, "db"))), False, id="none-match"),
    ],
)
def test_node_selector_matches(terms: tuple[NodeSelectorTerm, ...], want: bool) -> None:
    assert node_selector_matches(terms, LABELS, "n1") is want


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        pytest.param(None, True, id="nil"),
        pytest.param({}, True, id="empty"),
        pytest.param({"app": "web", "tier": "front"}, True, id="all-present"),
        pytest.param({"app": "web", "zone": "a"}, False, id="one-missing"),
    ],
)
def test_node_selector_map_matches(selector: dict[str, str] | None, want: bool) -> None:
    assert node_selector_map_matches(selector, LABELS) is want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("42", 42, id="plain"),
        pytest.param("-7", -7, id="negative"),
        pytest.param("+7", 7, id="plus"),
        pytest.param(" 7", None, id="space"),
        pytest.param("", None, id="empty"),
        pytest.param("9223372036854775808", None, id="overflow"),
        pytest.param("٣", None, id="non-ascii-digit"),
    ],
)
def test_parse_go_int64(text: str, want: int | None) -> None:
    assert parse_go_int64(text) == want
