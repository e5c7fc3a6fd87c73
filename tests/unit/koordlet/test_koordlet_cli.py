"""The koordlet command line: Koordinator's DaemonSet args, Go flag spelling, and one-line refusals.

Refusals run the real ``koordlet`` console script in a subprocess: exit code 2, exactly one line on stderr,
no traceback.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from koordlet.app.flags import UsageError, build_parser, go_style, no_effect_flags, parse
from koordlet.qosmanager import KOORDLET_FEATURES, FeatureGates, QOSManager, builtin_registry
from koordlet.qosmanager.featuregates import parse_feature_gate_flag
from tests.fixtures import KOORDINATOR_CHART

REPO = Path(__file__).resolve().parents[3]
CHART = KOORDINATOR_CHART
KOORDLET_BIN = Path(sys.executable).parent / "koordlet"


def chart_args() -> list[str]:
    """The koordlet container args of Koordinator's chart v1.8.0, rendered with the chart's default values."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())["koordlet"]
    substitutions = {
        "{{ .Values.koordlet.metrics.port }}": str(values["metrics"]["port"]),
        "{{ .Values.koordlet.hostDirs.koordletSockDir }}": values["hostDirs"]["koordletSockDir"],
        "{{ .Values.koordlet.log.level }}": str(values["log"]["level"]),
    }
    text = (CHART / "koordlet.yaml").read_text()
    block = text[text.index("args:") : text.index("image:", text.index("args:"))]
    args: list[str] = []
    skipping = False
    for line in block.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("{{- if"):
            skipping = True  # keep the chart's default branch (no koordlet.features set)
        elif stripped.startswith(("{{- else", "{{- end")):
            skipping = False
        elif stripped.startswith("- ") and not skipping:
            arg = stripped[2:]
            for template, value in substitutions.items():
                arg = arg.replace(template, value)
            args.append(arg)
    return args


def full_parser() -> object:
    manager = QOSManager(builtin_registry())
    manager.instantiate()
    parser = build_parser()
    manager.init_flags(parser)
    return parser


def test_koordinator_daemonset_args_parse_unchanged() -> None:
    args_list = chart_args()
    assert args_list == [
        "-addr=:9316",
        "-cgroup-root-dir=/host-cgroup/",
        "-feature-gates=BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true,Accelerators=true",
        "-runtime-hooks-host-endpoint=/var/run/koordlet/koordlet.sock",
        "--logtostderr=true",
        "--v=4",
    ]
    args = parse(full_parser(), ["--node-name", "n", *args_list])  # type: ignore[arg-type]
    assert args.addr == ("0.0.0.0", 9316)
    assert args.cgroup_root == Path("/host-cgroup/")
    assert args.klog_v == 4 and args.logtostderr == "true"
    gates = FeatureGates.resolve(
        {**KOORDLET_FEATURES, **builtin_registry().feature_specs()}, parse_feature_gate_flag(args.feature_gates)
    )
    assert gates.enabled("BECPUEvict") and gates.enabled("CgroupReconcile") and gates.enabled("BatchResource")


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param(["-feature-gates=A=true"], ["--feature-gates=A=true"], id="single-dash-long-equals"),
        pytest.param(["-addr", ":1"], ["--addr", ":1"], id="single-dash-long-space"),
        pytest.param(["-v", "-vv", "-v=5"], ["-v", "-vv", "--v=5"], id="short-verbosity-and-klog-v"),
        pytest.param(["--report-interval", "-5"], ["--report-interval", "-5"], id="negative-number-kept"),
        pytest.param(["--", "-x=1"], ["--", "-x=1"], id="after-double-dash-untouched"),
    ],
)
def test_go_style(argv: list[str], want: list[str]) -> None:
    assert go_style(argv)[0] == want


