"""Loading KubeSchedulerConfiguration: defaults (kube-scheduler pkg/scheduler/apis/config/v1/defaults.go), strict
decoding, validation messages (pkg/scheduler/apis/config/validation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apis.config import ConfigError, KubeSchedulerConfiguration, load_scheduler_config, parse_scheduler_config
from apis.config.loader import strip_helm_template
from tests.fixtures import KOORDINATOR

HEADER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
CONFIG_DIR = Path(__file__).resolve().parents[4] / "config" / "scheduler"


def make_config(**fields: Any) -> dict[str, Any]:
    return {**HEADER, **fields}


def error_lines(exc: ConfigError) -> list[str]:
    return [str(e) for e in exc.errors]


def test_defaults_match_kube_scheduler() -> None:
    config = parse_scheduler_config(make_config())

    want = {
        **HEADER,
        "parallelism": 16,
        "leaderElection": {
            "leaderElect": True,
            "leaseDuration": "15s",
            "renewDeadline": "10s",
            "retryPeriod": "2s",
            "resourceLock": "leases",
            "resourceName": "kube-scheduler",
            "resourceNamespace": "kube-system",
        },
        "clientConnection": {
            "kubeconfig": "",
            "acceptContentTypes": "",
            "contentType": "application/vnd.kubernetes.protobuf",
            "qps": 50.0,
            "burst": 100,
        },
        "enableProfiling": True,
        "enableContentionProfiling": True,
        "percentageOfNodesToScore": 0,
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 10,
        "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": []}],
        "extenders": [],
        "delayCacheUntilActive": False,
    }
    assert config.model_dump(mode="json", by_alias=True, exclude_none=True) == want
    assert config == KubeSchedulerConfiguration()


@pytest.mark.parametrize(
    ("profiles", "want_names"),
    [
        pytest.param([], ["default-scheduler"], id="no-profiles-gives-one-default"),
        pytest.param([{}], ["default-scheduler"], id="single-unnamed-profile-is-named"),
        pytest.param([{"schedulerName": "x"}], ["x"], id="single-named-profile-kept"),
    ],
)
def test_profile_defaulting(profiles: list[dict[str, Any]], want_names: list[str]) -> None:
    config = parse_scheduler_config(make_config(profiles=profiles))
    assert [p.scheduler_name for p in config.profiles] == want_names


def test_durations_are_go_strings() -> None:
    config = parse_scheduler_config(
        make_config(leaderElection={"leaseDuration": "1m30s", "renewDeadline": "500ms", "retryPeriod": "0.2s"})
    )
    want = (90.0, 0.5, 0.2)
    le = config.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == pytest.approx(want)


def test_percentage_per_profile_falls_back_to_global() -> None:
    config = parse_scheduler_config(
        make_config(
            percentageOfNodesToScore=30,
            profiles=[{"schedulerName": "a"}, {"schedulerName": "b", "percentageOfNodesToScore": 70}],
        )
    )
    assert [config.percentage_for(p) for p in config.profiles] == [30, 70]


@pytest.mark.parametrize(
    ("fields", "want_errors"),
    [
        pytest.param(
            {"parallelism": 0},
            ["parallelism: Invalid value: 0: should be an integer value greater than zero"],
            id="parallelism-zero",
        ),
        pytest.param(
            {"percentageOfNodesToScore": 120},
            ["percentageOfNodesToScore: Invalid value: 120: not in valid range [0-100]"],
            id="percentage-global",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a", "percentageOfNodesToScore": -1}]},
            ["profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]"],
            id="percentage-profile",
        ),
        pytest.param(
            {"podInitialBackoffSeconds": 0, "podMaxBackoffSeconds": 5},
            ["podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"],
            id="initial-backoff-zero",
        ),
        pytest.param(
            {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
            ["podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to PodInitialBackoffSeconds"],
            id="max-below-initial-backoff",
        ),
        pytest.param(
            {"leaderElection": {"resourceLock": "endpoints"}},
            ['leaderElection.resourceLock: Invalid value: "endpoints": resourceLock value must be "leases"'],
            id="resource-lock-not-leases",
        ),
        pytest.param(
            {"leaderElection": {"leaderElect": False, "resourceLock": "endpoints"}},
            [],
            id="resource-lock-ignored-without-leader-election",
        ),
        pytest.param(
            {"leaderElection": {"leaseDuration": "5s", "renewDeadline": "10s"}},
            ['leaderElection.leaseDuration: Invalid value: "10s": LeaseDuration must be greater than RenewDeadline'],
            id="lease-shorter-than-renew",
        ),
        pytest.param(
            {"clientConnection": {"burst": -1}},
            ["clientConnection.burst: Invalid value: -1: must be non-negative"],
            id="burst-negative",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a"}, {}]},
            ["profiles[1].schedulerName: Required value"],
            id="second-profile-unnamed",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
            ['profiles[1].schedulerName: Duplicate value: "profiles[0].schedulerName"'],
            id="duplicate-scheduler-name",
        ),
        pytest.param(
            {
                "profiles": [
                    {"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}}},
                    {"schedulerName": "b"},
                ]
            },
            [
                'profiles[1].plugins.queueSort: Invalid value: {"disabled":[],"enabled":[]}: '
                "must be the same for all profiles"
            ],
            id="queue-sort-differs",
        ),
        pytest.param(
            {
                "profiles": [
                    {
                        "schedulerName": "a",
                        "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}, {"name": "Other"}]}},
                    }
                ]
            },
            ["profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled"],
            id="two-queue-sorts",
        ),
        pytest.param(
            {
                "profiles": [
                    {
                        "schedulerName": "a",
                        "pluginConfig": [{"name": "InterPodAffinity"}, {"name": "InterPodAffinity"}],
                    }
                ]
            },
            ['profiles[0].pluginConfig[1]: Duplicate value: "InterPodAffinity"'],
            id="duplicate-plugin-config",
        ),
        pytest.param(
            {
                "profiles": [
                    {
                        "schedulerName": "a",
                        "plugins": {"score": {"enabled": [{"name": "ImageLocality"}, {"name": "X", "weight": -1}]}},
                    }
                ]
            },
            [
                "profiles[0].plugins.score.enabled[1].weight: Invalid value: -1: "
                "must not be negative (0 means the default, 1)"
            ],
            id="negative-score-weight",
        ),
        pytest.param(
            {"extenders": [{"urlPrefix": "http://e", "prioritizeVerb": "p", "weight": 0}]},
            ["extenders[0].weight: Invalid value: 0: must have a positive weight applied to it"],
            id="extender-weight",
        ),
        pytest.param(
            {"extenders": [{"bindVerb": "b"}, {"bindVerb": "b"}]},
            ['extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind'],
            id="two-binding-extenders",
        ),
        pytest.param(
            {
                "extenders": [
                    {
                        "managedResources": [
                            {"name": "example.com/foo"},
                            {"name": "example.com/foo"},
                            {"name": "cpu"},
                        ]
                    }
                ]
            },
            [
                'extenders[0].managedResources[1].name: Invalid value: "example.com/foo": '
                "duplicate extender managed resource name",
                'extenders[0].managedResources[2].name: Invalid value: "cpu": is an invalid extended resource name',
            ],
            id="extender-managed-resources",
        ),
    ],
)
def test_validation_messages(fields: dict[str, Any], want_errors: list[str]) -> None:
    if not want_errors:
        parse_scheduler_config(make_config(**fields))
        return
    with pytest.raises(ConfigError) as caught:
        parse_scheduler_config(make_config(**fields))
    assert error_lines(caught.value) == want_errors


@pytest.mark.parametrize(
    ("fields", "want_errors"),
    [
        pytest.param(
            {"metricsBindAddress": "0.0.0.0:10251"},
            [
                "metricsBindAddress: Unknown field: known fields: apiVersion, clientConnection, "
                "delayCacheUntilActive, enableContentionProfiling, enableProfiling, extenders, kind, "
                "leaderElection, parallelism, percentageOfNodesToScore, podInitialBackoffSeconds, "
                "podMaxBackoffSeconds, profiles"
            ],
            id="removed-top-level-field",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a", "plugins": {"filtr": {}}}]},
            ['profiles[0].plugins.filtr: Unknown field: did you mean "filter"?'],
            id="typo-with-hint",
        ),
        pytest.param(
            {"leaderElection": {"leader_elect": True}},
            ['leaderElection.leader_elect: Unknown field: field names are camelCase: use "leaderElect"'],
            id="snake-case-rejected",
        ),
        pytest.param(
            {"profiles": [{"schedulerName": "a", "plugins": {"filter": {"enabled": [{"weight": 1}]}}}]},
            ["profiles[0].plugins.filter.enabled[0].name: Required value"],
            id="plugin-without-name",
        ),
        pytest.param(
            {"leaderElection": {"leaseDuration": 15}},
            [
                'leaderElection.leaseDuration: Invalid value: 15: a duration must be a string like "15s", '
                "got the number 15"
            ],
            id="duration-as-number",
        ),
        pytest.param(
            {"leaderElection": {"leaseDuration": "15"}},
            ['leaderElection.leaseDuration: Invalid value: "15": time: missing unit in duration "15"'],
            id="duration-without-unit",
        ),
        pytest.param(
            {"parallelism": "many", "percentageOfNodesToScore": 101},
            [
                'parallelism: Invalid value: "many": input should be a valid integer, '
                "unable to parse string as an integer",
                "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]",
            ],
            id="decode-and-semantic-errors-together",
        ),
    ],
)
def test_decoding_errors(fields: dict[str, Any], want_errors: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scheduler_config(make_config(**fields))
    assert error_lines(caught.value) == want_errors


@pytest.mark.parametrize(
    ("document", "want_errors"),
    [
        pytest.param(
            {"kind": "KubeSchedulerConfiguration"},
            ["apiVersion: Required value: must be kubescheduler.config.k8s.io/v1"],
            id="no-api-version",
        ),
        pytest.param(
            {"apiVersion": "kubescheduler.config.k8s.io/v1beta3", "kind": "KubeSchedulerConfiguration"},
            [
                'apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta3": '
                'supported values: "kubescheduler.config.k8s.io/v1"'
            ],
            id="old-api-version",
        ),
        pytest.param(
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "Policy"},
            ['kind: Unsupported value: "Policy": supported values: "KubeSchedulerConfiguration"'],
            id="wrong-kind",
        ),
    ],
)
def test_type_meta(document: dict[str, Any], want_errors: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scheduler_config(document)
    assert error_lines(caught.value) == want_errors


def test_error_message_names_file_and_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "parallelism: -1\n"
        "podMaxBackoffSeconds: 0\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_scheduler_config(path)

    want = (
        f"{path}: 2 errors in scheduler configuration\n"
        f"  {path}: parallelism: Invalid value: -1: should be an integer value greater than zero\n"
        f"  {path}: podMaxBackoffSeconds: Invalid value: 0: "
        "must be greater than or equal to PodInitialBackoffSeconds"
    )
    assert str(caught.value) == want
    assert "Traceback" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "want_summary"),
    [
        pytest.param(
            "a: [1, 2",
            "invalid YAML: line 1, column 9: expected ',' or ']', but got '<stream end>'",
            id="bad-yaml",
        ),
        pytest.param("- 1\n- 2\n", "1 error in scheduler configuration", id="not-a-mapping"),
        pytest.param("a: 1\n---\nb: 2\n", "expected one YAML document, found 2", id="two-documents"),
    ],
)
def test_bad_text(text: str, want_summary: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scheduler_config(text, source="f.yaml")
    assert str(caught.value).splitlines()[0] == f"f.yaml: {want_summary}"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read file"):
        load_scheduler_config(tmp_path / "nope.yaml")


def test_json_is_accepted() -> None:
    config = parse_scheduler_config(
        '{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "parallelism": 4}'
    )
    assert config.parallelism == 4


def test_configmap_sample_loads() -> None:
    config = load_scheduler_config(KOORDINATOR / "samples" / "scheduler-config-configmap.yaml")

    profile = config.profiles[0]
    assert profile.scheduler_name == "koord-scheduler"
    assert config.leader_election.resource_name == "koord-scheduler"
    assert [pc.name for pc in profile.plugin_config] == [
        "NodeResourcesFit",
        "LoadAwareScheduling",
        "ElasticQuota",
    ]


def test_configmap_error_names_the_data_key() -> None:
    document = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {
            "cfg": "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 0\n"
        },
    }
    with pytest.raises(ConfigError) as caught:
        parse_scheduler_config(document, source="cm.yaml")
    assert str(caught.value).splitlines()[1] == (
        "  cm.yaml[data.cfg]: parallelism: Invalid value: 0: should be an integer value greater than zero"
    )


def chart_text(*, job_preemption: bool) -> str:
    """The chart's scheduler config with the template stripped (its enableJobPreemption default keeps
    Coscheduling's ``enablePreemption: true``); without it when ``job_preemption`` is False."""
    text = strip_helm_template((KOORDINATOR / "chart-v1.8.0" / "koord-scheduler-config.yaml").read_text())
    if not job_preemption:
        text = "\n".join(line for line in text.splitlines() if "enablePreemption: true" not in line)
    return text


