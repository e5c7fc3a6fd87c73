"""``koord-scheduler`` cluster mode: what is refused before any network I/O (exit 2, one clear line)."""

from __future__ import annotations

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
            [], "LeaseDuration must be greater than RenewDeadline", id="lease-shorter-than-deadline",
        ),
        pytest.param(
            GOOD_CONFIG + "profiles:\n- schedulerName: s\n  plugins: {filter: {enabled: [{name: NoSuchPlugin}]}}\n",
            [], "NoSuchPlugin", id="unknown-plugin",
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
