"""Default plugins, merging (kube-scheduler pkg/scheduler/apis/config/v1/default_plugins.go ``mergePlugins``) and
MultiPoint expansion (pkg/scheduler/framework/runtime/framework.go ``expandMultiPointPlugins``) of profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from apis.config import (
    IN_TREE_ARGS,
    ArgsModel,
    ConfigError,
    InterPodAffinityArgs,
    KubeSchedulerProfile,
    LoadAwareSchedulingArgs,
    Plugins,
    load_scheduler_config,
    parse_scheduler_config,
)
from apis.config.errors import FieldError, invalid
from apis.config.loader import strip_helm_template
from apis.config.profile import (
    DEFAULT_MULTIPOINT,
    EXTENSION_POINTS,
    default_plugins,
    enabled_plugin_names,
    expand_profile,
    merge_with_defaults,
    plugin_args_for_profile,
)
from tests.fixtures import KOORDINATOR
from tests.plugin_catalog import extension_points

# The in-tree plugins as they are (derived from the registry), plus two out-of-tree stand-ins.
IMPLEMENTS: dict[str, frozenset[str]] = {
    **extension_points(),
    "CustomFilter": frozenset({"filter"}),
    "OtherSort": frozenset({"queueSort"}),
}
REGISTERED = frozenset(IMPLEMENTS)
DEFAULT_NAMES = [p.name for p in DEFAULT_MULTIPOINT if p.name in REGISTERED]
"""The default MultiPoint list as pykoord builds it: only registered plugins."""
CONFIG_DIR = Path(__file__).resolve().parents[4] / "config" / "scheduler"

DEFAULT_FILTER = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
)
DEFAULT_SCORE_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "DynamicResources": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
"""VolumeBinding scores (weight 1) only with a StorageCapacityScoring ``shape`` in its args."""


def implements(name: str, point: str) -> bool:
    return point in IMPLEMENTS[name]


def plugins(**points: Any) -> Plugins:
    """``plugins(filter={"enabled": ["A", ("B", 3)], "disabled": ["*"]})`` with wire names."""
    data: dict[str, Any] = {}
    for point, spec in points.items():
        data[point] = {
            key: [{"name": p} if isinstance(p, str) else {"name": p[0], "weight": p[1]} for p in names]
            for key, names in spec.items()
        }
    return Plugins.model_validate(data)


def expand(user: Plugins | None, registered: frozenset[str] = REGISTERED) -> dict[str, tuple[str, ...]]:
    merged = merge_with_defaults(user, default_plugins(registered))
    return dict(expand_profile(merged, implements, registered).points)


def test_default_profile_expansion() -> None:
    expanded = expand_profile(default_plugins(REGISTERED), implements, REGISTERED)

    want = {
        "preEnqueue": ("SchedulingGates", "DynamicResources"),
        "queueSort": ("PrioritySort",),
        "preFilter": DEFAULT_FILTER[3:],
        "filter": DEFAULT_FILTER,
        "postFilter": ("DynamicResources", "DefaultPreemption"),
        # kube-scheduler's list, and ImageLocality and DynamicResources: ImageLocality's PreScore brings the
        # image index up to date, DynamicResources' skips Score for pods without prioritized lists.
        "preScore": (
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "NodeResourcesBalancedAllocation",
            "ImageLocality",
        ),
        "score": tuple(DEFAULT_SCORE_WEIGHTS),
        "reserve": ("VolumeBinding", "DynamicResources"),
        "permit": (),
        "preBind": ("VolumeBinding", "DynamicResources"),
        "bind": ("DefaultBinder",),
        "postBind": (),
    }
    assert dict(expanded.points) == want
    assert dict(expanded.score_weights) == DEFAULT_SCORE_WEIGHTS


def test_defaults_drop_unregistered_plugins_silently() -> None:
    registered = REGISTERED - {"NodeResourcesBalancedAllocation", "NodePorts"}

    got = default_plugins(registered).multi_point.enabled

    assert [p.name for p in got] == [
        p.name for p in DEFAULT_MULTIPOINT if p.name in REGISTERED - {"NodeResourcesBalancedAllocation", "NodePorts"}
    ]


@pytest.mark.parametrize(
    ("user", "want_multi_point", "want_filter"),
    [
        pytest.param(None, DEFAULT_NAMES, ([], []), id="no-user-plugins"),
        pytest.param(
            plugins(multiPoint={"enabled": [("NodeResourcesBalancedAllocation", 5), "CustomFilter"]}),
            [*DEFAULT_NAMES, "CustomFilter"],
            ([], []),
            id="override-in-place-then-append",
        ),
        pytest.param(
            plugins(multiPoint={"disabled": ["NodePorts", "NodeResourcesBalancedAllocation"]}),
            [n for n in DEFAULT_NAMES if n not in {"NodePorts", "NodeResourcesBalancedAllocation"}],
            ([], []),
            id="disable-defaults",
        ),
        pytest.param(
            plugins(multiPoint={"disabled": ["*"], "enabled": ["PrioritySort", "DefaultBinder"]}),
            ["PrioritySort", "DefaultBinder"],
            ([], []),
            id="star-disables-all-defaults-enabled-still-wins",
        ),
        pytest.param(
            plugins(multiPoint={"enabled": ["CustomFilter", "CustomFilter"]}),
            [*DEFAULT_NAMES, "CustomFilter", "CustomFilter"],
            ([], []),
            id="duplicates-kept-for-expansion-to-reject",
        ),
        pytest.param(
            plugins(filter={"enabled": ["CustomFilter"], "disabled": ["NodeName"]}),
            DEFAULT_NAMES,
            (["CustomFilter"], ["NodeName"]),
            id="specific-point-passes-through",
        ),
    ],
)
def test_merge_with_defaults(
    user: Plugins | None, want_multi_point: list[str], want_filter: tuple[list[str], list[str]]
) -> None:
    merged = merge_with_defaults(user, default_plugins(REGISTERED))

    assert [p.name for p in merged.multi_point.enabled] == want_multi_point
    got_filter = ([p.name for p in merged.filter.enabled], [p.name for p in merged.filter.disabled])
    assert got_filter == want_filter


def test_merge_takes_user_weight_at_default_position() -> None:
    merged = merge_with_defaults(plugins(multiPoint={"enabled": [("TaintToleration", 9)]}), default_plugins(REGISTERED))

    got = [(p.name, p.weight) for p in merged.multi_point.enabled][3:6]

    assert got == [("NodeName", None), ("TaintToleration", 9), ("NodeAffinity", 2)]


@pytest.mark.parametrize(
    ("user", "point", "want"),
    [
        pytest.param(
            plugins(filter={"enabled": ["CustomFilter", "NodeName"]}),
            "filter",
            ("NodeName", *(n for n in DEFAULT_FILTER if n != "NodeName"), "CustomFilter"),
            id="override-first-then-multipoint-then-others",
        ),
        pytest.param(
            plugins(filter={"disabled": ["NodePorts"]}),
            "filter",
            tuple(n for n in DEFAULT_FILTER if n != "NodePorts"),
            id="disabled-at-one-point-only",
        ),
        pytest.param(
            plugins(filter={"disabled": ["NodePorts"]}),
            "preFilter",
            DEFAULT_FILTER[3:],
            id="other-points-keep-the-plugin",
        ),
        pytest.param(
            plugins(filter={"disabled": ["*"], "enabled": ["NodeName", "CustomFilter"]}),
            "filter",
            ("NodeName", "CustomFilter"),
            id="star-skips-multipoint-for-that-point",
        ),
        pytest.param(
            plugins(filter={"enabled": ["CustomFilter"], "disabled": ["CustomFilter"]}),
            "filter",
            (*DEFAULT_FILTER, "CustomFilter"),
            id="explicit-enabled-beats-disabled",
        ),
        pytest.param(
            plugins(queueSort={"disabled": ["*"], "enabled": ["OtherSort"]}),
            "queueSort",
            ("OtherSort",),
            id="replace-queue-sort",
        ),
    ],
)
def test_expand_order(user: Plugins, point: str, want: tuple[str, ...]) -> None:
    assert expand(user)[point] == want


@pytest.mark.parametrize(
    ("user", "want_weights"),
    [
        pytest.param(
            plugins(score={"enabled": [("TaintToleration", 7)]}),
            {**DEFAULT_SCORE_WEIGHTS, "TaintToleration": 7},
            id="score-weight-beats-multipoint",
        ),
        pytest.param(
            plugins(multiPoint={"enabled": [("NodeAffinity", 0)]}),
            {**DEFAULT_SCORE_WEIGHTS, "NodeAffinity": 1},
            id="zero-weight-means-one",
        ),
        pytest.param(
            plugins(score={"disabled": ["*"], "enabled": [("NodeResourcesBalancedAllocation", 5)]}),
            {"NodeResourcesBalancedAllocation": 5},
            id="star-disabled-score",
        ),
        pytest.param(
            plugins(score={"disabled": ["NodeResourcesBalancedAllocation"]}),
            {k: v for k, v in DEFAULT_SCORE_WEIGHTS.items() if k != "NodeResourcesBalancedAllocation"},
            id="disabled-score-plugin-has-no-weight",
        ),
    ],
)
def test_score_weights(user: Plugins, want_weights: dict[str, int]) -> None:
    merged = merge_with_defaults(user, default_plugins(REGISTERED))

    expanded = expand_profile(merged, implements, REGISTERED)

    assert dict(expanded.score_weights) == want_weights
    assert set(expanded.points["score"]) == set(want_weights)


@pytest.mark.parametrize(
    ("user", "want_errors"),
    [
        pytest.param(
            plugins(filter={"enabled": ["NodeName", "Nope"]}),
            ['profiles[0].plugins.filter.enabled[1]: Invalid value: "Nope": FilterPlugin "Nope" does not exist'],
            id="unknown-plugin",
        ),
        pytest.param(
            plugins(multiPoint={"enabled": ["Nope"]}),
            ['profiles[0].plugins.multiPoint.enabled: Invalid value: "Nope": MultiPoint plugin "Nope" does not exist'],
            id="unknown-multipoint-plugin",
        ),
        pytest.param(
            plugins(score={"enabled": ["NodeName"]}),
            [
                'profiles[0].plugins.score.enabled[0]: Invalid value: "NodeName": '
                'plugin "NodeName" does not extend ScorePlugin plugin'
            ],
            id="does-not-extend",
        ),
        pytest.param(
            plugins(filter={"enabled": ["CustomFilter", "CustomFilter"]}),
            [
                'profiles[0].plugins.filter.enabled[1]: Invalid value: "CustomFilter": '
                'plugin "CustomFilter" already registered as "FilterPlugin"'
            ],
            id="twice-at-one-point",
        ),
        pytest.param(
            plugins(multiPoint={"enabled": ["CustomFilter", "CustomFilter"]}),
            [
                'profiles[0].plugins.multiPoint.enabled: Invalid value: "CustomFilter": '
                'plugin "CustomFilter" already registered as "FilterPlugin"'
            ],
            id="twice-via-multipoint",
        ),
        pytest.param(
            plugins(queueSort={"disabled": ["*"]}),
            [
                "profiles[0].plugins.queueSort: Invalid value: []: only one queue sort plugin required for "
                'profile with scheduler name "s", but got 0'
            ],
            id="no-queue-sort",
        ),
        pytest.param(
            plugins(queueSort={"enabled": ["OtherSort"]}),
            [
                'profiles[0].plugins.queueSort: Invalid value: ["PrioritySort","OtherSort"]: only one queue '
                'sort plugin required for profile with scheduler name "s", but got 2'
            ],
            id="two-queue-sorts",
        ),
        pytest.param(
            plugins(bind={"disabled": ["*"]}),
            [
                "profiles[0].plugins.bind: Invalid value: []: at least one bind plugin is needed for profile "
                'with scheduler name "s"'
            ],
            id="no-bind",
        ),
    ],
)
def test_expand_errors(user: Plugins, want_errors: list[str]) -> None:
    merged = merge_with_defaults(user, default_plugins(REGISTERED))

    with pytest.raises(ConfigError) as caught:
        expand_profile(merged, implements, REGISTERED, path="profiles[0].plugins", scheduler_name="s")

    assert [str(e) for e in caught.value.errors] == want_errors


def test_koordinator_chart_profile_expands_unchanged() -> None:
    """Every plugin of Koordinator's chart profile is registered: the profile, unchanged, expands with the
    chart's order at each point."""
    text = strip_helm_template((KOORDINATOR / "chart-v1.8.0" / "koord-scheduler-config.yaml").read_text())
    profile = parse_scheduler_config(text, source="chart").profiles[0]
    merged = merge_with_defaults(profile.plugins, default_plugins(REGISTERED))

    expanded = expand_profile(
        merged, implements, REGISTERED, path="profiles[0].plugins", scheduler_name="koord-scheduler"
    )

    assert expanded.points["preFilter"][-6:] == (
        "SchedulingHint",
        "Coscheduling",
        "Reservation",
        "NodeNUMAResource",
        "DeviceShare",
        "ElasticQuota",
    )
    assert expanded.points["permit"] == ("Coscheduling",)