def test_helm_chart_job_preemption_is_accepted() -> None:
    config = parse_scheduler_config(chart_text(job_preemption=True), source="koord-scheduler-config.yaml")
    args = [c.args for c in config.profiles[0].plugin_config if c.name == "Coscheduling"]
    assert [a["enablePreemption"] for a in args] == [True]  # type: ignore[index]


def test_helm_chart_loads_after_stripping_template() -> None:
    text = chart_text(job_preemption=False)

    config = parse_scheduler_config(text, source="koord-scheduler-config.yaml")

    profile = config.profiles[0]
    assert profile.scheduler_name == "koord-scheduler"
    assert profile.plugins is not None
    assert [p.name for p in profile.plugins.bind.enabled] == ["Reservation", "DefaultBinder"]


@pytest.mark.parametrize(
    ("name", "want_profiles"),
    [
        pytest.param("default.yaml", [("default-scheduler", [])], id="default"),
        pytest.param(
            "koordinator.yaml",
            [
                (
                    "koord-scheduler",
                    ["NodeResourcesFit", "LoadAwareScheduling", "ElasticQuota", "Coscheduling", "DeviceShare"],
                )
            ],
            id="koordinator",
        ),
    ],
)
def test_shipped_configs_load(name: str, want_profiles: list[tuple[str, list[str]]]) -> None:
    config = load_scheduler_config(CONFIG_DIR / name)

    got = [(p.scheduler_name, [entry.name for entry in p.plugin_config]) for p in config.profiles]
    assert got == want_profiles