@pytest.mark.parametrize(
    ("argv", "want_key", "want_value"),
    [
        pytest.param(["-collect-res-used-interval=2s"], "collect_res_used_interval", 2.0, id="go-duration"),
        pytest.param(["--kubelet-sync-interval=1m"], "kubelet_sync_interval", 60.0, id="go-duration-minutes"),
        pytest.param(["-cpu-evict-interval-seconds=3"], "cpu_evict_interval_seconds", 3.0, id="plugin-flag-go-form"),
        pytest.param(["-proc-root-dir=/host-proc"], "proc_root", Path("/host-proc"), id="koordinator-proc-name"),
        pytest.param(["--runtime-hooks-reconcile-interval=5s"], "runtime_hooks_reconcile_interval", 5.0, id="rh"),
        pytest.param(["-addr=127.0.0.1:9999"], "addr", ("127.0.0.1", 9999), id="addr-host-port"),
        pytest.param(["-sys-root-dir=/host-sys/"], "sysfs_root", Path("/host-sys/"), id="koordinator-sys-name"),
        pytest.param(["--enable-pagecache-collector"], "enable_pagecache_collector", True, id="go-bool-bare"),
        pytest.param(["-enable-pagecache-collector=false"], "enable_pagecache_collector", False, id="go-bool-false"),
        pytest.param(
            ["-runtime-hooks-plugin-failure-policy=Fail"], "runtime_hooks_plugin_failure_policy", "Fail", id="fail"
        ),
        pytest.param([], "runtime_hooks_plugin_failure_policy", "Ignore", id="failure-policy-default"),
        pytest.param(
            ["-hami-core-library-directory-path=/opt/libvgpu.so"],
            "hami_core_library_directory_path",
            "/opt/libvgpu.so",
            id="hami-core-library",
        ),
    ],
)
def test_koordinator_flag_forms(argv: list[str], want_key: str, want_value: object) -> None:
    assert getattr(parse(full_parser(), argv), want_key) == want_value  # type: ignore[arg-type]


def test_unknown_flag_named_as_written() -> None:
    with pytest.raises(UsageError) as err:
        parse(full_parser(), ["-no-such-flag=1"])  # type: ignore[arg-type]
    assert err.value.message == "unrecognized arguments: -no-such-flag=1"


def run_cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(KOORDLET_BIN)] if KOORDLET_BIN.exists() else [sys.executable, "-m", "koordlet.app.cli"]
    return subprocess.run(
        [*command, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param(
            ["--metrics-port", "99999"], "argument --metrics-port: port out of range 0..65535: 99999", id="port"
        ),
        pytest.param(["--report-interval", "-5"], "argument --report-interval: must be > 0, got '-5'", id="interval"),
        pytest.param(["--collect-res-used-interval", "0"], "argument --collect-res-used-interval: must be > 0", id="0"),
        pytest.param(
            ["-kubelet-port=70000"], "argument -kubelet-port: port out of range 0..65535: 70000", id="go-port"
        ),
        pytest.param(
            ["--cpu-evict-interval-seconds", "-1"], "argument --cpu-evict-interval-seconds: must be > 0", id="p"
        ),
        pytest.param(["--cgroup-root", "/nonexistent"], "--cgroup-root /nonexistent: no such directory", id="cgroup"),
        pytest.param(["--kubeconfig", "/nonexistent"], "argument --kubeconfig: /nonexistent: no such file", id="kcfg"),
        pytest.param(["-no-such-flag=1"], "unrecognized arguments: -no-such-flag=1", id="unknown-flag"),
        pytest.param(["--logtostderr=maybe"], "argument --logtostderr: not a boolean: 'maybe'", id="go-bool"),
        pytest.param(["--feature-gates", "Nope=true"], "unrecognized feature gate: Nope", id="gate"),
        pytest.param(["-addr=9316"], "argument -addr: want host:port", id="addr-without-colon"),
        pytest.param(
            ["-runtime-hooks-plugin-failure-policy=fail"],
            "argument -runtime-hooks-plugin-failure-policy: 'fail' is not a failure policy (Fail or Ignore)",
            id="plugin-failure-policy",
        ),
        pytest.param(
            ["--runtime-hooks-failure-policy=Abort"],
            "argument --runtime-hooks-failure-policy: 'Abort' is not a failure policy (Fail or Ignore)",
            id="proxy-failure-policy",
        ),
    ],
)
def test_bad_flag_is_one_line_exit_2(argv: list[str], want: str) -> None:
    result = run_cli("--node-name", "n", *argv)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("koordlet: ") and want in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_unusable_kubeconfig_is_one_line_exit_2(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    (tmp_path / "cg").mkdir()
    cgroup_root = str(tmp_path / "cg")
    result = run_cli(
        "--node-name", "n", "--kubeconfig", str(kubeconfig), "--cgroup-root", cgroup_root, "--metrics-port", "-1"
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and re.match(rf"koordlet: --kubeconfig {re.escape(str(kubeconfig))}: ", lines[0]), lines


def test_without_kubeconfig_the_in_cluster_config_is_one_line_exit_2(tmp_path: Path) -> None:
    """No --kubeconfig: the in-cluster service account, read by kubeapi's loader; what is missing is said."""
    (tmp_path / "cg").mkdir()
    result = run_cli("--node-name", "n", "--cgroup-root", str(tmp_path / "cg"), "--metrics-port", "-1")
    assert result.returncode == 2, result.stderr
    want = "koordlet: in-cluster config: not running in a cluster (KUBERNETES_SERVICE_HOST is unset)"
    assert result.stderr.splitlines() == [want], result.stderr


@pytest.mark.parametrize(
    ("data", "want"),
    [
        pytest.param(
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe",
            "not UTF-8 text (byte 0x89 at offset 0); is it a binary file?",
            id="binary",
        ),
        pytest.param(
            b"featureGates: " + b"[" * 20_000 + b"]" * 20_000 + b"\n",
            "invalid YAML: nested deeper than 200 levels",
            id="nested-20000",
        ),
        pytest.param(
            b"featureGates: [\n", "invalid YAML: expected the node content, but found '<stream end>'", id="truncated"
        ),
        pytest.param(b"- just\n- a list\n", "want a mapping with featureGates", id="not-a-mapping"),
    ],
)
def test_a_config_file_that_is_not_yaml_is_one_line_exit_2(tmp_path: Path, data: bytes, want: str) -> None:
    config = tmp_path / "koordlet.cfg"
    config.write_bytes(data)
    result = run_cli("--node-name", "n", "--standalone", "--config", str(config))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"koordlet: --config {config}: ") and want in lines[0], lines


def test_chart_args_get_past_parsing_in_the_real_binary() -> None:
    """The chart's args reach the start-up path checks (its /host-cgroup/ is not on this machine)."""
    result = run_cli("--node-name", "n", *chart_args())
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "koordlet: --cgroup-root /host-cgroup: no such directory", result.stderr


def test_metrics_port_in_use_is_one_line_exit_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "--node-name", "n", "--standalone", "--duration", "5", "--metrics-host", "127.0.0.1",
            "--metrics-port", str(port),
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"koordlet: cannot serve metrics on 127.0.0.1:{port}: "), lines