def test_shipped_koordinator_profile_expands() -> None:
    profile = load_scheduler_config(CONFIG_DIR / "koordinator.yaml").profiles[0]
    merged = merge_with_defaults(profile.plugins, default_plugins(REGISTERED))

    expanded = expand_profile(merged, implements, REGISTERED, scheduler_name=profile.scheduler_name)

    # Plugins named only at a point run after the MultiPoint ones there (upstream order).
    assert expanded.points["filter"] == (
        *DEFAULT_FILTER,
        "Reservation",
        "LoadAwareScheduling",
        "NodeNUMAResource",
        "DeviceShare",
    )
    assert expanded.points["postFilter"] == ("Reservation", "Coscheduling", "ElasticQuota")
    assert expanded.points["reserve"] == (
        "VolumeBinding",
        "DynamicResources",
        "Reservation",
        "LoadAwareScheduling",
        "NodeNUMAResource",
        "DeviceShare",
        "Coscheduling",
        "ElasticQuota",
    )
    assert expanded.points["bind"] == ("Reservation", "DefaultBinder")
    assert expanded.points["queueSort"] == ("PrioritySort",)
    assert dict(expanded.score_weights) == {
        "LoadAwareScheduling": 1,
        "NodeNUMAResource": 1,
        "DeviceShare": 1,
        "Reservation": 5000,
        "Coscheduling": 1,
        **DEFAULT_SCORE_WEIGHTS,
    }
    assert expanded.points["score"][-5:] == (
        "LoadAwareScheduling",
        "NodeNUMAResource",
        "DeviceShare",
        "Reservation",
        "Coscheduling",
    )
    assert set(expanded.points) == set(EXTENSION_POINTS)


