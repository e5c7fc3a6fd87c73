"""The ``koord-scheduler`` command line.

``koord-scheduler simulate ...`` runs the embedded simulator; ``koord-scheduler deschedule ...`` plans one
descheduling round on a cluster file; ``koord-scheduler --config ...`` runs against a real API server.
Plugin authors build their own command with extra plugins::

    from koord_scheduler import with_plugin
    from koord_scheduler.app.cli import new_scheduler_command

    raise SystemExit(new_scheduler_command(with_plugin("MyPlugin", new_my_plugin)).run())
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from koord_scheduler.app.debug_server import DebugValueError, parse_debug_scores
from koord_scheduler.framework.errors import SchedulerError
from kubeapi.errors import KubeApiError

if TYPE_CHECKING:
    from apis.config import KubeSchedulerConfiguration
    from koord_scheduler.framework.registry import PluginSpec, Registry

# Each subcommand imports what it runs (the simulator, the plugins, the configuration models) when it
# runs, so `--help` and a refused flag answer at once.

log = logging.getLogger("koord-scheduler")

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


def _config_dir() -> Path:
    """``config/`` of a source checkout, else the copy a wheel installs under ``sys.prefix/share``."""
    repo = Path(__file__).resolve().parents[2] / "config"
    if (repo / "simulate").is_dir():
        return repo
    return Path(sys.prefix) / "share" / "pykoord" / "config"


CONFIG_DIR = _config_dir()
DEFAULT_CLUSTER = CONFIG_DIR / "simulate" / "example-cluster.yaml"
DEFAULT_SIMULATE_CONFIG = CONFIG_DIR / "simulate" / "scheduler-config.yaml"


class SchedulerCommand:
    """A koord-scheduler command line with a fixed set of extra (out-of-tree) plugins."""

    def __init__(self, extra_plugins: Sequence[PluginSpec] = ()) -> None:
        self.extra_plugins = tuple(extra_plugins)

    def registry(self) -> Registry:
        from koord_scheduler.app.plugin_loading import build_registry

        return build_registry(self.extra_plugins)

    def run(self, argv: Sequence[str] | None = None) -> int:
        args = list(sys.argv[1:] if argv is None else argv)
        try:
            if args and args[0] == "simulate":
                return self._simulate(args[1:])
            if args and args[0] == "deschedule":
                from koord_scheduler.app.deschedule import deschedule_main

                return deschedule_main(args[1:])
            if args and args[0] == "extender-server":
                from koord_scheduler.app.extender_server import extender_server_main

                return extender_server_main(args[1:], self.registry)
            return self._serve(args)
        except (SchedulerError, KubeApiError) as exc:
            print(f"koord-scheduler: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except Exception as exc:
            if not _is_config_error(exc):
                raise
            print(f"koord-scheduler: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:  # output piped into `head` and the like
            sys.stderr.close()
            return EXIT_OK

    # ----- simulate -----

    def _simulate(self, argv: list[str]) -> int:
        parser = argparse.ArgumentParser(
            prog="koord-scheduler simulate",
            description="Schedule a file of Kubernetes objects on an in-memory cluster and report placements.",
        )
        parser.add_argument(
            "--cluster",
            help="multi-document YAML of Nodes, Pods, Reservations, NodeMetrics, "
            "storage objects (PersistentVolumes, claims, StorageClasses, CSINodes...) "
            f"(default: the bundled example, {DEFAULT_CLUSTER.name})",
        )
        parser.add_argument(
            "--config", help="KubeSchedulerConfiguration file (default: kube-scheduler defaults plus pykoord's plugins)"
        )
        parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
        parser.add_argument(
            "--report",
            metavar="FILE.html",
            help="also write the run as one self-contained HTML "
            "page: per-node bars before and after, pending pods by reason, quotas, reservations, "
            "load",
        )
        parser.add_argument(
            "--now",
            help="RFC3339 time used for anything time-dependent (default: the newest "
            "NodeMetric updateTime in the cluster file, else the current time)",
        )
        parser.add_argument("-v", "--verbosity", type=int, default=0)
        parser.add_argument(
            "-s",
            "--debug-scores",
            type=_debug_scores,
            default=0,
            metavar="N",
            help="log the top N nodes with per-plugin scores for every pod",
        )
        parser.add_argument("-f", "--debug-filters", action="store_true", help="log every filter failure")
        from koord_scheduler.app.serve import add_feature_gates_flag

        add_feature_gates_flag(parser)
        ns = parser.parse_args(argv)
        _setup_logging(ns.verbosity)
        now = _parse_now(ns.now, parser)
        import asyncio

        from koord_scheduler.app.simulate import run_simulation, to_json, to_text

        registry = self.registry()
        config = _load_config(ns.config, DEFAULT_SIMULATE_CONFIG if ns.config is None else None)
        cluster_path = Path(ns.cluster) if ns.cluster else DEFAULT_CLUSTER
        from koord_scheduler.app.progress import SimulateProgress

        with SimulateProgress(sys.stderr) as progress:  # draws only on a terminal
            result, scheduler = asyncio.run(
                run_simulation(
                    cluster_path,
                    config,
                    registry,
                    now=now,
                    debug_scores=ns.debug_scores,
                    debug_filters=ns.debug_filters,
                    feature_gates=ns.feature_gates,
                    progress=progress,
                )
            )
        print(to_json(result) if ns.output == "json" else to_text(result))
        if ns.report:
            from koord_scheduler.app.report_html import render_report

            source = f"{cluster_path.name} with {Path(ns.config).name if ns.config else DEFAULT_SIMULATE_CONFIG.name}"
            try:
                Path(ns.report).write_text(
                    render_report(result, source=source, now=scheduler.clock()), encoding="utf-8"
                )
            except OSError as exc:
                print(f"koord-scheduler: --report {ns.report}: {exc.strerror or exc}", file=sys.stderr)
                return EXIT_USAGE
        if result.problems:
            for problem in result.problems:
                print(f"koord-scheduler: {problem}", file=sys.stderr)
            return EXIT_PROBLEMS
        return EXIT_OK

    # ----- cluster mode -----

    def _serve(self, argv: list[str]) -> int:
        from koord_scheduler.app.serve import serve_main

        return serve_main(argv, self.registry)


def _debug_scores(text: str) -> int:
    try:
        return parse_debug_scores(text)
    except DebugValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _is_config_error(exc: Exception) -> bool:
    """``apis.config.ConfigError``, checked without importing the configuration models up front."""
    errors = sys.modules.get("apis.config.errors")
    return errors is not None and isinstance(exc, errors.ConfigError)


def _load_config(path: str | None, fallback: Path | None) -> KubeSchedulerConfiguration:
    from apis.config import KubeSchedulerConfiguration, load_scheduler_config

    if path:
        return load_scheduler_config(path)
    if fallback is not None and fallback.exists():
        return load_scheduler_config(fallback)
    return KubeSchedulerConfiguration()


def _parse_now(text: str | None, parser: argparse.ArgumentParser) -> float | None:
    """``--now``; None when not given (the simulator takes the cluster file's own time)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        parser.error(f"--now: {text!r} is not an RFC3339 time such as 2026-01-02T15:04:05Z")
        raise  # unreachable: parser.error exits


def _setup_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity < 4 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def new_scheduler_command(*extra_plugins: PluginSpec) -> SchedulerCommand:
    """kube-scheduler's ``app.NewSchedulerCommand(app.WithPlugin(...))``, in Python."""
    return SchedulerCommand(extra_plugins)


def main() -> None:
    raise SystemExit(new_scheduler_command().run())
