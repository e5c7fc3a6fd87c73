"""Scheduler configuration: ``KubeSchedulerConfiguration`` v1, plugin args, profile expansion.

Entry points: :func:`load_scheduler_config` / :func:`parse_scheduler_config` to read a file, the
``<Plugin>Args`` models and :func:`decode_args` for plugin arguments, and :mod:`apis.config.profile`
for default plugins, merging and MultiPoint expansion. Every error is a :class:`ConfigError`.
"""

from apis.config.args_base import ArgsModel
from apis.config.coscheduling_args import CoschedulingArgs
from apis.config.deviceshare_args import DeviceShareArgs
from apis.config.dynamicresources_args import DynamicResourcesArgs
from apis.config.errors import ConfigError, ErrorType, FieldError
from apis.config.loadaware_args import LoadAwareSchedulingArgs
from apis.config.loader import load_scheduler_config, parse_scheduler_config, strip_helm_template
from apis.config.plugin_args import (
    IN_TREE_ARGS,
    DefaultPreemptionArgs,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    VolumeBindingArgs,
    decode_args,
)
from apis.config.reservation_args import ReservationArgs
from apis.config.types import (
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    Plugin,
    PluginConfig,
    PluginRef,
    Plugins,
    PluginSet,
)

__all__ = [
    "IN_TREE_ARGS",
    "ArgsModel",
    "ConfigError",
    "CoschedulingArgs",
    "DefaultPreemptionArgs",
    "DeviceShareArgs",
    "DynamicResourcesArgs",
    "ErrorType",
    "FieldError",
    "InterPodAffinityArgs",
    "KubeSchedulerConfiguration",
    "KubeSchedulerProfile",
    "LoadAwareSchedulingArgs",
    "NodeAffinityArgs",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "Plugin",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "PodTopologySpreadArgs",
    "ReservationArgs",
    "VolumeBindingArgs",
    "decode_args",
    "load_scheduler_config",
    "parse_scheduler_config",
    "strip_helm_template",
]
