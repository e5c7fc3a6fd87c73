import pytest

from apis.core.tolerations import find_untolerated_taint, tolerates, tolerations_tolerate
from apis.core.types import Taint, TaintEffect, Toleration

NO_SCHEDULE = TaintEffect.NO_SCHEDULE
NO_EXECUTE = TaintEffect.NO_EXECUTE
PREFER = TaintEffect.PREFER_NO_SCHEDULE


@pytest.mark.parametrize(
    ("toleration", "taint", "want"),
    [
        pytest.param(Toleration("k", "Equal", "v", NO_SCHEDULE), Taint("k", NO_SCHEDULE, "v"), True, id="equal"),
        pytest.param(Toleration("k", "Equal", "x", NO_SCHEDULE), Taint("k", NO_SCHEDULE, "v"), False, id="value"),
        pytest.param(Toleration("k", "", "v", NO_SCHEDULE), Taint("k", NO_SCHEDULE, "v"), True, id="empty-op-equal"),
        pytest.param(Toleration("k", "Equal", "", None), Taint("k", NO_SCHEDULE, ""), True, id="empty-values"),
        pytest.param(Toleration("k", "Exists", "", None), Taint("k", NO_EXECUTE, "v"), True, id="exists-any-value"),
        pytest.param(Toleration("", "Exists"), Taint("anything", PREFER, "v"), True, id="exists-empty-key-all"),
        pytest.param(Toleration("j", "Exists"), Taint("k", NO_SCHEDULE), False, id="key-mismatch"),
        pytest.param(
            Toleration("k", "Exists", effect=NO_SCHEDULE), Taint("k", NO_EXECUTE), False, id="effect-mismatch"
        ),
        pytest.param(Toleration("k", "Exists", effect=None), Taint("k", NO_EXECUTE), True, id="empty-effect-all"),
        pytest.param(
            Toleration("", "Equal", "v"),
            Taint("k", NO_SCHEDULE, "v"),
            True,
            id="empty-key-equal-matches-any-key",
        ),
        pytest.param(Toleration("k", "Gt", "1"), Taint("k", NO_SCHEDULE, "2"), False, id="gt-disabled"),
        pytest.param(Toleration("k", "Bogus"), Taint("k", NO_SCHEDULE), False, id="unknown-operator"),
    ],
)
def test_tolerates(toleration: Toleration, taint: Taint, want: bool) -> None:
    assert tolerates(toleration, taint) is want


TAINTS = (
    Taint("soft", PREFER),
    Taint("a", NO_SCHEDULE, "1"),
    Taint("b", NO_EXECUTE),
)


@pytest.mark.parametrize(
    ("tolerations", "effects", "want"),
    [
        pytest.param((), None, Taint("soft", PREFER), id="all-effects-first-taint"),
        pytest.param((), (NO_SCHEDULE, NO_EXECUTE), Taint("a", NO_SCHEDULE, "1"), id="filter-skips-prefer"),
        pytest.param(
            (Toleration("a", "Equal", "1"),),
            (NO_SCHEDULE, NO_EXECUTE),
            Taint("b", NO_EXECUTE),
            id="next-untolerated",
        ),
        pytest.param(
            (Toleration("a", "Exists"), Toleration("b", "Exists", effect=NO_EXECUTE)),
            (NO_SCHEDULE, NO_EXECUTE),
            None,
            id="all-tolerated",
        ),
        pytest.param((Toleration(operator="Exists"),), None, None, id="tolerate-everything"),
    ],
)
def test_find_untolerated_taint(
    tolerations: tuple[Toleration, ...], effects: tuple[TaintEffect, ...] | None, want: Taint | None
) -> None:
    assert find_untolerated_taint(TAINTS, tolerations, effects) == want


def test_find_untolerated_taint_defaults_to_filter_effects() -> None:
    assert find_untolerated_taint(TAINTS, ()) == Taint("a", NO_SCHEDULE, "1")


def test_tolerations_tolerate() -> None:
    taint = Taint("k", NO_SCHEDULE)
    assert tolerations_tolerate([Toleration("x", "Exists"), Toleration("k", "Exists")], taint)
    assert not tolerations_tolerate([], taint)
