"""The QoS plugin registry: explicit, built from built-ins plus the ``koordlet.qos_plugins`` entry points.

Nothing registers itself at import time. A duplicate name is an error. Order is fixed: built-ins in the
order :func:`builtin_registry` lists them, then entry points sorted by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import entry_points

from koordlet.qosmanager.featuregates import FeatureSpec
from koordlet.qosmanager.framework import PluginEntry, PluginFactory

ENTRY_POINT_GROUP = "koordlet.qos_plugins"


class DuplicatePluginError(ValueError):
    pass


class QOSPluginRegistry:
    def __init__(self) -> None:
        self._entries: dict[str, PluginEntry] = {}

    def register_qos_ext_plugin(self, name: str, factory: PluginFactory, feature: FeatureSpec) -> None:
        """Add a plugin; its feature gate has the same name and ``feature`` as default and maturity."""
        if name in self._entries:
            raise DuplicatePluginError(f"QoS plugin {name!r} is already registered")
        self._entries[name] = PluginEntry(name, factory, feature)

    def add(self, entry: PluginEntry) -> None:
        self.register_qos_ext_plugin(entry.name, entry.factory, entry.feature)

    def merge(self, other: QOSPluginRegistry) -> QOSPluginRegistry:
        merged = QOSPluginRegistry()
        for entry in [*self, *other]:
            merged.add(entry)
        return merged

    def __iter__(self) -> Iterator[PluginEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        return list(self._entries)

    def feature_specs(self) -> dict[str, FeatureSpec]:
        return {e.name: e.feature for e in self}


def builtin_registry() -> QOSPluginRegistry:
    """A fresh registry holding the built-in plugins."""
    from koordlet.qosmanager.plugins.batchresource import plugin as batchresource
    from koordlet.qosmanager.plugins.becputhrottle import plugin as becputhrottle
    from koordlet.qosmanager.plugins.blkio import plugin as blkio
    from koordlet.qosmanager.plugins.cgreconcile import plugin as cgreconcile
    from koordlet.qosmanager.plugins.coresched import plugin as coresched
    from koordlet.qosmanager.plugins.cpuburst import plugin as cpuburst
    from koordlet.qosmanager.plugins.cpuevict import plugin as cpuevict
    from koordlet.qosmanager.plugins.cpunormalization import plugin as cpunormalization
    from koordlet.qosmanager.plugins.cpuset import plugin as cpuset
    from koordlet.qosmanager.plugins.cpusuppress import plugin as cpusuppress
    from koordlet.qosmanager.plugins.groupidentity import plugin as groupidentity
    from koordlet.qosmanager.plugins.memoryevict import plugin as memoryevict
    from koordlet.qosmanager.plugins.nodetopology import plugin as nodetopology
    from koordlet.qosmanager.plugins.oomscoreadj import plugin as oomscoreadj
    from koordlet.qosmanager.plugins.resctrl import plugin as resctrl
    from koordlet.qosmanager.plugins.sysreconcile import plugin as sysreconcile

    registry = QOSPluginRegistry()
    for entry in (
        becputhrottle.ENTRY,
        cpusuppress.ENTRY,
        cpuburst.ENTRY,
        cgreconcile.ENTRY,
        resctrl.CLASS_ENTRY,
        resctrl.POD_ENTRY,
        blkio.ENTRY,
        sysreconcile.ENTRY,
        cpuset.ENTRY,
        nodetopology.ENTRY,
        batchresource.ENTRY,
        cpunormalization.ENTRY,
        oomscoreadj.ENTRY,
        groupidentity.ENTRY,
        coresched.ENTRY,
        memoryevict.BE_ENTRY,
        memoryevict.ALLOCATABLE_ENTRY,
        memoryevict.PRIORITY_ENTRY,
        cpuevict.BE_ENTRY,
        cpuevict.ALLOCATABLE_ENTRY,
        cpuevict.PRIORITY_ENTRY,
    ):
        registry.add(entry)
    return registry


def entry_point_registry(group: str = ENTRY_POINT_GROUP) -> QOSPluginRegistry:
    """Plugins from installed distributions. Each entry point names a ``PluginEntry`` or a function
    returning one."""
    registry = QOSPluginRegistry()
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        loaded = ep.load()
        entry = loaded if isinstance(loaded, PluginEntry) else loaded()
        if not isinstance(entry, PluginEntry):
            raise TypeError(f"entry point {ep.name} in {group} gave {type(entry).__name__}, not PluginEntry")
        registry.add(entry)
    return registry
