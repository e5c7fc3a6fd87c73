"""``koord-scheduler`` cluster mode: what is refused before any network I/O (exit 2, one clear line)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from koord_scheduler.app.cli import SchedulerCommand

GOOD_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
"""

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = SchedulerCommand().run(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("config", "extra", "want_in_message"),
    [
        pytest.param("kind: Nope\n", [], "kind", id="wrong-kind"),
        pytest.param(GOOD_CONFIG + "parallelism: many\n", [], "parallelism", id="bad-field-type"),
        pytest.param(GOOD_CONFIG + "bogus: 1\n", [], "bogus", id="unknown-field"),
        pytest.param(
            GOOD_CONFIG.replace("leaderElect: false", "leaderElect: true\n  leaseDuration: 5s\n  renewDeadline: 10s"),
            [],
            "LeaseDuration must be greater than RenewDeadline",
            id="lease-shorter-than-deadline",
        ),
        pytest.param(
            GOOD_CONFIG + "profiles:\n- schedulerName: s\n  plugins: {filter: {enabled: [{name: NoSuchPlugin}]}}\n",
            [],
            "NoSuchPlugin",
            id="unknown-plugin",
        ),
        pytest.param(GOOD_CONFIG, ["--kubeconfig", "/nonexistent/kubeconfig"], "no such file", id="missing-kubeconfig"),
    ],
)
def test_bad_configuration_exits_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, extra: list[str], want_in_message: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    code, err = run(["--config", str(path), "--kubeconfig", str(kubeconfig), *extra], capsys)
    assert code == 2
    assert want_in_message in err
    assert err.startswith("koord-scheduler: ")
    assert "Traceback" not in err
    assert gc.isenabled()  # paused for start-up only, also when start-up fails


def test_no_kubeconfig_outside_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = tmp_path / "config.yaml"
    path.write_text(GOOD_CONFIG)
    code, err = run(["--config", str(path)], capsys)
    assert code == 2
    assert "not running in a cluster" in err


def test_bad_flag_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        SchedulerCommand().run(["--leader-elect=maybe"])
    assert exc.value.code == 2
    assert "is not a boolean" in capsys.readouterr().err


def test_debug_and_controller_flags_parse() -> None:
    from koord_scheduler.app.serve import _options, _parser

    ns = _parser().parse_args(["--debug-scores", "5", "-f", "--reservation-controller=false", "--leader-elect=false"])
    options = _options(ns)
    assert (options.debug_scores, options.debug_filters, options.reservation_controller) == (5, True, False)
    defaults = _options(_parser().parse_args([]))
    assert (defaults.debug_scores, defaults.debug_filters, defaults.reservation_controller) == (0, False, True)
    assert defaults.controllers.enabled == {
        "reservation",
        "nodeslo",
        "noderesource",
        "nodemetric",
        "elasticquota",
        "podgroup",
        "deviceresource",
        "quotaprofile",
    }
    assert defaults.controllers.scheduling is True
    assert defaults.controllers.config_namespace == "koordinator-system"


def test_controllers_flag() -> None:
    from koord_scheduler.app.serve import _options, _parser

    ns = _parser().parse_args(
        [
            "--controllers=*,-nodemetric",
            "--scheduling=false",
            "--config-namespace=kz",
            "--reservation-controller=false",
            "--leader-elect=false",
        ]
    )
    flags = _options(ns).controllers
    want = ({"nodeslo", "noderesource", "elasticquota", "podgroup", "deviceresource", "quotaprofile"}, False, "kz")
    assert (flags.enabled, flags.scheduling, flags.config_namespace) == want


