"""Feature gates: parsed once (config file, then ``--feature-gates``) into a frozen value, passed around.

Gate names, maturities and defaults are Koordinator's (``pkg/features/koordlet_features.go`` plus the
runtime-hook gates). ``AllAlpha`` / ``AllBeta`` set every gate of that maturity, then explicit names win.
An unknown gate or a value that is not a boolean is refused with a message naming it; a GA gate is
locked to true.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class Maturity(StrEnum):
    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = "GA"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    default: bool
    maturity: Maturity


def _a() -> FeatureSpec:
    return FeatureSpec(False, Maturity.ALPHA)


def _b(default: bool = True) -> FeatureSpec:
    return FeatureSpec(default, Maturity.BETA)


KOORDLET_FEATURES: Mapping[str, FeatureSpec] = MappingProxyType(
    {
        "AuditEvents": _a(),
        "AuditEventsHTTPHandler": _a(),
        "BECPUSuppress": _b(),
        "BECPUManager": _a(),
        "BECPUEvict": _a(),
        "CPUEvict": _a(),
        "CPUAllocatableEvict": _a(),
        "BEMemoryEvict": _a(),
        "MemoryEvict": _a(),
        "MemoryAllocatableEvict": _a(),
        "CPUBurst": _b(),
        "SystemConfig": _a(),
        "RdtResctrl": _b(),
        "ResctrlCollector": _a(),
        "CgroupReconcile": _a(),
        "NodeTopologyReport": _b(),
        "Accelerators": _a(),
        "RDMADevices": _a(),
        "CPICollector": _a(),
        "Libpfm4": _a(),
        "PSICollector": _a(),
        "BlkIOReconcile": _a(),
        "ColdPageCollector": _a(),
        "HugePageReport": _a(),
        "PodResourcesProxy": _a(),
        "HamiCoreVGPUMonitor": _a(),
        "PerCPUMetric": _a(),
        "NodeMetricPromMetrics": _a(),
        # runtime-hook gates, added to the same gate set upstream
        "GroupIdentity": _b(),
        "CPUSetAllocator": _b(),
        "BatchResource": _b(),
        "GPUEnvInject": _a(),
        "RDMADeviceInject": _a(),
        "CPUNormalization": _a(),
        "CoreSched": _a(),
        "TerwayQoS": _a(),
        "TCNetworkQoS": _a(),
        "Resctrl": _a(),
        "OOMScoreAdj": _a(),
    }
)

_ALL_KEYS = {"AllAlpha": Maturity.ALPHA, "AllBeta": Maturity.BETA}


class FeatureGateError(ValueError):
    """A bad ``--feature-gates`` or config value; the message is meant for the user as is."""


def _parse_bool(name: str, raw: str | bool) -> bool:
    if isinstance(raw, bool):
        return raw
    lowered = raw.strip().lower()
    if lowered in ("true", "1", "t"):
        return True
    if lowered in ("false", "0", "f"):
        return False
    raise FeatureGateError(f"invalid value of {name}={raw!r}: must be true or false")


def parse_feature_gate_flag(text: str) -> dict[str, bool]:
    """``"A=true,B=false"`` → {"A": True, "B": False}; empty → {}."""
    out: dict[str, bool] = {}
    for raw_item in text.split(","):
        item = raw_item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise FeatureGateError(f"missing bool value for {name.strip()!r} in --feature-gates (want Name=true)")
        out[name.strip()] = _parse_bool(name.strip(), value)
    return out


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """The resolved gate values. Build with :meth:`resolve`; ask with :meth:`enabled`."""

    specs: Mapping[str, FeatureSpec]
    values: Mapping[str, bool] = field(default_factory=dict)
    explicit: frozenset[str] = frozenset()
    """Gates set by their own name (config file or flag), true or false; ``AllAlpha``/``AllBeta`` are not."""

    def enabled(self, name: str) -> bool:
        """Raises ``KeyError`` for a gate nobody declared (a programming error, not a user error)."""
        spec = self.specs[name]
        return self.values.get(name, spec.default)

    def known(self) -> list[str]:
        return sorted(self.specs)

    @classmethod
    def resolve(
        cls,
        specs: Mapping[str, FeatureSpec],
        *overrides: Mapping[str, bool | str],
    ) -> FeatureGates:
        """Defaults, then each override in order (config file first, then flags)."""
        values: dict[str, bool] = {}
        explicit: set[str] = set()
        for override in overrides:
            for name, raw in override.items():
                value = _parse_bool(name, raw)
                if name in _ALL_KEYS:
                    for gate, spec in specs.items():
                        if spec.maturity is _ALL_KEYS[name]:
                            values[gate] = value
                    continue
                found = specs.get(name)
                if found is None:
                    raise FeatureGateError(f"unrecognized feature gate: {name} (known: {', '.join(sorted(specs))})")
                if found.maturity is Maturity.GA and not value:
                    raise FeatureGateError(f"cannot set feature gate {name} to false, feature is GA and locked")
                values[name] = value
                explicit.add(name)
        return cls(MappingProxyType(dict(specs)), MappingProxyType(values), frozenset(explicit))

    def explicitly_enabled(self) -> list[str]:
        """Gates turned on by their own name, sorted."""
        return sorted(name for name in self.explicit if self.values.get(name, False))

    def without(self, names: frozenset[str] | set[str]) -> FeatureGates:
        """The same gates with ``names`` forced off (a gate that cannot act on this node)."""
        values = dict(self.values)
        for name in names:
            values[name] = False
        return FeatureGates(self.specs, MappingProxyType(values), self.explicit)
