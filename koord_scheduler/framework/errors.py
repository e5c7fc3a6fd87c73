"""The one exception tree of koord-scheduler.

Plugins report outcomes through :class:`~koord_scheduler.framework.status.Status`; only bugs and
infrastructure failures raise, and they raise one of these.
"""

from __future__ import annotations

from koord_scheduler.framework.status import Status


class SchedulerError(Exception):
    """Base class of every exception koord-scheduler raises on purpose."""


class RegistryError(SchedulerError):
    """A plugin registry problem: duplicate or unknown plugin name, bad factory."""


class ProfileError(SchedulerError):
    """A profile cannot be built from the configuration (names the field path)."""


class PluginError(SchedulerError):
    """A plugin failed in a way it could not express as a Status."""


class ClusterError(SchedulerError):
    """Talking to the cluster failed (API errors, lost watches)."""


class PluginCycleError(PluginError):
    """A plugin failed with Error (or raised) at an extension point; aborts the scheduling cycle.

    ``status`` is the Error status, stamped with the plugin's name."""

    def __init__(self, status: Status) -> None:
        super().__init__(str(status))
        self.status = status
