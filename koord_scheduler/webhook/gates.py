"""The admission server's feature gates: Koordinator's gates that change what the webhooks do.

They are values of koord-scheduler's ``--feature-gates`` (:mod:`apis.feature_gates`, with Koordinator's
names and defaults, ``pkg/features/features.go`` at v1.8.0); :meth:`AdmissionGates.from_feature_gates`
takes the ones the webhooks read into one frozen value, handed to the handlers (no global gate object):

=========================================  =======  =====  ==============================================
gate                                       default  stage  what it does here
=========================================  =======  =====  ==============================================
``PodMutatingWebhook``                     on       Beta   ``/mutate-pod`` applies profiles (off: admits
                                                           every pod unchanged)
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

The last three also change the ElasticQuota scheduler plugin, which does not implement them, so
``--feature-gates`` refuses turning them on; the webhooks honour them when given (tests).
Koordinator's ``ColocationProfileController`` gate turns on the ``colocationprofile`` controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Final

from apis.feature_gates import SchedulerFeatureGates

ADMISSION_GATES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "PodMutatingWebhook": "pod_mutating_webhook",
        "PodValidatingWebhook": "pod_validating_webhook",
        "ElasticQuotaMutatingWebhook": "elastic_quota_mutating_webhook",
        "ElasticQuotaValidatingWebhook": "elastic_quota_validating_webhook",
        "ColocationProfileSkipValidatingPriority": "skip_validating_priority",
        "ElasticQuotaEnableUpdateResourceKey": "enable_update_resource_key",
        "ElasticQuotaGuaranteeUsage": "guarantee_usage",
        "DisableDefaultQuota": "disable_default_quota",
        "SupportParentQuotaSubmitPod": "parent_quota_submit_pod",
    }
)
"""Gate name → :class:`AdmissionGates` field."""


class AdmissionGateError(ValueError):
    """A gate name the admission server does not read, or a value that is not a boolean."""


@dataclass(frozen=True, slots=True)
class AdmissionGates:
    """The resolved gates; the defaults are Koordinator's."""

    pod_mutating_webhook: bool = True
    pod_validating_webhook: bool = True
    elastic_quota_mutating_webhook: bool = True
    elastic_quota_validating_webhook: bool = True
    skip_validating_priority: bool = False
    enable_update_resource_key: bool = False
    guarantee_usage: bool = False
    disable_default_quota: bool = False
    parent_quota_submit_pod: bool = False

    @classmethod
    def from_feature_gates(cls, gates: SchedulerFeatureGates) -> AdmissionGates:
        """The webhooks' gates out of koord-scheduler's ``--feature-gates`` value."""
        return cls(**{attribute: gates.enabled(name) for name, attribute in ADMISSION_GATES.items()})

    @classmethod
    def resolve(cls, values: Mapping[str, bool]) -> AdmissionGates:
        """Koordinator's defaults with ``values`` (gate name → on) over them. Raises
        :class:`AdmissionGateError` naming an unknown gate or a value that is not a bool."""
        chosen: dict[str, bool] = {}
        for name, value in values.items():
            attribute = ADMISSION_GATES.get(name)
            if attribute is None:
                raise AdmissionGateError(
                    f"unrecognized admission feature gate: {name} (known: {', '.join(sorted(ADMISSION_GATES))})"
                )
            if not isinstance(value, bool):
                raise AdmissionGateError(f"feature gate {name}: expected true or false, got {value!r}")
            chosen[attribute] = value
        return cls(**chosen)

    def values(self) -> dict[str, bool]:
        """Gate name → value, every gate (for logs and tests)."""
        by_attribute = {attribute: name for name, attribute in ADMISSION_GATES.items()}
        return {by_attribute[f.name]: bool(getattr(self, f.name)) for f in fields(self)}


DEFAULT_ADMISSION_GATES: Final = AdmissionGates()
