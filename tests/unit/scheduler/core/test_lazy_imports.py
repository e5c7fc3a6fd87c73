"""What each way of starting koord-scheduler imports: only what it runs.

Each case runs in a fresh interpreter (``sys.modules`` of the test process already holds everything)
and prints the modules loaded at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import koord_scheduler

HEAVY_FOR_HELP = (
    "numpy",
    "aiohttp",
    "pydantic",
    "prometheus_client",
    "yaml",
    "apis.config",
    "koord_scheduler.framework.snapshot",
    "koord_scheduler.plugins.registry",
)
"""``--help`` needs argparse and the flag definitions, none of these."""

NEVER_IN_CLUSTER_MODE = (
    "kubernetes",
    "cryptography",
    "koord_scheduler.webhook.options",
    "koord_scheduler.webhook.server",
    "koord_scheduler.app.simulate",
    "koord_scheduler.app.cluster_file",
    "koord_scheduler.scheduler.memory_source",
    "h2",
)
"""Loaded only when their feature runs: the admission webhook (TLS, certificates), the simulator, HTTP/2
(``HttpOptions.http2``, off by default). The kubernetes client never: the Reservation controller runs on
the scheduler's own informers and client."""

NOT_IN_THE_DEFAULT_PROFILE = (
    "koord_scheduler.plugins.loadaware",
    "koord_scheduler.plugins.nodenumaresource",
    "koord_scheduler.plugins.reservation",
    "koord_scheduler.plugins.coscheduling",
    "koord_scheduler.plugins.elasticquota",
    "koord_scheduler.plugins.deviceshare",
    "koord_scheduler.plugins.schedulinghint",
    "koord_scheduler.plugins.defaultprebind",
)
"""Koordinator's plugins: the in-tree registry imports a plugin's package when a profile enables it, and
the default profile (kube-scheduler's) enables none of these."""

OFF_BY_DEFAULT = (
    "koord_scheduler.app.descheduling",
    "koord_scheduler.descheduler",
    "apis.config.descheduler",
    "celpy",
    "lark",
    "urllib3",
)
"""The descheduling controllers (off unless ``--controllers`` names them), cel-python (imported when the
first DRA selector is compiled) and urllib3 (when the configuration names an HTTP extender)."""


def loaded_after(code: str) -> set[str]:
    script = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    modules: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return set(modules)


def loaded_packages(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


def test_help_loads_no_scheduler_machinery() -> None:
    modules = loaded_after("""
        import contextlib, io
        from koord_scheduler.app.cli import new_scheduler_command
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            new_scheduler_command().run(["--help"])
    """)
    assert loaded_packages(modules, HEAVY_FOR_HELP + NEVER_IN_CLUSTER_MODE) == []


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="defaults"),
        pytest.param(["--controllers=-reservation"], id="no-reservation-controller"),
        pytest.param(["--scheduling=false"], id="controllers-only"),
    ],
)
def test_cluster_mode_loads_no_optional_feature(argv: list[str]) -> None:
    """Everything cluster mode imports before it runs: parsing, options, the run module, building the
    scheduler and the cluster source."""
    modules = loaded_after(f"""
        from koord_scheduler.app.serve import _options, _parser
        from koord_scheduler.app import serve_run
        from koord_scheduler.app.plugin_loading import build_registry
        from koord_scheduler.scheduler.assembly import build_scheduler
        from koord_scheduler.scheduler.kube_source import KubeClusterSource
        from kubeapi import Connection
        options = _options(_parser().parse_args({argv!r}))
        source = KubeClusterSource(Connection("http://127.0.0.1:1", None, lambda: None, "test"))
        build_scheduler(options.config, build_registry(()), source)
    """)
    assert loaded_packages(modules, NEVER_IN_CLUSTER_MODE + NOT_IN_THE_DEFAULT_PROFILE + OFF_BY_DEFAULT) == []


def test_a_profile_that_enables_a_plugin_loads_it() -> None:
    """The deferred registry imports what a profile names, gives it its args, and only that."""
    modules = loaded_after("""
        import sys
        from apis.config import parse_scheduler_config
        from koord_scheduler.app.plugin_loading import build_registry
        from koord_scheduler.scheduler.assembly import build_scheduler
        from koord_scheduler.scheduler.kube_source import KubeClusterSource
        from kubeapi import Connection
        config = parse_scheduler_config({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{
                "schedulerName": "koord-scheduler",
                "plugins": {"multiPoint": {"enabled": [{"name": "LoadAwareScheduling"}]}},
                "pluginConfig": [{"name": "LoadAwareScheduling", "args": {"nodeMetricExpirationSeconds": 7}}],
            }],
        })
        registry = build_registry(())
        assert "LoadAwareScheduling" in registry and "koord_scheduler.plugins.loadaware" not in sys.modules
        source = KubeClusterSource(Connection("http://127.0.0.1:1", None, lambda: None, "test"))
        scheduler = build_scheduler(config, registry, source)
        plugin = scheduler.profiles["koord-scheduler"].plugins["LoadAwareScheduling"]
        assert plugin.args.node_metric_expiration_seconds == 7, plugin.args
    """)
    assert "koord_scheduler.plugins.loadaware" in modules
    assert loaded_packages(modules, ("koord_scheduler.plugins.nodenumaresource", "celpy")) == []


def test_the_reservation_controller_does_not_load_the_kubernetes_client() -> None:
    """Built as cluster mode builds it."""
    modules = loaded_after("""
        from koord_scheduler.app.controllers import ControllerClient, build_reservation
        from koord_scheduler.app.serve import _options, _parser
        from koord_scheduler.scheduler.kube_source import KubeClusterSource
        from kubeapi import Connection
        options = _options(_parser().parse_args(["--controllers=reservation"]))
        source = KubeClusterSource(Connection("http://127.0.0.1:1", None, lambda: None, "test"))
        built = build_reservation(options.controllers, source, options.config, client=ControllerClient(50, 100))
        assert built is not None and source.watches("Reservation")
    """)
    assert "koord_scheduler.controllers.reservation.informed" in modules
    assert loaded_packages(modules, ("kubernetes",)) == []


def test_every_public_name_resolves() -> None:
    """``koord_scheduler`` imports its names on first use; each one listed must be there."""
    missing = [name for name in koord_scheduler.__all__ if getattr(koord_scheduler, name, None) is None]
    assert missing == []
    with pytest.raises(AttributeError, match="no attribute 'NotAName'"):
        _ = koord_scheduler.NotAName  # type: ignore[attr-defined]