def test_enabled_plugin_names_get_default_args() -> None:
    config = parse_scheduler_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "plugins": {"filter": {"enabled": [{"name": "LoadAwareScheduling"}]}},
                    "pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}}],
                }
            ],
        }
    )
    profile = config.profiles[0]
    merged = merge_with_defaults(profile.plugins, default_plugins(REGISTERED))
    enabled = enabled_plugin_names(merged)

    args = plugin_args_for_profile(profile, enabled, IN_TREE_ARGS, path="profiles[0]")

    assert enabled == (*DEFAULT_NAMES, "LoadAwareScheduling")
    assert args["InterPodAffinity"] == InterPodAffinityArgs(hard_pod_affinity_weight=5)
    assert args["LoadAwareScheduling"] == LoadAwareSchedulingArgs()
    assert sorted(args) == [
        "DefaultPreemption",
        "DynamicResources",
        "InterPodAffinity",
        "LoadAwareScheduling",
        "NodeAffinity",
        "NodeResourcesBalancedAllocation",
        "NodeResourcesFit",
        "PodTopologySpread",
        "VolumeBinding",
    ]


class CustomArgs(ArgsModel):
    size: int = 1

    def field_errors(self, path: str) -> list[FieldError]:
        return [invalid(f"{path}.size", self.size, "must be positive")] if self.size < 1 else []


def test_plugin_args_errors_carry_profile_path() -> None:
    profile = KubeSchedulerProfile.model_validate(
        {"schedulerName": "a", "pluginConfig": [{"name": "Custom", "args": {"size": -1}}]}
    )
    models: dict[str, type[BaseModel]] = {"Custom": CustomArgs}

    with pytest.raises(ConfigError) as caught:
        plugin_args_for_profile(profile, ["Custom"], models, path="profiles[0]")

    assert [str(e) for e in caught.value.errors] == [
        "profiles[0].pluginConfig[0].args.size: Invalid value: -1: must be positive"
    ]
