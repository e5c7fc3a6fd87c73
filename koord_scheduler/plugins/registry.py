"""``in_tree_registry()``: every plugin shipped with koord-scheduler, in a fresh Registry each call."""

from __future__ import annotations

from koord_scheduler.framework.registry import PluginSpec, Registry
from koord_scheduler.plugins.balancedallocation import plugin as balancedallocation
from koord_scheduler.plugins.coscheduling import plugin as coscheduling
from koord_scheduler.plugins.defaultbinder import plugin as defaultbinder
from koord_scheduler.plugins.defaultprebind import plugin as defaultprebind
from koord_scheduler.plugins.defaultpreemption import plugin as defaultpreemption
from koord_scheduler.plugins.deviceshare import plugin as deviceshare
from koord_scheduler.plugins.dynamicresources import plugin as dynamicresources
from koord_scheduler.plugins.elasticquota import plugin as elasticquota
from koord_scheduler.plugins.imagelocality import plugin as imagelocality
from koord_scheduler.plugins.interpodaffinity import plugin as interpodaffinity
from koord_scheduler.plugins.loadaware import plugin as loadaware
from koord_scheduler.plugins.nodeaffinity import plugin as nodeaffinity
from koord_scheduler.plugins.nodename import plugin as nodename
from koord_scheduler.plugins.nodenumaresource import plugin as nodenumaresource
from koord_scheduler.plugins.nodeports import plugin as nodeports
from koord_scheduler.plugins.noderesources import plugin as noderesources
from koord_scheduler.plugins.nodeunschedulable import plugin as nodeunschedulable
from koord_scheduler.plugins.nodevolumelimits import plugin as nodevolumelimits
from koord_scheduler.plugins.podtopologyspread import plugin as podtopologyspread
from koord_scheduler.plugins.queuesort import plugin as queuesort
from koord_scheduler.plugins.reservation import plugin as reservation
from koord_scheduler.plugins.schedulinggates import plugin as schedulinggates
from koord_scheduler.plugins.schedulinghint import plugin as schedulinghint
from koord_scheduler.plugins.tainttoleration import plugin as tainttoleration
from koord_scheduler.plugins.volumebinding import plugin as volumebinding
from koord_scheduler.plugins.volumerestrictions import plugin as volumerestrictions
from koord_scheduler.plugins.volumezone import plugin as volumezone

_MODULES = (
    schedulinggates,
    queuesort,
    nodeunschedulable,
    nodename,
    tainttoleration,
    nodeaffinity,
    nodeports,
    noderesources,
    volumerestrictions,
    nodevolumelimits,
    volumebinding,
    volumezone,
    balancedallocation,
    podtopologyspread,
    interpodaffinity,
    dynamicresources,
    defaultpreemption,
    imagelocality,
    loadaware,
    nodenumaresource,
    defaultbinder,
    reservation,
    coscheduling,
    elasticquota,
    deviceshare,
    schedulinghint,
    defaultprebind,
)


def in_tree_registry() -> Registry:
    """A new registry of the in-tree plugins. Nothing is registered at import time."""
    return Registry(PluginSpec(m.NAME, m.new, m.ARGS) for m in _MODULES)
