"""``CoschedulingArgs`` (Koordinator ``pkg/scheduler/apis/config/v1``): defaults and validation.

Defaults are Koordinator's: ``defaultTimeout`` 600s, ``controllerWorkers`` 1, ``defaultMatchPolicy``
once-satisfied, job-level preemption and network-topology awareness off.

``enablePreemption: true`` turns Coscheduling's PostFilter into Koordinator's job-level preemption (the
preemptor is the whole gang group, or the single pod when it has none); Koordinator's chart sets it and
drops DefaultPreemption.

``controllerWorkers`` is how many PodGroup statuses the podgroup controller writes at the same time.
Refused at load rather than accepted and ignored: ``skipCheckScheduleCycle: true`` (deprecated upstream,
where it does nothing either).
``awareNetworkTopology: true`` places gangs that carry a ``network-topology-spec`` by the cluster's
``ClusterNetworkTopology`` (Koordinator's FindOneNode planning); gangs without one are plain gangs.
"""

from __future__ import annotations

from apis.config.args_base import ArgsModel
from apis.config.duration import GoDuration
from apis.config.errors import FieldError, forbidden, invalid, join_path, not_supported

MATCH_POLICIES = ("once-satisfied", "only-waiting", "waiting-and-running")


class CoschedulingArgs(ArgsModel):
    default_timeout: GoDuration = 600.0
    """Seconds an assumed gang member waits at Permit for the rest, when the gang does not say."""
    controller_workers: int = 1
    """PodGroup statuses the podgroup controller writes at the same time."""
    skip_check_schedule_cycle: bool = False
    """Deprecated in Koordinator and unused there; ``true`` is refused (it would do nothing)."""
    enable_preemption: bool = False
    """Job-level preemption at Coscheduling's PostFilter (see the module docstring)."""
    aware_network_topology: bool = False
    """See the module docstring."""
    default_match_policy: str = "once-satisfied"

    def field_errors(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.default_timeout < 0:
            errors.append(
                invalid(
                    join_path(path, "defaultTimeout"),
                    self.default_timeout,
                    "coeSchedulingArgs DefaultTimeoutSeconds invalid",
                )
            )
        if self.controller_workers < 1:
            errors.append(
                invalid(
                    join_path(path, "controllerWorkers"),
                    self.controller_workers,
                    "coeSchedulingArgs ControllerWorkers invalid",
                )
            )
        if self.default_match_policy not in MATCH_POLICIES:
            errors.append(
                not_supported(join_path(path, "defaultMatchPolicy"), self.default_match_policy, MATCH_POLICIES)
            )
        if self.skip_check_schedule_cycle:
            errors.append(
                forbidden(
                    join_path(path, "skipCheckScheduleCycle"),
                    "deprecated upstream and has no effect (gang rounds replaced schedule cycles); remove it",
                )
            )
        return errors
