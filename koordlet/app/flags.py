"""The koordlet's flags: pykoord's names, Koordinator's names for the same settings, and Go's spelling.

Koordinator's koordlet is a Go binary, and its DaemonSet passes flags the way Go's ``flag`` package reads
them: one dash or two (``-feature-gates=...``, ``--v=4``), ``name=value`` or ``name value``. koordlet reads
them the same way, so those args work unchanged:

- a single-dash long flag is the same as its double-dash form (``-addr`` is ``--addr``); ``-v``/``-vv`` stay
  the short verbosity flag;
- Koordinator's names are accepted where pykoord has the same setting: ``--addr`` (``host:port`` of the
  metrics server), ``--cgroup-root-dir``, ``--proc-root-dir``, ``--v`` (klog verbosity), and durations in Go
  form (``--collect-res-used-interval=1s``, ``--kubelet-sync-interval=10s``, ...);
- Koordinator flags that have no pykoord setting but appear in its DaemonSet (:data:`NO_EFFECT_FLAGS`) are
  accepted and reported once at start as having no effect;
- any other flag is refused, by the name it was given.

Every value is checked when parsed (ports in range, durations > 0, existing paths), and a bad one is one
line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from koordlet.qosmanager.flagtypes import (
    any_seconds,
    go_bool,
    host_port,
    non_negative_seconds,
    port,
    port_or_off,
    positive_seconds,
)
from koordlet.runtimehooks.failure_policy import FAILURE_POLICIES
from koordlet.runtimehooks.hooks import DEFAULT_HAMI_CORE_LIBRARY
from koordlet.statesinformer.kubelet import DEFAULT_KUBELET_PORT

NO_EFFECT_FLAGS = {
    "--runtime-hooks-host-endpoint": "pykoord has no koord-runtime-proxy server; its runtime hooks come through NRI",
    "--runtime-hooks-failure-policy": "koord-runtime-proxy's failure policy; pykoord has no proxy, its NRI hooks "
    "follow --runtime-hooks-plugin-failure-policy (as Koordinator's NRI server)",
    "--logtostderr": "pykoord always logs to stderr",
}
"""Koordinator koordlet flags its chart passes that have no pykoord setting: accepted, reported, unused."""

_GO_LONG_FLAG = re.compile(r"^-(?!v+$)(?!v=)[A-Za-z][A-Za-z0-9_.-]*(=.*)?$", re.DOTALL)
_KLOG_V = re.compile(r"^-v=(.*)$", re.DOTALL)


class UsageError(SystemExit):
    """A bad command line; ``message`` is one line meant for the user as is. Exit code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


