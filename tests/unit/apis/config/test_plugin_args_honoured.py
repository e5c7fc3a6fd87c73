"""Every field of every in-tree plugin's args model is either read by the plugin (its package, or the
controller that acts on it) or refused at load with an error naming the field. Found by reflection: the
model's fields against ``args.<field>`` in the consumers' source, and a non-default value of every
other field through ``field_errors``."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from apis.config.plugin_args import IN_TREE_ARGS
from apis.config.types import ConfigModel
from koord_scheduler.plugins.registry import in_tree_registry

REPO = Path(__file__).resolve().parents[4]
EXTRA_CONSUMERS: dict[str, tuple[str, ...]] = {
    # Koordinator's reservation controller reads the Reservation plugin's args too.
    "Reservation": ("koord_scheduler/controllers/reservation",),
    # Koordinator's ElasticQuota plugin creates the built-in quotas; here the elasticquota controller does.
    "ElasticQuota": ("koord_scheduler/controllers/quota_status.py",),
    # The podgroup controller's worker count comes from Coscheduling's args.
    "Coscheduling": ("koord_scheduler/app/controllers.py",),
}


def consumer_source(plugin: str) -> str:
    spec = in_tree_registry().get(plugin)
    module = inspect.getmodule(spec.factory)
    assert module is not None and module.__file__ is not None
    dirs = [Path(module.__file__).parent, *(REPO / d for d in EXTRA_CONSUMERS.get(plugin, ()))]
    files = [p for d in dirs for p in (sorted(d.rglob("*.py")) if d.is_dir() else [d])]
    return "\n".join(p.read_text() for p in files)


def consumed_through_method(model: type[BaseModel], attr: str, source: str) -> bool:
    """The consumer calls a method of the args model that reads the field (``args.builtin_max(...)``)."""
    for name, member in vars(model).items():
        if name.startswith("_") or not callable(member) or name == "field_errors":
            continue
        try:
            body = inspect.getsource(member)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{attr}\b", body) and re.search(rf"\.{name}\(", source):
            return True
    return False


def consumed(plugin: str, model: type[BaseModel], attr: str) -> bool:
    source = consumer_source(plugin)
    return bool(re.search(rf"\bargs\.{attr}\b", source)) or consumed_through_method(model, attr, source)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def other_value(model: type[BaseModel], attr: str) -> Any:
    """A valid value different from the field's default."""
    default = model.model_fields[attr].get_default(call_default_factory=True)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return default + 1.0
    if isinstance(default, dict):
        return {"cpu": "1", "memory": "1Gi"}
    if default is None:
        kinds = [k for k in typing.get_args(model.model_fields[attr].annotation) if k is not type(None)]
        if kinds and isinstance(kinds[0], type) and issubclass(kinds[0], BaseModel):
            return kinds[0]()
        if kinds and float in (kinds[0], *typing.get_args(kinds[0])):
            return 60.0  # an optional duration
    if isinstance(default, str):
        return "example"
    if isinstance(default, tuple):
        return ("example.com",) if "group" in attr else ("example.com/thing",)
    if isinstance(default, ConfigModel):
        flags = [f for f, v in type(default).model_fields.items() if isinstance(v.get_default(), bool)]
        assert flags, f"no way to vary {model.__name__}.{attr}"
        return default.model_copy(update={flags[0]: not getattr(default, flags[0])})
    pytest.fail(f"no way to vary {model.__name__}.{attr} (default {default!r})")


KNOWN_GAPS: dict[tuple[str, str], str] = {}
CASES = [
    pytest.param(
        plugin,
        model,
        attr,
        id=f"{plugin}.{camel(attr)}",
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[(plugin, attr)])]
        if (plugin, attr) in KNOWN_GAPS
        else [],
    )
    for plugin, model in sorted(IN_TREE_ARGS.items())
    for attr in model.model_fields
]


def unconsumed() -> list[str]:
    out = []
    for plugin, model in sorted(IN_TREE_ARGS.items()):
        out += [f"{plugin}.{camel(a)}" for a in model.model_fields if not consumed(plugin, model, a)]
    return out


def test_the_fields_without_a_consumer_are_the_refused_ones() -> None:
    assert unconsumed() == [
        "Coscheduling.skipCheckScheduleCycle",
        "DeviceShare.allocator",
        "DynamicResources.bindingTimeout",
        "ElasticQuota.quotaSnapshotUpdateInterval",
        "ElasticQuota.hookPlugins",
        "LoadAwareScheduling.estimator",
        "Reservation.resyncIntervalSeconds",
    ]


@pytest.mark.parametrize(("plugin", "model", "attr"), CASES)
def test_every_args_field_is_consumed_or_refused(plugin: str, model: type[BaseModel], attr: str) -> None:
    if consumed(plugin, model, attr):
        return
    args = model().model_copy(update={attr: other_value(model, attr)})
    errors = args.field_errors("args")  # type: ignore[attr-defined]
    paths = [e.path for e in errors]
    assert f"args.{camel(attr)}" in paths, f"{plugin} neither reads nor refuses {camel(attr)}: {errors}"
    assert all(e.detail for e in errors if e.path == f"args.{camel(attr)}")


def _config(args: str) -> str:
    return f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {{enabled: [{{name: Reservation}}]}}
  pluginConfig:
  - name: Reservation
    args: {{{args}}}
"""


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(
            "resyncIntervalSeconds: 30",
            "args.resyncIntervalSeconds: Forbidden: pykoord does not provide "
            "a periodic resync of the reservation controller",
            id="resyncIntervalSeconds",
        ),
    ],
)
def test_refused_reservation_args_fail_the_load_naming_the_field(args: str, want: str) -> None:
    from apis.config import ConfigError, parse_scheduler_config
    from koord_scheduler.scheduler.assembly import build_scheduler
    from koord_scheduler.scheduler.memory_source import MemoryCluster

    with pytest.raises(ConfigError) as caught:
        config = parse_scheduler_config(_config(args), source="test")
        build_scheduler(config, in_tree_registry(), MemoryCluster.from_objects([], []), clock=lambda: 1.0)
    assert want in str(caught.value)


def test_reservation_controller_reads_the_gc_args() -> None:
    from apis.config import parse_scheduler_config
    from koord_scheduler.controllers.reservation.decide import ControllerOptions, controller_options

    config = parse_scheduler_config(
        _config("gcDurationSeconds: 120, gcIntervalSeconds: 5, disableGarbageCollection: true, controllerWorkers: 4"),
        source="test",
    )
    options = controller_options(config)
    assert (
        options.gc_duration_seconds,
        options.gc_interval_seconds,
        options.disable_garbage_collection,
        options.workers,
    ) == (120.0, 5.0, True, 4)
    assert controller_options(parse_scheduler_config(_config(""), source="test")) == ControllerOptions()


@pytest.mark.parametrize(("name", "ok"), [("", True), ("defaultEstimator", True), ("fancy", False)])
def test_loadaware_estimator_is_the_default_one(name: str, ok: bool) -> None:
    from apis.config.loadaware_args import LoadAwareSchedulingArgs

    errors = LoadAwareSchedulingArgs(estimator=name).field_errors("args")
    assert (not any(e.path == "args.estimator" for e in errors)) == ok
