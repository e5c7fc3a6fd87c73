"""The admission server's feature gates: Koordinator's koord-manager gates that change what the webhooks do.

Names, defaults and maturity are Koordinator's (``pkg/features/features.go`` at v1.8.0). One frozen value,
built once and handed to the handlers that read it (no global gate object):

=========================================  =======  =====  ==============================================
gate                                       default  stage  what it does here
=========================================  =======  =====  ==============================================
``PodValidatingWebhook``                   on       Beta   ``/validate-pod`` checks pods (off: allows all)
``ElasticQuotaMutatingWebhook``            on       Beta   the ElasticQuota defaults are written (off: no
                                                           change)
``ElasticQuotaValidatingWebhook``          on       Beta   ElasticQuota writes are checked (off: allowed)
``ColocationProfileSkipValidatingPriority``  off    Alpha  the ``koordinator.sh/priority`` label may change
``ElasticQuotaEnableUpdateResourceKey``    off      Alpha  a child's max keys need only be in its parent's
                                                           (off: the same keys)
``ElasticQuotaGuaranteeUsage``             off      Alpha  a quota's min must be guaranteed by an ancestor
``DisableDefaultQuota``                    off      Alpha  a pod without the quota label belongs to no quota
``SupportParentQuotaSubmitPod``            off      Alpha  pods may name a parent quota
=========================================  =======  =====  ==============================================

Koordinator's ``ColocationProfileController`` gate is the ``colocationprofile`` controller of
``--controllers`` here, off unless named (``koord_scheduler.scheduler.controllers.selection``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True, slots=True)
class GateSpec:
    default: bool
    maturity: str
    attribute: str
    """The :class:`AdmissionGates` field that holds it."""


ADMISSION_GATES: Final[Mapping[str, GateSpec]] = MappingProxyType(
    {
        "PodValidatingWebhook": GateSpec(True, "BETA", "pod_validating_webhook"),
        "ElasticQuotaMutatingWebhook": GateSpec(True, "BETA", "elastic_quota_mutating_webhook"),
        "ElasticQuotaValidatingWebhook": GateSpec(True, "BETA", "elastic_quota_validating_webhook"),
        "ColocationProfileSkipValidatingPriority": GateSpec(False, "ALPHA", "skip_validating_priority"),
        "ElasticQuotaEnableUpdateResourceKey": GateSpec(False, "ALPHA", "enable_update_resource_key"),
        "ElasticQuotaGuaranteeUsage": GateSpec(False, "ALPHA", "guarantee_usage"),
        "DisableDefaultQuota": GateSpec(False, "ALPHA", "disable_default_quota"),
        "SupportParentQuotaSubmitPod": GateSpec(False, "ALPHA", "parent_quota_submit_pod"),
    }
)


class AdmissionGateError(ValueError):
    """A gate name the admission server does not know, or a value that is not a boolean."""


@dataclass(frozen=True, slots=True)
class AdmissionGates:
    """The resolved gates; the defaults are Koordinator's."""

    pod_validating_webhook: bool = True
    elastic_quota_mutating_webhook: bool = True
    elastic_quota_validating_webhook: bool = True
    skip_validating_priority: bool = False
    enable_update_resource_key: bool = False
    guarantee_usage: bool = False
    disable_default_quota: bool = False
    parent_quota_submit_pod: bool = False

    @classmethod
    def resolve(cls, values: Mapping[str, bool]) -> AdmissionGates:
        """Koordinator's defaults with ``values`` (gate name → on) over them. Raises
        :class:`AdmissionGateError` naming an unknown gate or a value that is not a bool."""
        chosen: dict[str, bool] = {}
        for name, value in values.items():
            spec = ADMISSION_GATES.get(name)
            if spec is None:
                raise AdmissionGateError(
                    f"unrecognized admission feature gate: {name} (known: {', '.join(sorted(ADMISSION_GATES))})"
                )
            if not isinstance(value, bool):
                raise AdmissionGateError(f"feature gate {name}: expected true or false, got {value!r}")
            chosen[spec.attribute] = value
        return cls(**chosen)

    def values(self) -> dict[str, bool]:
        """Gate name → value, every gate (for logs and tests)."""
        by_attribute = {spec.attribute: name for name, spec in ADMISSION_GATES.items()}
        return {by_attribute[f.name]: bool(getattr(self, f.name)) for f in fields(self)}


DEFAULT_ADMISSION_GATES: Final = AdmissionGates()
