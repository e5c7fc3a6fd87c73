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


def in_tree_registry() -> Registry:
    """A new registry of the in-tree plugins. Nothing is registered at import time.

    One typed line per plugin (mypy checks each factory against its args model and the framework's
    :class:`~koord_scheduler.framework.handle.Handle`), in the order ``registry.names()`` reports them."""
    return Registry(
        [
            PluginSpec(schedulinggates.NAME, schedulinggates.new, schedulinggates.ARGS),
            PluginSpec(queuesort.NAME, queuesort.new, queuesort.ARGS),
            PluginSpec(nodeunschedulable.NAME, nodeunschedulable.new, nodeunschedulable.ARGS),
            PluginSpec(nodename.NAME, nodename.new, nodename.ARGS),
            PluginSpec(tainttoleration.NAME, tainttoleration.new, tainttoleration.ARGS),
            PluginSpec(nodeaffinity.NAME, nodeaffinity.new, nodeaffinity.ARGS),
            PluginSpec(nodeports.NAME, nodeports.new, nodeports.ARGS),
            PluginSpec(noderesources.NAME, noderesources.new, noderesources.ARGS),
            PluginSpec(volumerestrictions.NAME, volumerestrictions.new, volumerestrictions.ARGS),
            PluginSpec(nodevolumelimits.NAME, nodevolumelimits.new, nodevolumelimits.ARGS),
            PluginSpec(volumebinding.NAME, volumebinding.new, volumebinding.ARGS),
            PluginSpec(volumezone.NAME, volumezone.new, volumezone.ARGS),
            PluginSpec(balancedallocation.NAME, balancedallocation.new, balancedallocation.ARGS),
            PluginSpec(podtopologyspread.NAME, podtopologyspread.new, podtopologyspread.ARGS),
            PluginSpec(interpodaffinity.NAME, interpodaffinity.new, interpodaffinity.ARGS),
            PluginSpec(dynamicresources.NAME, dynamicresources.new, dynamicresources.ARGS),
            PluginSpec(defaultpreemption.NAME, defaultpreemption.new, defaultpreemption.ARGS),
            PluginSpec(imagelocality.NAME, imagelocality.new, imagelocality.ARGS),
            PluginSpec(loadaware.NAME, loadaware.new, loadaware.ARGS),
            PluginSpec(nodenumaresource.NAME, nodenumaresource.new, nodenumaresource.ARGS),
            PluginSpec(defaultbinder.NAME, defaultbinder.new, defaultbinder.ARGS),
            PluginSpec(reservation.NAME, reservation.new, reservation.ARGS),
            PluginSpec(coscheduling.NAME, coscheduling.new, coscheduling.ARGS),
            PluginSpec(elasticquota.NAME, elasticquota.new, elasticquota.ARGS),
            PluginSpec(deviceshare.NAME, deviceshare.new, deviceshare.ARGS),
            PluginSpec(schedulinghint.NAME, schedulinghint.new, schedulinghint.ARGS),
            PluginSpec(defaultprebind.NAME, defaultprebind.new, defaultprebind.ARGS),
        ]
    )
