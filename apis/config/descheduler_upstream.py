"""The args of the kubernetes-sigs/descheduler plugins pykoord runs at the Deschedule point, as
Koordinator's adaptor loads them (``pkg/descheduler/framework/plugins/kubernetes/plugin.go``; the types,
defaults and validation of ``sigs.k8s.io/descheduler`` v0.35 ``pkg/framework/plugins/<plugin>``).

Every field is known; a field whose filter pykoord cannot evaluate (container states, exit codes, pod
condition reasons: the pod record does not keep them) is refused with its path when set.
"""

from __future__ import annotations

from typing import Final

from apis.config.args_base import ArgsModel
from apis.config.descheduler_selectors import LabelSelector, Namespaces
from apis.config.errors import FieldError, forbidden, invalid, not_supported, required
from apis.config.types_base import ConfigModel

POD_LIFE_TIME: Final = "PodLifeTime"
REMOVE_FAILED_PODS: Final = "RemoveFailedPods"
NODE_TAINTS: Final = "RemovePodsViolatingNodeTaints"
NODE_AFFINITY: Final = "RemovePodsViolatingNodeAffinity"
TOO_MANY_RESTARTS: Final = "RemovePodsHavingTooManyRestarts"
INTER_POD_ANTI_AFFINITY: Final = "RemovePodsViolatingInterPodAntiAffinity"
REMOVE_DUPLICATES: Final = "RemoveDuplicates"
TOPOLOGY_SPREAD: Final = "RemovePodsViolatingTopologySpreadConstraint"
SPREAD_ACTIONS: Final = ("DoNotSchedule", "ScheduleAnyway")
POD_PHASES: Final = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
NODE_AFFINITY_TYPES: Final = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)


def _common_errors(namespaces: Namespaces | None, path: str) -> list[FieldError]:
    if namespaces is not None and namespaces.include and namespaces.exclude:
        return [forbidden(f"{path}.namespaces", "only one of Include/Exclude namespaces can be set")]
    return []


class OwnerKinds(ConfigModel):
    include: list[str] | None = None
    exclude: list[str] | None = None


class PodConditionFilter(ConfigModel):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    min_time_since_last_transition_seconds: int | None = None


class PodLifeTimeArgs(ArgsModel):
    """Pods older than ``maxPodLifeTimeSeconds`` (and, when set, in one of ``states``, which pykoord
    matches against the pod's phase only, or with a condition matching ``conditions``)."""

    api_version: str | None = None
    kind: str | None = None
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    owner_kinds: OwnerKinds | None = None
    max_pod_life_time_seconds: int | None = None
    states: list[str] | None = None
    conditions: list[PodConditionFilter] | None = None
    exit_codes: list[int] | None = None
    including_init_containers: bool = False
    including_ephemeral_containers: bool = False

    def field_errors(self, path: str) -> list[FieldError]:
        errors = _common_errors(self.namespaces, path)
        if self.owner_kinds is not None and self.owner_kinds.include and self.owner_kinds.exclude:
            errors.append(forbidden(f"{path}.ownerKinds", "only one of Include/Exclude ownerKinds can be set"))
        if self.max_pod_life_time_seconds is not None and self.max_pod_life_time_seconds < 0:
            errors.append(invalid(f"{path}.maxPodLifeTimeSeconds", self.max_pod_life_time_seconds, "must be >= 0"))
        for i, state in enumerate(self.states or []):
            if state not in POD_PHASES:
                errors.append(
                    forbidden(f"{path}.states[{i}]", f"{state}: pykoord matches pod phases only {list(POD_PHASES)}")
                )
        for i, c in enumerate(self.conditions or []):
            if c.reason:
                errors.append(forbidden(f"{path}.conditions[{i}].reason", "not kept in the pod record by pykoord"))
            if not (c.type or c.status or c.reason or c.min_time_since_last_transition_seconds is not None):
                errors.append(
                    required(
                        f"{path}.conditions[{i}]",
                        "at least one of type, status, reason, or minTimeSinceLastTransitionSeconds must be set",
                    )
                )
        for name, value in (
            ("exitCodes", self.exit_codes),
            ("includingInitContainers", self.including_init_containers),
            ("includingEphemeralContainers", self.including_ephemeral_containers),
        ):
            if value:
                errors.append(forbidden(f"{path}.{name}", "container states are not kept in the pod record by pykoord"))
        if self.max_pod_life_time_seconds is None and not self.states and not self.conditions and not self.exit_codes:
            errors.append(
                required(
                    path,
                    "at least one filtering criterion must be specified "
                    "(maxPodLifeTimeSeconds, states, conditions, or exitCodes)",
                )
            )
        return errors


class RemoveFailedPodsArgs(ArgsModel):
    """Failed pods older than ``minPodLifetimeSeconds`` (default 3600), not owned by ``excludeOwnerKinds``."""

    api_version: str | None = None
    kind: str | None = None
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    exclude_owner_kinds: list[str] | None = None
    min_pod_lifetime_seconds: int = 3600
    reasons: list[str] | None = None
    exit_codes: list[int] | None = None
    including_init_containers: bool = False

    def field_errors(self, path: str) -> list[FieldError]:
        errors = _common_errors(self.namespaces, path)
        if self.min_pod_lifetime_seconds < 0:
            errors.append(invalid(f"{path}.minPodLifetimeSeconds", self.min_pod_lifetime_seconds, "must be >= 0"))
        for name, value in (
            ("reasons", self.reasons),
            ("exitCodes", self.exit_codes),
            ("includingInitContainers", self.including_init_containers),
        ):
            if value:
                errors.append(forbidden(f"{path}.{name}", "container states are not kept in the pod record by pykoord"))
        return errors