class KoordletArgumentParser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def go_style(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Rewrite single-dash long flags to double-dash (Go's ``flag`` treats both alike).

    Returns the new argv and a map from each rewritten flag name back to how it was written, so an error
    names the flag the way the user spelled it. Everything after ``--`` is left alone.
    """
    out: list[str] = []
    spelled: dict[str, str] = {}
    rest = False
    for arg in argv:
        if rest or arg == "--":
            rest = True
            out.append(arg)
            continue
        match = _KLOG_V.match(arg)
        if match:
            out.append(f"--v={match.group(1)}")
            spelled["--v"] = "-v"
            continue
        if _GO_LONG_FLAG.match(arg):
            name = arg.split("=", 1)[0]
            spelled["-" + name] = name
            out.append("-" + arg)
            continue
        out.append(arg)
    return out, spelled


def _existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return path


def _positive_int(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {number}")
    return number


def _percent_int(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= number <= 1000:
        raise argparse.ArgumentTypeError(f"must be within 0..1000, got {number}")
    return number


def _klog_verbosity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def build_parser() -> KoordletArgumentParser:
    parser = KoordletArgumentParser(prog="koordlet", description="pykoord node agent (koordlet)", allow_abbrev=False)
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""), help="this node (env NODE_NAME)")
    parser.add_argument(
        "--kubeconfig",
        type=_existing_file,
        default=None,
        help="kubeconfig (env KUBECONFIG); else the in-cluster ServiceAccount",
    )
    parser.add_argument("--feature-gates", default="", help="Name=true,Other=false (Koordinator gate names)")
    parser.add_argument("--config", type=_existing_file, help="YAML with featureGates: {Name: bool} (flags win)")
    parser.add_argument(
        "--cgroup-root",
        "--cgroup-root-dir",
        dest="cgroup_root",
        type=Path,
        default=Path("/sys/fs/cgroup"),
        help="cgroup mount (Koordinator: --cgroup-root-dir)",
    )
    parser.add_argument("--cgroup-driver", choices=["auto", "cgroupfs", "systemd"], default="auto")
    parser.add_argument("--cgroup-kubepods-dir", default=None, help="kubepods cgroup relative to each mount")
    parser.add_argument(
        "--proc-root",
        "--proc-root-dir",
        dest="proc_root",
        type=Path,
        default=Path("/proc"),
        help="procfs (Koordinator: --proc-root-dir)",
    )
    parser.add_argument("--metrics-host", default="0.0.0.0")
    parser.add_argument("--metrics-port", type=port_or_off, default=9316, help="0..65535; -1 disables the server")
    parser.add_argument(
        "--addr", type=host_port, default=None, help="Koordinator's host:port of the metrics server (e.g. :9316)"
    )
    parser.add_argument(
        "--collect-res-used-interval", type=positive_seconds, default=1.0, help="seconds or Go duration (1s)"
    )
    parser.add_argument(
        "--report-interval", type=positive_seconds, default=None, help="override reportIntervalSeconds (> 0)"
    )
    parser.add_argument(
        "--enable-pagecache-collector",
        type=go_bool,
        nargs="?",
        const=True,
        default=False,
        help="collect memory with page cache (also on whenever NodeMetric asks for usageWithPageCache)",
    )
    parser.add_argument(
        "--resctrl-collector-interval", type=positive_seconds, default=10.0, help="ResctrlCollector period (10s)"
    )
    parser.add_argument(
        "--cpi-collector-interval", type=positive_seconds, default=60.0, help="CPICollector period (60s)"
    )
    parser.add_argument(
        "--collect-cpi-timewindow", type=positive_seconds, default=10.0, help="CPICollector counting window (10s)"
    )
    parser.add_argument(
        "--coldpage-collector-interval", type=positive_seconds, default=5.0, help="ColdPageCollector period (5s)"
    )
    parser.add_argument(
        "--enable-resctrl-collector",
        type=go_bool,
        nargs="?",
        const=True,
        default=False,
        help="accepted for Koordinator compatibility: the ResctrlCollector gate alone turns the collector on",
    )
    parser.add_argument("--standalone", action="store_true", help="no API server: collect and print")
    parser.add_argument("--once", action="store_true", help="standalone: print after a few ticks and exit")
    parser.add_argument("--duration", type=positive_seconds, default=None, help="stop after this many seconds")
    prediction = parser.add_argument_group("peak prediction (Koordinator's --prediction-* flags)")
    prediction.add_argument(
        "--prediction-checkpoint-filepath",
        type=Path,
        default=Path("/prediction-checkpoints"),
        help="directory of the model checkpoints (must exist; the DaemonSet mounts it)",
    )
    prediction.add_argument(
        "--prediction-cold-start-duration",
        type=non_negative_seconds,
        default=24 * 3600.0,
        help="a pod younger than this reclaims nothing (24h)",
    )
    prediction.add_argument(
        "--prediction-safety-margin-percent",
        type=_percent_int,
        default=10,
        help="added above every predicted peak (10)",
    )
    prediction.add_argument(
        "--prediction-memory-histogram-decay-halflife",
        type=positive_seconds,
        default=24 * 3600.0,
        help="memory samples lose half their weight per half-life (24h)",
    )
    prediction.add_argument(
        "--prediction-cpu-histogram-decay-halflife",
        type=positive_seconds,
        default=12 * 3600.0,
        help="CPU samples lose half their weight per half-life (12h)",
    )
    prediction.add_argument(
        "--prediction-training-interval",
        type=positive_seconds,
        default=60.0,
        help="models take one sample per interval (1m)",
    )
    prediction.add_argument(
        "--prediction-model-expiration-duration",
        type=positive_seconds,
        default=1800.0,
        help="a model without samples this long is dropped (30m)",
    )
    prediction.add_argument(
        "--prediction-model-checkpoint-interval",
        type=positive_seconds,
        default=600.0,
        help="a model is checkpointed at most this often (10m)",
    )
    prediction.add_argument(
        "--prediction-model-checkpoint-max-per-step",
        type=_positive_int,
        default=12,
        help="checkpoints written per minute at most (12)",
    )
    pods = parser.add_argument_group("pod source")
    pods.add_argument(
        "--pods-source",
        choices=["apiserver", "kubelet"],
        default="apiserver",
        help="apiserver: watch pods with fieldSelector spec.nodeName; kubelet: poll the kubelet's GET /pods",
    )
    pods.add_argument(
        "--kubelet-address",
        default=os.environ.get("NODE_IP") or "127.0.0.1",
        help="kubelet host (env NODE_IP, else 127.0.0.1: koordlet runs with hostNetwork)",
    )
    pods.add_argument("--kubelet-port", type=port, default=DEFAULT_KUBELET_PORT)
    pods.add_argument("--kubelet-scheme", choices=["https", "http"], default="https")
    pods.add_argument(
        "--kubelet-insecure-skip-verify", action="store_true", help="do not verify the kubelet's serving cert"
    )
    pods.add_argument("--kubelet-ca-file", type=_existing_file, default=None, help="CA bundle for the kubelet's cert")
    pods.add_argument(
        "--kubelet-token-file",
        type=_existing_file,
        default=None,
        help="bearer token; default: the ServiceAccount token",
    )
    pods.add_argument("--kubelet-sync-interval", type=any_seconds, default=10.0, help="seconds or 10s; <= 0 disables")
    pods.add_argument("--kubelet-sync-timeout", type=positive_seconds, default=3.0, help="per request (> 0)")
    parser.add_argument(
        "--qos-dry-run", action="store_true", help="QoS strategies log their plans and evictions, write nothing"
    )
    hooks = parser.add_argument_group("runtime hooks (NRI)")
    hooks.add_argument(
        "--enable-nri-runtime-hook",
        type=go_bool,
        nargs="?",
        const=True,
        default=True,
        help="apply the runtime-hook values at container creation through the runtime's NRI socket (true)",
    )
    hooks.add_argument(
        "--runtime-hooks-nri-socket-path",
        default="nri/nri.sock",
        help="the NRI socket; a relative path is under --var-run-root-dir (Koordinator's default nri/nri.sock)",
    )
    hooks.add_argument(
        "--runtime-hooks-nri-connect-timeout",
        type=positive_seconds,
        default=6.0,
        help="dial, register and be configured within this (Go duration or seconds; 6s)",
    )
    hooks.add_argument("--runtime-hooks-nri-plugin-name", default="koordlet_nri", help="NRI plugin name")
    hooks.add_argument("--runtime-hooks-nri-plugin-index", default="00", help="NRI plugin index (two digits)")
    hooks.add_argument(
        "--runtime-hooks-plugin-failure-policy",
        type=failure_policy,
        default="Ignore",
        help="a hook decision that fails or runs out of time: Ignore creates the container without koordlet's "
        "values (the reconciler applies them later), Fail fails the creation with the error (Ignore)",
    )
    hooks.add_argument(
        "--hami-core-library-directory-path",
        default=DEFAULT_HAMI_CORE_LIBRARY,
        help="HAMi-core's libvgpu.so on the host, preloaded into and mounted in shared-GPU HAMi-core containers "
        f"({DEFAULT_HAMI_CORE_LIBRARY})",
    )
    hooks.add_argument(
        "--var-run-root-dir",
        type=Path,
        default=Path("/var/run"),
        help="the host's /var/run as koordlet sees it (the chart mounts it at /host-var-run)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v info, -vv debug (with tracebacks)")
    parser.add_argument("--v", dest="klog_v", type=_klog_verbosity, default=None, help="klog verbosity; >= 5 is -vv")
    for name, why in NO_EFFECT_FLAGS.items():
        parser.add_argument(name, default=None, metavar="VALUE", help=f"accepted, no effect: {why}")
    return parser


def no_effect_flags(args: argparse.Namespace) -> list[str]:
    """The no-effect Koordinator flags given on this command line."""
    return [name for name in NO_EFFECT_FLAGS if getattr(args, name[2:].replace("-", "_"), None) is not None]


def failure_policy(raw: str) -> str:
    """Koordinator's failure policy values, spelled as there (``Fail`` or ``Ignore``)."""
    if raw not in FAILURE_POLICIES:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a failure policy (Fail or Ignore)")
    return raw


def check_no_effect_values(args: argparse.Namespace) -> None:
    """``--logtostderr`` must still be a Go boolean, ``--runtime-hooks-failure-policy`` Fail or Ignore (Koordinator
    refuses to start on another value)."""
    checks = (("logtostderr", go_bool), ("runtime_hooks_failure_policy", failure_policy))
    for dest, check in checks:
        raw = getattr(args, dest, None)
        if raw is not None:
            try:
                check(raw)
            except argparse.ArgumentTypeError as err:
                raise UsageError(f"argument --{dest.replace('_', '-')}: {err}") from None


def parse(parser: KoordletArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv`` (Go spelling allowed). Raises :class:`UsageError` naming flags as they were written."""
    normalized, spelled = go_style(argv)
    try:
        args = parser.parse_args(normalized)
        check_no_effect_values(args)
    except UsageError as err:
        message = err.message
        for internal, original in sorted(spelled.items(), key=lambda kv: -len(kv[0])):
            message = re.sub(rf"(?<![\w-]){re.escape(internal)}(?![\w-])", original, message)
        raise UsageError(message) from None
    return args
