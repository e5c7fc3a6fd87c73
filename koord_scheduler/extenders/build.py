"""From the configuration's ``extenders`` to :class:`Extenders` (kube-scheduler ``buildExtenders``)."""

from __future__ import annotations

from apis.config import KubeSchedulerConfiguration, PluginConfig
from apis.config.extender import ignored_extender_resources
from koord_scheduler.extenders.client import HTTPExtender
from koord_scheduler.extenders.phase import Extenders

NODE_RESOURCES_FIT = "NodeResourcesFit"


def build_extenders(config: KubeSchedulerConfiguration) -> Extenders | None:
    """One client per configured extender, ignorable ones last; None when there is none."""
    if not config.extenders:
        return None
    return Extenders([HTTPExtender(e) for e in config.extenders])


def with_ignored_extender_resources(config: KubeSchedulerConfiguration) -> KubeSchedulerConfiguration:
    """Resources an extender marks ``ignoredByScheduler`` become NodeResourcesFit's ``ignoredResources``
    in every profile, replacing what the profile gave (the extender's list takes precedence, as in
    kube-scheduler). A profile without NodeResourcesFit args gets them."""
    ignored = list(ignored_extender_resources(config.extenders))
    if not ignored:
        return config
    profiles = []
    for profile in config.profiles:
        entries = list(profile.plugin_config)
        for i, entry in enumerate(entries):
            if entry.name == NODE_RESOURCES_FIT:
                args = dict(entry.args or {})
                args["ignoredResources"] = ignored
                entries[i] = entry.model_copy(update={"args": args})
                break
        else:
            entries.append(PluginConfig(name=NODE_RESOURCES_FIT, args={"ignoredResources": ignored}))
        profiles.append(profile.model_copy(update={"plugin_config": tuple(entries)}))
    return config.model_copy(update={"profiles": tuple(profiles)})
