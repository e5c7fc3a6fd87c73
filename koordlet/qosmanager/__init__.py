"""QoS manager: the extension-plugin contract, registry, feature gates and the resource executor."""

from koordlet.qosmanager.executor import AuditEvent, ExecutorOptions, ResourceExecutor, ResourceUpdate
from koordlet.qosmanager.featuregates import (
    KOORDLET_FEATURES,
    FeatureGateError,
    FeatureGates,
    FeatureSpec,
    Maturity,
    parse_feature_gate_flag,
)
from koordlet.qosmanager.framework import ExtensionPlugin, PluginContext, PluginEntry, PluginFactory
from koordlet.qosmanager.manager import PluginState, QOSManager
from koordlet.qosmanager.registry import (
    ENTRY_POINT_GROUP,
    DuplicatePluginError,
    QOSPluginRegistry,
    builtin_registry,
    entry_point_registry,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "KOORDLET_FEATURES",
    "AuditEvent",
    "DuplicatePluginError",
    "ExecutorOptions",
    "ExtensionPlugin",
    "FeatureGateError",
    "FeatureGates",
    "FeatureSpec",
    "Maturity",
    "PluginContext",
    "PluginEntry",
    "PluginFactory",
    "PluginState",
    "QOSManager",
    "QOSPluginRegistry",
    "ResourceExecutor",
    "ResourceUpdate",
    "builtin_registry",
    "entry_point_registry",
    "parse_feature_gate_flag",
]
