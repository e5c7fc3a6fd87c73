"""Coscheduling extension points one by one, with a recording handle: Permit waits and allows together,
Unreserve and failures roll the gang back (Strict) or not (NonStrict), NextPod feeds the round, and the
last member's arrival activates the gang."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from apis.config import CoschedulingArgs
from apis.core.types import Pod
from apis.feature_gates import DEFAULT_FEATURE_GATES, SchedulerFeatureGates
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.framework.types import EventType, QueuedPodInfo
from koord_scheduler.plugins.coscheduling.plugin import Coscheduling
from tests.builders import make_pod

ANN = "gang.scheduling.koordinator.sh/"


@dataclass
class FakeWaiting:
    allowed: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def allow(self, plugin: str) -> None:
        self.allowed.append(plugin)

    def reject(self, plugin: str, message: str) -> None:
        if not self.rejected:  # as a real WaitingPod: the first answer wins
            self.rejected.append(message)


@dataclass
class Handle:
    waiting: dict[str, FakeWaiting] = field(default_factory=dict)
    activated: list[list[str]] = field(default_factory=list)
    hooks: list[Callable[[], str | None]] = field(default_factory=list)
    pod_handlers: list[Any] = field(default_factory=list)
    snapshot: Any = None
    cluster: Any = None
    clock: Any = None
    feature_gates: SchedulerFeatureGates = DEFAULT_FEATURE_GATES

    def watch(self, kind: Any, handler: Any) -> None: ...

    def watch_pods(self, handler: Any) -> None:
        self.pod_handlers.append(handler)

    def register_error_handler_filters(self, pre: Any, post: Any) -> None: ...

    def add_simulation_report(self, reporter: Any) -> None: ...

    def activate_pods(self, keys: Iterable[str]) -> None:
        self.activated.append(sorted(keys))

    def add_next_pod_hook(self, hook: Callable[[], str | None]) -> None:
        self.hooks.append(hook)

    def is_assumed(self, key: str) -> bool:
        return False

    def waiting_pod(self, key: str) -> FakeWaiting | None:
        return self.waiting.get(key)


def member(name: str, *, min_available: int = 3, mode: str = "Strict") -> Pod:
    return (
        make_pod(name)
        .annotation(ANN + "name", "g")
        .annotation(ANN + "min-available", str(min_available))
        .annotation(ANN + "mode", mode)
        .build()
    )


def gang(mode: str = "Strict", names: tuple[str, ...] = ("a", "b", "c")) -> tuple[Coscheduling, Handle, list[Pod]]:
    handle = Handle()
    plugin = Coscheduling(CoschedulingArgs(), handle)  # type: ignore[arg-type]
    plugin.start()
    pods = [member(n, mode=mode) for n in names]
    for pod in pods:
        plugin.on_pod(EventType.ADDED, None, pod)
    return plugin, handle, pods


def wait_at_permit(plugin: Coscheduling, handle: Handle, pod: Pod) -> Status:
    status, timeout = plugin.permit(CycleState(), pod, "n1")
    if status.code == Code.WAIT:
        assert timeout == 600.0
        handle.waiting[pod.key] = FakeWaiting()
    return status


def test_last_member_activates_the_gang_and_pre_enqueue_lets_it_in() -> None:
    handle = Handle()
    plugin = Coscheduling(CoschedulingArgs(), handle)  # type: ignore[arg-type]
    a, b = member("a", min_available=2), member("b", min_available=2)
    plugin.on_pod(EventType.ADDED, None, a)
    assert plugin.pre_enqueue(a).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert handle.activated == []
    plugin.on_pod(EventType.ADDED, None, b)
    assert handle.activated == [["default/a", "default/b"]]
    assert plugin.pre_enqueue(a).is_success


def test_permit_waits_then_allows_every_waiting_member_together() -> None:
    plugin, handle, (a, b, c) = gang()
    assert wait_at_permit(plugin, handle, a).code == Code.WAIT
    assert wait_at_permit(plugin, handle, b).code == Code.WAIT
    assert wait_at_permit(plugin, handle, c).is_success
    assert handle.waiting["default/a"].allowed == ["Coscheduling"]
    assert handle.waiting["default/b"].allowed == ["Coscheduling"]
    assert plugin.cache.group("default/g").binding_members == ("default/a", "default/b", "default/c")


@pytest.mark.parametrize(
    ("mode", "want_rejected"),
    [
        pytest.param("Strict", ['Gang "default/g" gets rejected due to Pod "a" in Unreserve'], id="strict-rolls-back"),
        pytest.param("NonStrict", [], id="non-strict-keeps-waiting"),
    ],
)
def test_unreserve(mode: str, want_rejected: list[str]) -> None:
    plugin, handle, (a, b, _) = gang(mode)
    wait_at_permit(plugin, handle, a)
    wait_at_permit(plugin, handle, b)
    plugin.unreserve(CycleState(), a, "n1")
    assert handle.waiting["default/b"].rejected == want_rejected
    assert plugin.cache.gangs["default/g"].waiting == {"default/b"}


@pytest.mark.parametrize(
    ("mode", "want_at_failure", "want_at_round_end"),
    [
        pytest.param("Strict", 1, 1, id="strict-rejects-at-once"),
        pytest.param("NonStrict", 0, 1, id="non-strict-rejects-when-the-round-ends"),
    ],
)
def test_a_failed_member_rolls_back_the_round(mode: str, want_at_failure: int, want_at_round_end: int) -> None:
    plugin, handle, (a, b, c) = gang(mode)
    assert plugin.pre_filter(CycleState(), a, None)[1].is_success  # type: ignore[arg-type]
    wait_at_permit(plugin, handle, a)
    assert handle.hooks[0]() == "default/b", "NextPod feeds the round's next member"
    plugin.on_scheduling_failure(QueuedPodInfo(b, 0.0), Status(Code.UNSCHEDULABLE, ("0/1 nodes are available",)))
    assert len(handle.waiting["default/a"].rejected) == want_at_failure
    _, quick = plugin.pre_filter(CycleState(), c, None)  # type: ignore[arg-type]
    assert quick.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert quick.message.startswith('GangGroup "default/g" gets rejected due to member Pod "default/b"')
    assert handle.hooks[0]() is None, "every member attempted: the round ends"
    assert len(handle.waiting["default/a"].rejected) == want_at_round_end
    assert plugin.round is None


def test_once_satisfied_members_pass_like_plain_pods() -> None:
    plugin, _, (a, b, c) = gang()
    plugin.post_bind(CycleState(), a, "n1")
    assert plugin.pre_filter(CycleState(), b, None)[1].is_success  # type: ignore[arg-type]
    assert plugin.round is None, "no round for a satisfied group"
    assert plugin.permit(CycleState(), c, "n1")[0].is_success


def test_deleting_every_member_forgets_the_gang_and_its_group() -> None:
    plugin, _, pods = gang()
    plugin.post_bind(CycleState(), pods[0], "n1")
    for pod in pods:
        plugin.on_pod(EventType.DELETED, pod, None)
    assert (plugin.cache.gangs, plugin.cache.groups, plugin._ready_groups) == ({}, {}, set())