def test_unknown_controller_is_refused_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert SchedulerCommand().run(["--controllers=*,-nodemetrics", "--leader-elect=false"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "koord-scheduler: --controllers: unknown controller 'nodemetrics' "
        "(known: reservation, nodeslo, noderesource, nodemetric, elasticquota, podgroup, deviceresource, "
        "quotaprofile, colocationprofile, migration, descheduler, or *)"
    ]


@pytest.mark.parametrize(
    ("api_key", "prefix", "want"),
    [
        pytest.param({"BearerToken": "abc"}, {"BearerToken": "Bearer"}, "Bearer abc", id="client-31-and-later"),
        pytest.param({"authorization": "Bearer xyz"}, {}, "Bearer xyz", id="older-clients"),
        pytest.param({}, {}, None, id="no-token-client-cert-only"),
    ],
)
def test_bearer_token_is_read_where_the_kubernetes_client_keeps_it(
    api_key: dict[str, str], prefix: dict[str, str], want: str | None
) -> None:
    from kubernetes.client import Configuration

    from kubeapi.connection import _token

    cfg = Configuration()
    cfg.api_key = api_key
    cfg.api_key_prefix = prefix
    assert _token(cfg) == want


def test_cpu_profile_switch_writes_stats_of_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pstats

    from koord_scheduler.app.serve import CPU_PROFILE_ENV, _with_cpu_profile

    out = tmp_path / "cpu.prof"
    monkeypatch.setenv(CPU_PROFILE_ENV, str(out))

    def work() -> int:
        return sum(range(1000))

    assert _with_cpu_profile(work) == 499500
    assert any(name == "work" for (_, _, name) in pstats.Stats(str(out)).stats)  # type: ignore[attr-defined]


def test_without_the_switch_nothing_is_profiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from koord_scheduler.app.serve import CPU_PROFILE_ENV, _with_cpu_profile

    monkeypatch.delenv(CPU_PROFILE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)

    assert _with_cpu_profile(lambda: 7) == 7
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("choice", "want"),
    [
        pytest.param("", "uvloop", id="default-is-uvloop-when-installed"),
        pytest.param("uvloop", "uvloop", id="uvloop"),
        pytest.param("asyncio", None, id="asyncio-forces-the-default-loop"),
    ],
)
def test_event_loop_choice(choice: str, want: str | None) -> None:
    from koord_scheduler.app.serve import event_loop_factory

    factory = event_loop_factory(choice)

    assert (None if factory is None else factory.__module__.split(".")[0]) == want


def test_an_unknown_event_loop_is_refused() -> None:
    from koord_scheduler.app.serve import ServeError, event_loop_factory

    with pytest.raises(ServeError, match="PYKOORD_EVENT_LOOP: 'trio' is not an event loop"):
        event_loop_factory("trio")


@pytest.mark.parametrize(
    ("config", "flag", "want"),
    [
        pytest.param(GOOD_CONFIG, "", ("", 50.0, 100, True), id="defaults"),
        pytest.param(
            GOOD_CONFIG + "clientConnection: {kubeconfig: /k, qps: 7, burst: 9}\n",
            "",
            ("/k", 7.0, 9, True),
            id="stated",
        ),
        pytest.param(
            GOOD_CONFIG + "clientConnection: {kubeconfig: /k}\n", "/flag", ("/flag", 50.0, 100, True), id="flag-wins"
        ),
        pytest.param(
            GOOD_CONFIG + "clientConnection: {contentType: application/json}\n",
            "",
            ("", 50.0, 100, False),
            id="json-content-type",
        ),
        pytest.param(
            GOOD_CONFIG + "clientConnection: {acceptContentTypes: 'application/json'}\n",
            "",
            ("", 50.0, 100, False),
            id="json-accepted",
        ),
        pytest.param("apiVersion: v1\nkind: ConfigMap\ndata: {}\n", "", None, id="configmap-not-guessed"),
        pytest.param(GOOD_CONFIG + "clientConnection: {qps: fast}\n", "", None, id="odd-value"),
        pytest.param("{not yaml", "", None, id="unreadable"),
    ],
)
def test_the_stated_client_settings_match_the_validated_ones(
    tmp_path: Path, config: str, flag: str, want: tuple[str, float, int, bool] | None
) -> None:
    from koord_scheduler.app.serve import _options, _parser, _stated_client
    from kubeapi.protowire import wants_protobuf

    path = tmp_path / "config.yaml"
    path.write_text(config)
    ns = _parser().parse_args(["--config", str(path), *(["--kubeconfig", flag] if flag else [])])
    stated = _stated_client(ns)
    assert stated == want
    if stated is not None:  # what listing starts with early is what the validated configuration says
        options = _options(ns)
        client = options.config.client_connection
        protobuf = wants_protobuf(client.accept_content_types, client.content_type)
        assert stated == (options.kubeconfig, client.qps, client.burst, protobuf)