@pytest.mark.slow
def test_api_outage_logs_one_line_per_failure_kind(tmp_path: Path) -> None:
    """koordlet against an API server that refuses connections: it keeps running, the outage is one line
    for its four watches (kubeapi's shared outage log) and one for the NodeMetric write however often they
    are retried, and no traceback. (The NodeResourceTopology is not written before the Node is seen.)"""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n"
    )
    (tmp_path / "cg").mkdir()
    result = run_cli(
        "--node-name", "n", "--kubeconfig", str(kubeconfig), "--cgroup-root", str(tmp_path / "cg"),
        "--metrics-port", "-1", "--report-interval", "0.5", "--duration", "4",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr and not any("urllib3" in line for line in lines), result.stderr
    failed = [line for line in lines if " failed: " in line]
    kinds = sorted(line.split(": ", 1)[1].split(" failed:")[0] for line in failed)
    watches = ("list pods", "list nodes", "list nodeslos", "list nodemetrics")
    assert len(kinds) == 2 and kinds[0] == "NodeMetric status write" and kinds[1] in watches, result.stderr
    assert any(" list " in line and "the API server seems unreachable" in line for line in failed), result.stderr


def test_runtime_proxy_failure_policy_is_accepted_and_reported_as_no_effect() -> None:
    """Koordinator's NRI server follows --runtime-hooks-plugin-failure-policy; --runtime-hooks-failure-policy
    is koord-runtime-proxy's, which pykoord has not."""
    args = parse(full_parser(), ["-runtime-hooks-failure-policy=Fail"])  # type: ignore[arg-type]
    assert "--runtime-hooks-failure-policy" in no_effect_flags(args)
    assert args.runtime_hooks_plugin_failure_policy == "Ignore"
    assert "--runtime-hooks-failure-policy" not in no_effect_flags(parse(full_parser(), []))  # type: ignore[arg-type]
