import argparse
import asyncio
import collections.abc
import dataclasses
import enum
import importlib
import subprocess
import sys
import typing
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

import koordlet
from koordlet.app.cli import main
from koordlet.app.http import MetricsServer
from koordlet.statesinformer import RegisterType, StatesInformer
from koordlet.system import CgroupDriver, CgroupLayout

# The public surface, in ``__all__`` order, with what each name must be and the module that defines it.
PUBLIC_SURFACE: dict[str, tuple[str, str]] = {
    "ENTRY_POINT_GROUP": ("constant", "koordlet.qosmanager"),
    "CgroupFS": ("class", "koordlet.system.cgroupfs"),
    "Clock": ("callable-alias", "koordlet.system.clock"),
    "ExtensionPlugin": ("protocol", "koordlet.qosmanager.framework"),
    "FakeClock": ("class", "koordlet.system.clock"),
    "FeatureGates": ("dataclass", "koordlet.qosmanager.featuregates"),
    "FeatureSpec": ("dataclass", "koordlet.qosmanager.featuregates"),
    "Maturity": ("enum", "koordlet.qosmanager.featuregates"),
    "MetricCache": ("class", "koordlet.metriccache.cache"),
    "MetricKind": ("enum", "koordlet.metriccache.cache"),
    "PluginContext": ("dataclass", "koordlet.qosmanager.framework"),
    "PluginEntry": ("dataclass", "koordlet.qosmanager.framework"),
    "PodMeta": ("dataclass", "koordlet.statesinformer.pods"),
    "ProcFS": ("class", "koordlet.system.procfs"),
    "QOSPluginRegistry": ("class", "koordlet.qosmanager.registry"),
    "RegisterType": ("enum", "koordlet.statesinformer.informer"),
    "ResourceExecutor": ("class", "koordlet.qosmanager.executor"),
    "ResourceUpdate": ("dataclass", "koordlet.qosmanager.executor"),
    "StatesInformer": ("class", "koordlet.statesinformer.informer"),
    "WindowStats": ("dataclass", "koordlet.metriccache.series"),
    "WriteResult": ("dataclass", "koordlet.system.cgroupfs"),
    "WriteStatus": ("enum", "koordlet.system.cgroupfs"),
}


def _kind(obj: object) -> str:
    if isinstance(obj, str):
        return "constant"
    if typing.get_origin(obj) is collections.abc.Callable:
        return "callable-alias"
    if not isinstance(obj, type):
        return f"unexpected {type(obj).__name__}"
    if issubclass(obj, enum.Enum):
        return "enum"
    if getattr(obj, "_is_protocol", False):
        return "protocol"
    if dataclasses.is_dataclass(obj):
        return "dataclass"
    return "class"


def test_public_surface_is_pinned_and_sorted() -> None:
    assert koordlet.__all__ == sorted(koordlet.__all__, key=lambda n: (not n.isupper(), n))
    assert koordlet.__all__ == list(PUBLIC_SURFACE)


@pytest.mark.parametrize(("name", "want"), [pytest.param(n, w, id=n) for n, w in PUBLIC_SURFACE.items()])
def test_public_name_is_the_right_kind_of_object(name: str, want: tuple[str, str]) -> None:
    want_kind, home = want
    obj = getattr(koordlet, name)

    assert _kind(obj) == want_kind
    # The package re-exports the defining module's object, not a copy or a same-named stand-in.
    assert getattr(importlib.import_module(home), name) is obj
    if isinstance(obj, type):
        assert (obj.__module__, obj.__name__) == (home, name)


def test_public_constants_and_aliases_have_their_documented_values() -> None:
    assert koordlet.ENTRY_POINT_GROUP == "koordlet.qos_plugins"
    assert typing.get_args(koordlet.Clock) == ([], float)


def test_importing_registers_nothing() -> None:
    code = "import koordlet, koordlet.qosmanager as q; r = q.QOSPluginRegistry(); print(len(r))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


