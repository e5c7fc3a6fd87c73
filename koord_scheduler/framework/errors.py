"""The one exception tree of koord-scheduler.

Plugins report outcomes through :class:`~koord_scheduler.framework.status.Status`; only bugs and
infrastructure failures raise, and they raise one of these. Failures talking to the cluster are the API
layer's :class:`ClusterError` (``kubeapi.errors``), named here too because plugins catch it from their
handle's cluster client.
"""

from __future__ import annotations

from koord_scheduler.framework.status import Status
from kubeapi.errors import ClusterError, describe, is_conflict, log_failure


class SchedulerError(Exception):
    """Base class of every exception koord-scheduler raises on purpose."""


class RegistryError(SchedulerError):
    """A plugin registry problem: duplicate or unknown plugin name, bad factory."""


class ProfileError(SchedulerError):
    """A profile cannot be built from the configuration (names the field path)."""


class PluginError(SchedulerError):
    """A plugin failed in a way it could not express as a Status."""


class PluginCycleError(PluginError):
    """A plugin failed with Error (or raised) at an extension point; aborts the scheduling cycle.

    ``status`` is the Error status, stamped with the plugin's name."""

    def __init__(self, status: Status) -> None:
        super().__init__(str(status))
        self.status = status


__all__ = [
    "ClusterError",
    "PluginCycleError",
    "PluginError",
    "ProfileError",
    "RegistryError",
    "SchedulerError",
    "describe",
    "is_conflict",
    "log_failure",
]
