"""koord-scheduler's ``--feature-gates``: kube-scheduler v1.35.8's gate names and defaults, plus
Koordinator's scheduler gates (``pkg/features/scheduler_features.go``, ``features.go``'s transformer
gates) and koord-manager's gates (``features.go``: the webhooks and controllers koord-scheduler hosts),
parsed once into a frozen value that is handed to whatever needs it (no global gate object).

The flag takes kube-scheduler's syntax (``A=true,B=false``; ``AllAlpha`` / ``AllBeta`` set every gate of
that maturity first). Refused, with a message naming the gate:

- a name neither kube-scheduler nor Koordinator's scheduler knows (``unrecognized feature gate: X``);
- a value that is not a boolean;
- a gate locked to its default (``cannot set feature gate X to false, feature is locked to true``);
- a gate the scheduler (or koord-manager) reads set to a value koord-scheduler does not implement (every
  gate keeps its default except those in :data:`IMPLEMENTED`): ``feature gate X=true is not implemented by
  koord-scheduler``, rather than a flag that silently does nothing.

Gates kube-scheduler accepts but never reads (kubelet's, the API server's) are accepted and have no
effect, as in kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from apis.kube_feature_gates import KUBE_FEATURES_V1_35


class FeatureGateError(ValueError):
    """A bad ``--feature-gates`` value; the message is meant for the user as is."""


@dataclass(frozen=True, slots=True)
class GateSpec:
    default: bool
    maturity: str
    """ALPHA, BETA, GA or DEPRECATED."""
    locked: bool = False


def _koordinator(default: bool = False, maturity: str = "ALPHA") -> GateSpec:
    return GateSpec(default, maturity)


KOORDINATOR_SCHEDULER_FEATURES: Mapping[str, GateSpec] = MappingProxyType(
    {
        "CompatibleCSIStorageCapacity": _koordinator(),
        "DisableCSIStorageCapacityInformer": _koordinator(),
        "CompatiblePodDisruptionBudget": _koordinator(),
        "DisablePodDisruptionBudgetInformer": _koordinator(),
        "DisableDynamicResourceAllocationInformer": _koordinator(),
        "ResizePod": _koordinator(),
        "MultiQuotaTree": _koordinator(),
        "ElasticQuotaIgnorePodOverhead": _koordinator(),
        "ElasticQuotaIgnoreTerminatingPod": _koordinator(),
        "ElasticQuotaImmediateIgnoreTerminatingPod": _koordinator(),
        "ElasticQuotaGuaranteeUsage": _koordinator(),
        "DisableDefaultQuota": _koordinator(),
        "SupportParentQuotaSubmitPod": _koordinator(),
        "LazyReservationRestore": _koordinator(),
        "OmitNodeLabelsForReservation": _koordinator(),
        "SkipReservationFitsNode": _koordinator(),
        "DevicePluginAdaption": _koordinator(),
        "CleanExpiredReservationAllocated": _koordinator(),
        "SkipFilterWithNominatedPods": _koordinator(),
        "DynamicSchedulerCheck": _koordinator(True),
        "CSIStorageCapacity": GateSpec(True, "GA", locked=True),
        "GenericEphemeralVolume": GateSpec(True, "GA", locked=True),
        "PodDisruptionBudget": GateSpec(True, "GA", locked=True),
        "SyncBarrier": _koordinator(),
        "CrossSchedulerNomination": _koordinator(),
        "GangPendingPodsConditionPatch": _koordinator(True, "BETA"),
        "EnableInlineBatchSchedule": _koordinator(),
        "EnableBatchScheduleNodeSnapshot": _koordinator(True, "BETA"),
        "PriorityTransformer": _koordinator(),
        "PreemptionPolicyTransformer": _koordinator(),
        "ReplaceResourcesTransformer": _koordinator(),
    }
)

KOORDINATOR_MANAGER_FEATURES: Mapping[str, GateSpec] = MappingProxyType(
    {
        "PodMutatingWebhook": _koordinator(True, "BETA"),
        "PodValidatingWebhook": _koordinator(True, "BETA"),
        "ElasticQuotaMutatingWebhook": _koordinator(True, "BETA"),
        "ElasticQuotaValidatingWebhook": _koordinator(True, "BETA"),
        "NodeMutatingWebhook": _koordinator(),
        "NodeValidatingWebhook": _koordinator(),
        "ConfigMapValidatingWebhook": _koordinator(),
        "ReservationMutatingWebhook": _koordinator(),
        "WebhookFramework": _koordinator(True, "BETA"),
        "ColocationProfileSkipMutatingResources": _koordinator(),
        "ColocationProfileSkipValidatingPriority": _koordinator(),
        "ElasticQuotaEnableUpdateResourceKey": _koordinator(),
        "ElasticQuotaEvaluationTransformPod": _koordinator(),
        "EnableQuotaAdmission": _koordinator(),
        "EnableSyncGPUSharedResource": _koordinator(),
        "ColocationProfileController": _koordinator(),
        "ValidatePodDeviceResource": _koordinator(),
        "EnablePodEnhancedValidator": _koordinator(),
    }
)
"""koord-manager's gates (``pkg/features/features.go`` at v1.8.0) that the scheduler's set does not have
(``ElasticQuotaGuaranteeUsage``, ``DisableDefaultQuota`` and ``SupportParentQuotaSubmitPod`` are in both
binaries' sets there; here they are one gate, in :data:`KOORDINATOR_SCHEDULER_FEATURES`). Each changes what
koord-manager does, so each is read: see :data:`IMPLEMENTED` for those koord-scheduler's webhooks and
controllers honour."""

KUBE_SCHEDULER_FEATURES: Mapping[str, GateSpec] = MappingProxyType(
    {name: GateSpec(d, m, locked) for name, (d, m, locked) in KUBE_FEATURES_V1_35.items()}
)

ALL_FEATURES: Mapping[str, GateSpec] = MappingProxyType(
    {**KUBE_SCHEDULER_FEATURES, **KOORDINATOR_SCHEDULER_FEATURES, **KOORDINATOR_MANAGER_FEATURES}
)

SCHEDULER_READS = frozenset(
    {
        # pkg/scheduler/framework/plugins/feature/feature.go, and the gates pkg/scheduler reads itself
        "DRAAdminAccess", "DRAConsumableCapacity", "DRADeviceBindingConditions", "DRADeviceTaintRules",
        "DRADeviceTaints", "DRAExtendedResource", "DRAPartitionableDevices", "DRAPrioritizedList",
        "DRAResourceClaimDeviceStatus", "DRASchedulerFilterTimeout", "DynamicResourceAllocation",
        "VolumeAttributesClass", "CSIMigrationPortworx", "VolumeLimitScaling",
        "NodeInclusionPolicyInPodTopologySpread", "MatchLabelKeysInPodTopologySpread",
        "InPlacePodVerticalScaling", "InPlacePodLevelResourcesVerticalScaling", "SidecarContainers",
        "SchedulerQueueingHints", "SchedulerAsyncPreemption", "SchedulerAsyncAPICalls", "SchedulerPopFromBackoffQ",
        "PodLevelResources", "StorageCapacityScoring", "NodeDeclaredFeatures", "GangScheduling", "GenericWorkload",
        "TaintTolerationComparisonOperators", "NominatedNodeNameForExpectation", "OpportunisticBatching",
        *(set(KOORDINATOR_SCHEDULER_FEATURES) - {"MultiQuotaTree"}),
        *KOORDINATOR_MANAGER_FEATURES,
    }
)  # fmt: skip
"""Gates whose value changes what a scheduler does; any other known gate is accepted and ignored.
``MultiQuotaTree`` is accepted either way: koord-scheduler always reads quotas' ``tree-id``
(docs/elasticquota.md)."""

IMPLEMENTED = frozenset(
    {
        "DRAAdminAccess",
        "DRAPrioritizedList",
        "DRADeviceTaints",
        "DRASchedulerFilterTimeout",
        "DisableDynamicResourceAllocationInformer",
        "GangPendingPodsConditionPatch",
        "NominatedNodeNameForExpectation",
        # koord_scheduler/webhook/gates.py (the admission server) and the colocationprofile controller
        "PodMutatingWebhook",
        "PodValidatingWebhook",
        "ElasticQuotaMutatingWebhook",
        "ElasticQuotaValidatingWebhook",
        "ColocationProfileSkipValidatingPriority",
        "ElasticQuotaEnableUpdateResourceKey",
        "ColocationProfileController",
    }
)
"""Gates koord-scheduler honours in both positions. Every other gate the scheduler reads keeps its v1.35
default (what koord-scheduler implements); asking for the other value is refused."""

_ALL_KEYS = {"AllAlpha": "ALPHA", "AllBeta": "BETA"}


def _parse_bool(name: str, raw: str | bool) -> bool:
    if isinstance(raw, bool):
        return raw
    lowered = raw.strip().lower()
    if lowered in ("true", "1", "t"):
        return True
    if lowered in ("false", "0", "f"):
        return False
    raise FeatureGateError(f"invalid value of {name}={raw}, err: strconv.ParseBool: parsing {raw!r}: invalid syntax")


def parse_feature_gates_flag(text: str) -> dict[str, bool]:
    """``"A=true,B=false"`` -> ``{"A": True, "B": False}``; empty -> ``{}``."""
    out: dict[str, bool] = {}
    for raw_item in text.split(","):
        item = raw_item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {name}")
        out[name] = _parse_bool(name, value)
    return out


@dataclass(frozen=True, slots=True)
class SchedulerFeatureGates:
    """The resolved gates. Build with :meth:`resolve` (or use the defaults); ask with :meth:`enabled`."""

    values: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        """Raises ``KeyError`` for a gate nobody declared (a programming error, not a user error)."""
        spec = ALL_FEATURES[name]
        return self.values.get(name, spec.default)

    @classmethod
    def resolve(cls, *overrides: Mapping[str, bool | str]) -> SchedulerFeatureGates:
        """Defaults, then each override in order. Raises :class:`FeatureGateError`."""
        values: dict[str, bool] = {}
        for override in overrides:
            for name, raw in override.items():
                value = _parse_bool(name, raw)
                maturity = _ALL_KEYS.get(name)
                if maturity is not None:
                    for gate, spec in ALL_FEATURES.items():
                        if spec.maturity == maturity and not spec.locked:
                            values[gate] = value
                    continue
                known = ALL_FEATURES.get(name)
                if known is None:
                    raise FeatureGateError(f"unrecognized feature gate: {name}")
                if known.locked and value != known.default:
                    raise FeatureGateError(
                        f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to "
                        f"{str(known.default).lower()}"
                    )
                values[name] = value
        for name, value in sorted(values.items()):
            if name in SCHEDULER_READS and name not in IMPLEMENTED and value != ALL_FEATURES[name].default:
                raise FeatureGateError(
                    f"feature gate {name}={str(value).lower()} is not implemented by koord-scheduler (its v1.35 "
                    f"default, {str(ALL_FEATURES[name].default).lower()}, is)"
                )
        return cls(MappingProxyType(values))


DEFAULT_FEATURE_GATES = SchedulerFeatureGates()
