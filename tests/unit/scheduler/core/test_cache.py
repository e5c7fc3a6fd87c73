from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from apis.core.frozendict import FrozenDict
from koord_scheduler.framework.snapshot import CPU_COL
from koord_scheduler.scheduler.cache import SchedulerCache
from tests.builders import make_node, make_pod


@pytest.fixture
def cache() -> SchedulerCache:
    c = SchedulerCache()
    c.add_node(make_node("n1").capacity(cpu="4").build())
    return c


def test_assume_then_confirm_by_informer_counts_once(cache: SchedulerCache) -> None:
    pod = make_pod("a").req(cpu="1").build()
    assumed = replace(pod, node_name="n1")
    cache.assume_pod(assumed)
    assert cache.is_assumed("default/a")
    cache.add_pod(assumed)  # the watch shows the bound pod
    assert not cache.is_assumed("default/a")
    pos = cache.snapshot.positions["n1"]
    assert cache.snapshot.requested[pos, CPU_COL] == 1000
    assert cache.snapshot.pod_count[pos] == 1


@pytest.mark.parametrize(
    ("change", "touched"),
    [
        pytest.param({}, False, id="same-object"),
        pytest.param({"resource_version": "42"}, False, id="resource-version-only"),
        pytest.param({"conditions": {"PodScheduled": "True"}}, False, id="podscheduled-condition-only"),
        pytest.param({"phase": "Running"}, False, id="phase-running-only"),
        pytest.param({"labels": {"app": "other"}}, True, id="labels-changed"),
        pytest.param({"cpu": "2"}, True, id="requests-changed"),
    ],
)
def test_bind_echo_of_an_assumed_pod_touches_the_node_only_when_an_input_changed(
    cache: SchedulerCache, change: dict[str, Any], touched: bool
) -> None:
    """The echo differs from the assumed pod only in resourceVersion and conditions: the object is
    swapped in place and the node's row keeps its version (per-node caches stay valid)."""
    assumed = replace(make_pod("a").req(cpu="1").label("app", "web").build(), node_name="n1")
    cache.assume_pod(assumed)
    echo = assumed
    if "resource_version" in change:
        echo = replace(echo, meta=replace(echo.meta, resource_version=str(change["resource_version"])))
    if "conditions" in change:
        echo = replace(
            echo, conditions=FrozenDict(change["conditions"]), condition_times=FrozenDict({"PodScheduled": 1.0})
        )
    if "phase" in change:
        echo = replace(echo, phase=str(change["phase"]))
    if "labels" in change:
        echo = replace(echo, meta=replace(echo.meta, labels=FrozenDict(change["labels"])))
    if "cpu" in change:
        echo = replace(make_pod("a").req(cpu=str(change["cpu"])).label("app", "web").build(), node_name="n1")
    snap = cache.snapshot
    version = snap.version
    cache.add_pod(echo)
    pos = snap.positions["n1"]
    assert not cache.is_assumed("default/a")
    assert cache.get_pod("default/a") is echo
    assert snap.infos[pos].pods["default/a"] is echo  # type: ignore[union-attr]
    assert (snap.version != version) is touched
    assert snap.pod_count[pos] == 1
    assert snap.requested[pos, CPU_COL] == (2000 if "cpu" in change else 1000)


def test_a_terminal_bind_echo_of_an_assumed_pod_removes_it(cache: SchedulerCache) -> None:
    assumed = replace(make_pod("a").req(cpu="1").build(), node_name="n1")
    cache.assume_pod(assumed)
    cache.add_pod(replace(assumed, phase="Succeeded"))
    pos = cache.snapshot.positions["n1"]
    assert cache.get_pod("default/a") is None
    assert cache.snapshot.pod_count[pos] == 0
    assert cache.snapshot.requested[pos, CPU_COL] == 0


def test_an_update_of_a_bound_pod_that_was_not_assumed_is_reaccounted(cache: SchedulerCache) -> None:
    bound = make_pod("b").req(cpu="1").node("n1").build()
    cache.add_pod(bound)
    version = cache.snapshot.version
    cache.add_pod(replace(bound, meta=replace(bound.meta, resource_version="7")))
    assert cache.snapshot.version != version


def test_assume_twice_is_an_error(cache: SchedulerCache) -> None:
    assumed = replace(make_pod("a").build(), node_name="n1")
    cache.assume_pod(assumed)
    with pytest.raises(ValueError, match="already in the cache"):
        cache.assume_pod(assumed)


def test_forget_releases_and_runs_every_handler_even_if_not_assumed(cache: SchedulerCache) -> None:
    seen: list[str] = []
    cache.register_forget_pod_handler(lambda p: seen.append(f"h1:{p.key}"))
    cache.register_forget_pod_handler(lambda p: seen.append(f"h2:{p.key}"))
    assumed = replace(make_pod("a").req(cpu="1").build(), node_name="n1")
    cache.assume_pod(assumed)
    cache.forget_pod(assumed)
    cache.forget_pod(assumed)  # already gone: handlers still run
    assert seen == ["h1:default/a", "h2:default/a", "h1:default/a", "h2:default/a"]
    assert cache.snapshot.requested[cache.snapshot.positions["n1"], CPU_COL] == 0


def test_a_failing_forget_handler_does_not_stop_the_others(cache: SchedulerCache) -> None:
    seen: list[str] = []

    def boom(_: object) -> None:
        raise RuntimeError("boom")

    cache.register_forget_pod_handler(boom)
    cache.register_forget_pod_handler(lambda p: seen.append(p.key))
    cache.forget_pod(replace(make_pod("a").build(), node_name="n1"))
    assert seen == ["default/a"]


@pytest.mark.parametrize(
    ("ttl", "elapsed", "want_expired"),
    [
        pytest.param(0.0, 10_000.0, False, id="ttl-0-never-expires-upstream-default"),
        pytest.param(30.0, 29.0, False, id="before-deadline"),
        pytest.param(30.0, 30.0, True, id="at-deadline"),
    ],
)
def test_assumed_pod_expiry(ttl: float, elapsed: float, want_expired: bool) -> None:
    cache = SchedulerCache(assumed_ttl=ttl)
    cache.add_node(make_node("n1").capacity(cpu="4").build())
    assumed = replace(make_pod("a").build(), node_name="n1")
    cache.assume_pod(assumed)
    cache.finish_binding(assumed, now=100.0)
    expired = cache.cleanup_expired(now=100.0 + elapsed)
    assert (expired == [assumed]) == want_expired
    assert cache.is_assumed("default/a") != want_expired


def test_terminal_pods_are_not_accounted(cache: SchedulerCache) -> None:
    cache.add_pod(make_pod("done").req(cpu="1").node("n1").phase("Succeeded").build())
    assert cache.snapshot.requested[cache.snapshot.positions["n1"], CPU_COL] == 0
