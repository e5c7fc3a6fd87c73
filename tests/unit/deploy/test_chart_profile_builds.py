"""Koordinator's chart profile (koord-scheduler-config, default values) as shipped, built into a
koord-scheduler: every plugin is registered, every arg is accepted, and each extension point runs the
chart's plugins in the chart's order."""

from __future__ import annotations

from typing import Any

from helm import chart_scheduler_config

from apis.config import parse_scheduler_config
from koord_scheduler.plugins.registry import in_tree_registry
from koord_scheduler.scheduler.assembly import build_scheduler
from koord_scheduler.scheduler.memory_source import MemoryCluster
from koord_scheduler.scheduler.scheduler import Scheduler

REGISTERED = set(in_tree_registry().names())


def build(config: dict[str, Any]) -> Scheduler:
    parsed = parse_scheduler_config(config, source="chart")
    return build_scheduler(parsed, in_tree_registry(), MemoryCluster.from_objects([], []), clock=lambda: 1.0)


def test_every_chart_plugin_is_registered() -> None:
    plugins = chart_scheduler_config()["profiles"][0]["plugins"]
    named = {e["name"] for entries in plugins.values() for e in entries.get("enabled", [])}
    assert named - REGISTERED == set()


def test_chart_profile_builds_unchanged() -> None:
    scheduler = build(chart_scheduler_config())
    fwk = scheduler.profiles["koord-scheduler"]
    # The chart drops every default PostFilter: job-level preemption in Coscheduling preempts.
    assert [p.name for p in fwk.post_filter_plugins] == ["Reservation", "Coscheduling", "ElasticQuota"]
    coscheduling = next(p for p in fwk.post_filter_plugins if p.name == "Coscheduling")
    assert coscheduling.args.enable_preemption is True  # type: ignore[attr-defined]
    assert [p.name for p in fwk.capabilities.permit] == ["Coscheduling"]