@pytest.mark.parametrize(
    ("argv", "want_message"),
    [
        pytest.param([], "no node name", id="no-node-name"),
        pytest.param(
            ["--node-name", "n", "--feature-gates", "Nope=true"],
            "unrecognized feature gate: Nope",
            id="unknown-gate",
        ),
        pytest.param(
            ["--node-name", "n", "--feature-gates", "CPUBurst=maybe"],
            "invalid value of CPUBurst",
            id="bad-gate-value",
        ),
    ],
)
def test_cli_refuses_to_start(
    argv: list[str], want_message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert want_message in err and "Traceback" not in err


def test_cli_config_file_gates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "koordlet.yaml"
    config.write_text("featureGates:\n  NoSuch: true\n")
    assert main(["--node-name", "n", "--config", str(config)]) == 2
    assert "unrecognized feature gate: NoSuch" in capsys.readouterr().err


PRESETS = sorted((Path(__file__).resolve().parents[3] / "config" / "koordlet").glob("feature-gates-*.yaml"))


def test_presets_include_the_documented_ones() -> None:
    assert {p.name for p in PRESETS} >= {
        "feature-gates-all.yaml",
        "feature-gates-default.yaml",
        "feature-gates-helm-v1.8.yaml",
        "feature-gates-observe-only.yaml",
        "feature-gates-qos-all.yaml",
    }


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in PRESETS])
def test_preset_resolves_to_what_it_says(path: Path) -> None:
    """Each gate a preset names resolves to its value; AllAlpha / AllBeta reach every gate of that maturity."""
    from koordlet.qosmanager import KOORDLET_FEATURES, FeatureGates, Maturity, builtin_registry

    specs = {**KOORDLET_FEATURES, **builtin_registry().feature_specs()}
    preset: dict[str, bool] = yaml.safe_load(path.read_text())["featureGates"]

    gates = FeatureGates.resolve(specs, preset)

    want = {name: spec.default for name, spec in specs.items()}
    for key, maturity in (("AllAlpha", Maturity.ALPHA), ("AllBeta", Maturity.BETA)):
        if key in preset:
            want.update({name: preset[key] for name, spec in specs.items() if spec.maturity is maturity})
    want.update({name: value for name, value in preset.items() if name not in ("AllAlpha", "AllBeta")})
    assert {name: gates.enabled(name) for name in specs} == want


async def test_http_metrics_and_healthz() -> None:
    registry = CollectorRegistry()
    healthy = {"ok": False}
    server = MetricsServer(registry, lambda: healthy["ok"], host="127.0.0.1", port=0)
    port = await server.start()
    stop = asyncio.Event()
    task = asyncio.create_task(server.serve(stop))

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    assert await asyncio.to_thread(get, "/healthz") == (503, "starting")
    healthy["ok"] = True
    assert await asyncio.to_thread(get, "/healthz") == (200, "ok")
    status, _ = await asyncio.to_thread(get, "/metrics")
    assert status == 200
    assert (await asyncio.to_thread(get, "/nope"))[0] == 404
    stop.set()
    await task


def test_informer_callbacks() -> None:
    informer = StatesInformer("node-1", CgroupLayout.for_driver(CgroupDriver.SYSTEMD))
    seen: list[str] = []
    informer.register_callback(RegisterType.ALL_PODS, "a", lambda t, inf: seen.append(f"a:{len(inf.get_all_pods())}"))

    def boom(_: RegisterType, __: StatesInformer) -> None:
        raise ZeroDivisionError("callback failed")

    informer.register_callback(RegisterType.ALL_PODS, "boom", boom)
    informer.register_callback(RegisterType.ALL_PODS, "b", lambda t, inf: seen.append("b"))
    informer.register_callback(RegisterType.NODE_SLO_SPEC, "slo", lambda t, inf: seen.append("slo"))
    with pytest.raises(ValueError, match="already registered"):
        informer.register_callback(RegisterType.ALL_PODS, "a", lambda t, inf: None)
    informer.replace_pods([{"metadata": {"uid": "u1", "name": "p"}, "status": {"qosClass": "BestEffort"}}])
    assert seen == ["a:1", "b"] and informer.callback_errors == 1
    assert informer.get_pod("u1").cgroup_dir == (  # type: ignore[union-attr]
        "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu1.slice"
    )
    informer.set_node_slo({"spec": {"resourceUsedThresholdWithBE": {"enable": True}}})
    informer.set_node_slo({"spec": {"resourceUsedThresholdWithBE": {"enable": True}}})  # unchanged: no callback
    assert seen.count("slo") == 1
    threshold = informer.node_slo.resource_used_threshold_with_be
    assert threshold is not None and (threshold.enable, threshold.cpu_suppress_threshold_percent) == (
        True,
        65,
    )
    informer.delete_pod("u1")
    assert informer.get_all_pods() == ()


def test_argparse_plugin_flag_registered() -> None:
    from koordlet.qosmanager import QOSManager, builtin_registry

    manager = QOSManager(builtin_registry())
    manager.instantiate()
    parser = argparse.ArgumentParser()
    manager.init_flags(parser)
    assert parser.parse_args(["--be-cpu-throttle-report-interval", "5"]).be_cpu_throttle_report_interval == 5
