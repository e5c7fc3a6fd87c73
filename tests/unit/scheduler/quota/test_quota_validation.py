"""Quota-tree validation: invalid quotas are reported and left out, never fatal."""

from __future__ import annotations

import pytest

from apis.scheduling.elasticquota import QuotaRecord
from koord_scheduler.quota.validation import TreeProblem, validate_tree
from tests.unit.scheduler.plugins.elasticquota.quota_helpers import quota


@pytest.mark.parametrize(
    ("records", "want_valid", "want_problems"),
    [
        pytest.param(
            [quota("a", min={"cpu": 4}, max={"cpu": 2})],
            [],
            [TreeProblem("a", "default", "spec.min.cpu (4) is above spec.max.cpu (2)")],
            id="max-below-min",
        ),
        pytest.param(
            [
                quota("a", is_parent=True, parent="b", max={"cpu": 1}),
                quota("b", is_parent=True, parent="a", max={"cpu": 1}),
                quota("c", parent="a", max={"cpu": 1}),
                quota("ok", max={"cpu": 1}),
            ],
            ["ok"],
            [
                TreeProblem("a", "default", "quota parents form a cycle: a -> b -> a"),
                TreeProblem("b", "default", "quota parents form a cycle: a -> b -> a"),
                TreeProblem("c", "default", "parent quota a is invalid"),
            ],
            id="cycle-and-its-subtree",
        ),
        pytest.param(
            [
                quota("p", is_parent=True, min={"cpu": 10}, max={"cpu": 20}),
                quota("c1", parent="p", min={"cpu": 6}, max={"cpu": 10}),
                quota("c2", parent="p", min={"cpu": 5}, max={"cpu": 10}),
            ],
            ["c1", "p"],
            [
                TreeProblem(
                    "c2", "default", "children's min of cpu would add up to 11, above the min of parent quota p (10)"
                )
            ],
            id="children-min-sum-above-parent-min",
        ),
        pytest.param(
            [quota("c", parent="nobody", max={"cpu": 1}), quota("leaf", max={"cpu": 1}), quota("d", parent="leaf")],
            ["leaf"],
            [
                TreeProblem("c", "default", "parent quota nobody does not exist"),
                TreeProblem("d", "default", 'parent quota leaf is not labelled is-parent="true"'),
            ],
            id="missing-or-non-parent-parent",
        ),
        pytest.param(
            [quota("x", namespace="a"), quota("x", namespace="b")],
            ["x"],
            [TreeProblem("x", "b", "another quota named x exists in namespace a; quota names are cluster-wide")],
            id="duplicate-name",
        ),
    ],
)
def test_validate_tree(records: list[QuotaRecord], want_valid: list[str], want_problems: list[TreeProblem]) -> None:
    valid, problems = validate_tree(records)
    assert sorted(valid) == want_valid
    assert sorted(problems, key=lambda p: (p.quota, p.namespace)) == want_problems
