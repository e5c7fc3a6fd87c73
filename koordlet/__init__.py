"""koordlet: the node agent.

The names below are the public surface for QoS plugin authors: the plugin contract and its context, the
metric cache and states informer a plugin reads, the executor it hands plans to, and the feature-gate
types its registry entry declares. Ship a plugin as a ``PluginEntry`` in the ``koordlet.qos_plugins``
entry-point group.
"""

from koordlet.metriccache import MetricCache, MetricKind, WindowStats
from koordlet.qosmanager import (
    ENTRY_POINT_GROUP,
    ExtensionPlugin,
    FeatureGates,
    FeatureSpec,
    Maturity,
    PluginContext,
    PluginEntry,
    QOSPluginRegistry,
    ResourceExecutor,
    ResourceUpdate,
)
from koordlet.statesinformer import PodMeta, RegisterType, StatesInformer
from koordlet.system import CgroupFS, ProcFS, WriteResult, WriteStatus
from koordlet.system.clock import Clock, FakeClock

__all__ = [
    "ENTRY_POINT_GROUP",
    "CgroupFS",
    "Clock",
    "ExtensionPlugin",
    "FakeClock",
    "FeatureGates",
    "FeatureSpec",
    "Maturity",
    "MetricCache",
    "MetricKind",
    "PluginContext",
    "PluginEntry",
    "PodMeta",
    "ProcFS",
    "QOSPluginRegistry",
    "RegisterType",
    "ResourceExecutor",
    "ResourceUpdate",
    "StatesInformer",
    "WindowStats",
    "WriteResult",
    "WriteStatus",
]
