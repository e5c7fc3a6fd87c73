"""``koordlet``: the node agent's command line.

    koordlet --node-name NAME [--kubeconfig FILE] [--feature-gates A=true,B=false] [--config FILE]
             [--cgroup-root DIR] [--cgroup-kubepods-dir REL] [--proc-root DIR] [--metrics-port 9316]
             [--standalone [--once | --duration SECONDS]]
             [--pods-source apiserver|kubelet [--kubelet-address IP] [--kubelet-port 10250]
              [--kubelet-scheme https|http] [--kubelet-insecure-skip-verify] [--kubelet-ca-file FILE]
              [--kubelet-token-file FILE] [--kubelet-sync-interval 10]]

``NODE_NAME`` in the environment stands in for ``--node-name`` (as in the DaemonSet). ``--standalone``
needs no API server: pods are discovered from the kubepods cgroups and the NodeMetric status the agent
would report is printed as JSON. Koordinator's flag names and Go spelling (``-feature-gates=...``,
``-addr=:9316``, ``-cgroup-root-dir=/host-cgroup/``) work too; see :mod:`koordlet.app.flags`.

Exit codes: 0 after a clean stop, 2 for a bad command line or a start-up failure (one line on stderr),
1 for an unexpected failure (one line; the traceback with ``-vv``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

from apis.core import yamlsafe
from koordlet.app.agent import Agent, AgentOptions, StartupError
from koordlet.app.flags import UsageError, build_parser, no_effect_flags, parse
from koordlet.qosmanager import (
    KOORDLET_FEATURES,
    FeatureGateError,
    FeatureGates,
    QOSManager,
    builtin_registry,
    entry_point_registry,
)
from koordlet.qosmanager.featuregates import parse_feature_gate_flag
from koordlet.qosmanager.gatetable import implementation_of, refused_gates
from koordlet.statesinformer.kubelet import KubeletOptions

__all__ = ["build_parser", "main"]

EXIT_USAGE = 2
EXIT_FAILURE = 1
ONCE_TICKS = 3
KLOG_DEBUG_LEVEL = 5

log = logging.getLogger("koordlet")


def _config_gates(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = yamlsafe.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as err:
        raise FeatureGateError(
            f"--config {path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            "is it a binary file?"
        ) from None
    except (OSError, yaml.YAMLError) as err:
        raise FeatureGateError(f"--config {path}: {_one_line(err)}") from None
    if not isinstance(data, dict):
        raise FeatureGateError(f"--config {path}: want a mapping with featureGates: {{Name: bool}}")
    gates = data.get("featureGates", {})
    if not isinstance(gates, dict):
        raise FeatureGateError(f"{path}: featureGates must be a mapping of Name: bool")
    return gates


def _one_line(err: BaseException) -> str:
    """A YAML or OS error as one line: its problem and where (``... at line 3, column 1``)."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        mark = err.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"invalid YAML: {err.problem}{where}"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _log_level(args: argparse.Namespace) -> int:
    if args.verbose > 1 or (args.klog_v is not None and args.klog_v >= KLOG_DEBUG_LEVEL):
        return logging.DEBUG
    if args.verbose or args.klog_v is not None:
        return logging.INFO
    return logging.WARNING


def _check_paths(args: argparse.Namespace) -> str | None:
    """The first start-up path problem as one line, or ``None``."""
    if not args.cgroup_root.is_dir():
        return f"--cgroup-root {args.cgroup_root}: no such directory"
    if not args.proc_root.is_dir():
        return f"--proc-root {args.proc_root}: no such directory"
    if not args.standalone and args.kubeconfig is None:
        env = os.environ.get("KUBECONFIG")
        if env and not Path(env).is_file():
            return f"KUBECONFIG {env}: no such file"
    return None


def _fail(message: str) -> None:
    print(f"koordlet: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    registry = builtin_registry().merge(entry_point_registry())
    qos_manager = QOSManager(registry)
    qos_manager.instantiate()
    parser = build_parser()
    qos_manager.init_flags(parser)
    try:
        args = parse(parser, sys.argv[1:] if argv is None else argv)
    except UsageError as err:
        _fail(err.message)
        return EXIT_USAGE
    level = _log_level(args)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level > logging.DEBUG:
        # urllib3 logs a warning per retried connection: during an API outage that is several lines per
        # request. koordlet reports each failed call itself, one line per kind (koordlet.system.errorlog).
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    for name in no_effect_flags(args):
        log.warning("flag %s is accepted for Koordinator compatibility and has no effect", name)
    if not args.node_name:
        _fail("no node name: set --node-name or the NODE_NAME environment variable")
        return EXIT_USAGE
    try:
        gates = FeatureGates.resolve(
            {**KOORDLET_FEATURES, **registry.feature_specs()},
            _config_gates(args.config),
            parse_feature_gate_flag(args.feature_gates),
        )
    except FeatureGateError as err:
        _fail(str(err))
        return EXIT_USAGE
    refused = refused_gates(gates)
    if refused:
        detail = "; ".join(f"{name} ({implementation_of(name).what})" for name in refused)
        _fail(f"feature gates not implemented in pykoord cannot be turned on: {detail}; remove them or set them false")
        return EXIT_USAGE
    problem = _check_paths(args)  # after the gates: a test can reach it to prove a gate preset is accepted
    if problem is not None:
        _fail(problem)
        return EXIT_USAGE
    host, port = args.addr if args.addr is not None else (args.metrics_host, args.metrics_port)
    duration = args.duration
    if args.once:
        duration = args.collect_res_used_interval * ONCE_TICKS + 0.5
    options = AgentOptions(
        node_name=args.node_name,
        cgroup_root=args.cgroup_root,
        cgroup_driver=args.cgroup_driver,
        kubepods_dir=args.cgroup_kubepods_dir,
        proc_root=args.proc_root,
        kubeconfig=str(args.kubeconfig) if args.kubeconfig else os.environ.get("KUBECONFIG"),
        metrics_host=host,
        metrics_port=port,
        collect_interval=args.collect_res_used_interval,
        report_interval=args.report_interval,
        standalone=args.standalone,
        pods_source=args.pods_source,
        kubelet=KubeletOptions(
            address=args.kubelet_address,
            port=args.kubelet_port,
            scheme=args.kubelet_scheme,
            insecure_skip_verify=args.kubelet_insecure_skip_verify,
            ca_file=args.kubelet_ca_file,
            token_file=args.kubelet_token_file,
            timeout=args.kubelet_sync_timeout,
            sync_interval=args.kubelet_sync_interval,
        ),
        duration=duration,
        args=args,
    )
    try:
        return asyncio.run(_run(options, gates, qos_manager))
    except StartupError as err:
        _fail(str(err))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 0
    except Exception as err:
        cause: BaseException = err
        while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        _fail(f"stopped by an unexpected error: {type(cause).__name__}: {cause} (-vv shows the traceback)")
        log.debug("unexpected error", exc_info=True)
        return EXIT_FAILURE


async def _run(options: AgentOptions, gates: FeatureGates, qos_manager: QOSManager) -> int:
    agent = Agent(options, gates, qos_manager)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, agent.stop.set)
    status = await agent.run()
    if status is not None:
        out = {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": options.node_name},
            "status": status.to_wire(),
        }
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