class RemovePodsViolatingNodeTaintsArgs(ArgsModel):
    api_version: str | None = None
    kind: str | None = None
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    include_prefer_no_schedule: bool = False
    excluded_taints: list[str] | None = None
    included_taints: list[str] | None = None

    def field_errors(self, path: str) -> list[FieldError]:
        errors = _common_errors(self.namespaces, path)
        if self.excluded_taints and self.included_taints:
            errors.append(
                forbidden(f"{path}.includedTaints", "either includedTaints or excludedTaints can be set, but not both")
            )
        return errors


class RemovePodsViolatingNodeAffinityArgs(ArgsModel):
    api_version: str | None = None
    kind: str | None = None
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    node_affinity_type: list[str] | None = None

    def field_errors(self, path: str) -> list[FieldError]:
        errors = _common_errors(self.namespaces, path)
        if not self.node_affinity_type:
            errors.append(required(f"{path}.nodeAffinityType", "nodeAffinityType needs to be set"))
        for i, kind in enumerate(self.node_affinity_type or []):
            if kind not in NODE_AFFINITY_TYPES:
                errors.append(
                    invalid(f"{path}.nodeAffinityType[{i}]", kind, f"must be one of {list(NODE_AFFINITY_TYPES)}")
                )
        return errors


class RemovePodsHavingTooManyRestartsArgs(ArgsModel):
    """Pods whose containers restarted ``podRestartThreshold`` times or more (init containers too with
    ``includingInitContainers``); ``states`` may only be ``Running`` (the pod phase), as pykoord keeps no
    container waiting reasons (upstream also allows ``CrashLoopBackOff``)."""

    api_version: str | None = None
    kind: str | None = None
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    pod_restart_threshold: int = 0
    including_init_containers: bool = False
    states: list[str] | None = None

    def field_errors(self, path: str) -> list[FieldError]:
        errors = _common_errors(self.namespaces, path)
        if self.pod_restart_threshold < 1:
            errors.append(
                invalid(
                    f"{path}.podRestartThreshold",
                    self.pod_restart_threshold,
                    "invalid PodsHavingTooManyRestarts threshold",
                )
            )
        for i, state in enumerate(self.states or []):
            if state == "CrashLoopBackOff":
                errors.append(forbidden(f"{path}.states[{i}]", "container waiting reasons are not kept by pykoord"))
            elif state != "Running":
                errors.append(invalid(f"{path}.states[{i}]", state, "states must be one of [CrashLoopBackOff Running]"))
        return errors


class RemovePodsViolatingInterPodAntiAffinityArgs(ArgsModel):
    api_version: str | None = None
    kind: str | None = None
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None

    def field_errors(self, path: str) -> list[FieldError]:
        return _common_errors(self.namespaces, path)


class RemoveDuplicatesArgs(ArgsModel):
    """A Balance plugin: spreads the pods of one owner with the same images over their nodes."""

    api_version: str | None = None
    kind: str | None = None
    namespaces: Namespaces | None = None
    exclude_owner_kinds: list[str] | None = None

    def field_errors(self, path: str) -> list[FieldError]:
        return _common_errors(self.namespaces, path)


class RemovePodsViolatingTopologySpreadConstraintArgs(ArgsModel):
    """A Balance plugin: moves the pods above the ideal average of a violated topology spread constraint.
    ``constraints`` defaults to ``[DoNotSchedule]``, ``topologyBalanceNodeFit`` to true (upstream
    ``SetDefaults_RemovePodsViolatingTopologySpreadConstraintArgs``)."""

    api_version: str | None = None
    kind: str | None = None
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    constraints: list[str] | None = None
    topology_balance_node_fit: bool | None = None

    def actions(self) -> frozenset[str]:
        return frozenset(self.constraints or ("DoNotSchedule",))

    def node_fit(self) -> bool:
        return self.topology_balance_node_fit is not False

    def field_errors(self, path: str) -> list[FieldError]:
        errors = _common_errors(self.namespaces, path)
        for i, action in enumerate(self.constraints or ()):
            if action not in SPREAD_ACTIONS:
                errors.append(not_supported(f"{path}.constraints[{i}]", action, SPREAD_ACTIONS))
        return errors


UPSTREAM_ARGS: Final[dict[str, type[ArgsModel]]] = {
    POD_LIFE_TIME: PodLifeTimeArgs,
    REMOVE_FAILED_PODS: RemoveFailedPodsArgs,
    NODE_TAINTS: RemovePodsViolatingNodeTaintsArgs,
    NODE_AFFINITY: RemovePodsViolatingNodeAffinityArgs,
    TOO_MANY_RESTARTS: RemovePodsHavingTooManyRestartsArgs,
    INTER_POD_ANTI_AFFINITY: RemovePodsViolatingInterPodAntiAffinityArgs,
    REMOVE_DUPLICATES: RemoveDuplicatesArgs,
    TOPOLOGY_SPREAD: RemovePodsViolatingTopologySpreadConstraintArgs,
}
"""The upstream plugins pykoord runs, by name, with their args model."""
BALANCE_PLUGINS: Final = frozenset({REMOVE_DUPLICATES, TOPOLOGY_SPREAD})
"""The upstream plugins of the Balance point; the others are Deschedule plugins."""
