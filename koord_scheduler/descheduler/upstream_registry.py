"""The upstream plugins pykoord runs, each registered by one typed line, as the scheduler's plugins are
(:class:`~koord_scheduler.framework.registry.PluginSpec`): ``DeschedulePluginSpec(NAME, new, ARGS)``
type-checks only when ``new`` takes an ``ARGS`` and returns a
:class:`~.deschedule_plugins.DeschedulePlugin`. The configuration loader knows the same names and args
models (``apis.config.descheduler_upstream.UPSTREAM_ARGS``; a test holds them equal)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from apis.config.args_base import ArgsModel
from apis.config.descheduler_upstream import (
    INTER_POD_ANTI_AFFINITY,
    NODE_AFFINITY,
    NODE_TAINTS,
    POD_LIFE_TIME,
    REMOVE_DUPLICATES,
    REMOVE_FAILED_PODS,
    TOO_MANY_RESTARTS,
    TOPOLOGY_SPREAD,
    PodLifeTimeArgs,
    RemoveDuplicatesArgs,
    RemoveFailedPodsArgs,
    RemovePodsHavingTooManyRestartsArgs,
    RemovePodsViolatingInterPodAntiAffinityArgs,
    RemovePodsViolatingNodeAffinityArgs,
    RemovePodsViolatingNodeTaintsArgs,
    RemovePodsViolatingTopologySpreadConstraintArgs,
)
from koord_scheduler.descheduler.deschedule_plugins import (
    DeschedulePlugin,
    PodLifeTime,
    RemoveFailedPods,
    RemovePodsHavingTooManyRestarts,
    RemovePodsViolatingInterPodAntiAffinity,
    RemovePodsViolatingNodeAffinity,
    RemovePodsViolatingNodeTaints,
)
from koord_scheduler.descheduler.remove_duplicates import RemoveDuplicates
from koord_scheduler.descheduler.topology_spread import RemovePodsViolatingTopologySpreadConstraint

A = TypeVar("A", bound=ArgsModel)


class DeschedulePluginSpec:
    """One upstream plugin: its name, its factory and its args model, in one typed line as the
    scheduler's :class:`~koord_scheduler.framework.registry.PluginSpec`: ``DeschedulePluginSpec(NAME, new,
    ARGS)`` type-checks only when ``new`` takes an ``ARGS`` and returns a :class:`DeschedulePlugin`."""

    __slots__ = ("args_model", "factory", "name")

    def __init__(self, name: str, factory: Callable[[A], DeschedulePlugin], args_model: type[A]) -> None:
        self.name = name
        self.factory: Callable[[Any], DeschedulePlugin] = factory
        self.args_model: type[ArgsModel] = args_model


SPECS: Final = (
    DeschedulePluginSpec(POD_LIFE_TIME, PodLifeTime, PodLifeTimeArgs),
    DeschedulePluginSpec(REMOVE_FAILED_PODS, RemoveFailedPods, RemoveFailedPodsArgs),
    DeschedulePluginSpec(TOO_MANY_RESTARTS, RemovePodsHavingTooManyRestarts, RemovePodsHavingTooManyRestartsArgs),
    DeschedulePluginSpec(NODE_TAINTS, RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeTaintsArgs),
    DeschedulePluginSpec(NODE_AFFINITY, RemovePodsViolatingNodeAffinity, RemovePodsViolatingNodeAffinityArgs),
    DeschedulePluginSpec(
        INTER_POD_ANTI_AFFINITY, RemovePodsViolatingInterPodAntiAffinity, RemovePodsViolatingInterPodAntiAffinityArgs
    ),
    DeschedulePluginSpec(REMOVE_DUPLICATES, RemoveDuplicates, RemoveDuplicatesArgs),
    DeschedulePluginSpec(
        TOPOLOGY_SPREAD, RemovePodsViolatingTopologySpreadConstraint, RemovePodsViolatingTopologySpreadConstraintArgs
    ),
)
DESCHEDULE_PLUGINS: Final[Mapping[str, DeschedulePluginSpec]] = {spec.name: spec for spec in SPECS}
"""The upstream plugins by name, of both points (``BALANCE_PLUGINS`` says which run at Balance)."""
