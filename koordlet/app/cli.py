"""``koordlet``: the node agent's command line.

    koordlet --node-name NAME [--kubeconfig FILE] [--feature-gates A=true,B=false] [--config FILE]
             [--cgroup-root DIR] [--cgroup-kubepods-dir REL] [--proc-root DIR] [--metrics-port 9316]
             [--standalone [--once | --duration SECONDS]]
             [--pods-source apiserver|kubelet [--kubelet-address IP] [--kubelet-port 10250]
              [--kubelet-scheme https|http] [--kubelet-insecure-skip-verify] [--kubelet-ca-file FILE]
              [--kubelet-token-file FILE] [--kubelet-sync-interval 10]]

``NODE_NAME`` in the environment stands in for ``--node-name`` (as in the DaemonSet). ``--standalone``
needs no API server: pods are discovered from the kubepods cgroups and the NodeMetric status the agent
would report is printed as JSON.
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

from koordlet.app.agent import Agent, AgentOptions
from koordlet.qosmanager import (
    KOORDLET_FEATURES,
    FeatureGateError,
    FeatureGates,
    QOSManager,
    builtin_registry,
    entry_point_registry,
    parse_feature_gate_flag,
)
from koordlet.statesinformer.kubelet import DEFAULT_KUBELET_PORT, KubeletOptions

EXIT_USAGE = 2
ONCE_TICKS = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="koordlet", description="pykoord node agent (koordlet)")
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""), help="this node (env NODE_NAME)")
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="kubeconfig; else in-cluster")
    parser.add_argument("--feature-gates", default="", help="Name=true,Other=false (Koordinator gate names)")
    parser.add_argument("--config", type=Path, help="YAML with featureGates: {Name: bool} (flags win)")
    parser.add_argument("--cgroup-root", type=Path, default=Path("/sys/fs/cgroup"))
    parser.add_argument("--cgroup-driver", choices=["auto", "cgroupfs", "systemd"], default="auto")
    parser.add_argument("--cgroup-kubepods-dir", default=None, help="kubepods cgroup relative to each mount")
    parser.add_argument("--proc-root", type=Path, default=Path("/proc"))
    parser.add_argument("--metrics-host", default="0.0.0.0")
    parser.add_argument("--metrics-port", type=int, default=9316, help="-1 disables the HTTP server")
    parser.add_argument("--collect-res-used-interval", type=float, default=1.0, help="seconds, >= 1 recommended")
    parser.add_argument("--report-interval", type=float, default=None, help="override reportIntervalSeconds")
    parser.add_argument("--standalone", action="store_true", help="no API server: collect and print")
    parser.add_argument("--once", action="store_true", help="standalone: print after a few ticks and exit")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
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
    pods.add_argument("--kubelet-port", type=int, default=DEFAULT_KUBELET_PORT)
    pods.add_argument("--kubelet-scheme", choices=["https", "http"], default="https")
    pods.add_argument(
        "--kubelet-insecure-skip-verify", action="store_true", help="do not verify the kubelet's serving cert"
    )
    pods.add_argument("--kubelet-ca-file", type=Path, default=None, help="CA bundle for the kubelet's cert")
    pods.add_argument(
        "--kubelet-token-file", type=Path, default=None, help="bearer token; default: the ServiceAccount token"
    )
    pods.add_argument("--kubelet-sync-interval", type=float, default=10.0, help="seconds; <= 0 disables")
    pods.add_argument("--kubelet-sync-timeout", type=float, default=3.0, help="seconds per request")
    parser.add_argument(
        "--qos-dry-run", action="store_true", help="QoS strategies log their plans and evictions, write nothing"
    )
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _config_gates(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    gates = data.get("featureGates", {})
    if not isinstance(gates, dict):
        raise FeatureGateError(f"{path}: featureGates must be a mapping of Name: bool")
    return gates


def main(argv: list[str] | None = None) -> int:
    registry = builtin_registry().merge(entry_point_registry())
    qos_manager = QOSManager(registry)
    qos_manager.instantiate()
    parser = build_parser()
    qos_manager.init_flags(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.node_name:
        print("koordlet: no node name: set --node-name or the NODE_NAME environment variable", file=sys.stderr)
        return EXIT_USAGE
    try:
        gates = FeatureGates.resolve(
            {**KOORDLET_FEATURES, **registry.feature_specs()},
            _config_gates(args.config),
            parse_feature_gate_flag(args.feature_gates),
        )
    except (FeatureGateError, OSError, yaml.YAMLError) as err:
        print(f"koordlet: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.collect_res_used_interval <= 0:
        print("koordlet: --collect-res-used-interval must be > 0", file=sys.stderr)
        return EXIT_USAGE
    duration = args.duration
    if args.once:
        duration = args.collect_res_used_interval * ONCE_TICKS + 0.5
    options = AgentOptions(
        node_name=args.node_name,
        cgroup_root=args.cgroup_root,
        cgroup_driver=args.cgroup_driver,
        kubepods_dir=args.cgroup_kubepods_dir,
        proc_root=args.proc_root,
        kubeconfig=args.kubeconfig,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
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
    return asyncio.run(_run(options, gates, qos_manager))


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
