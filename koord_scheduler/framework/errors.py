"""The one exception tree of koord-scheduler.

Plugins report outcomes through :class:`~koord_scheduler.framework.status.Status`; only bugs and
infrastructure failures raise, and they raise one of these.
"""

from __future__ import annotations


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
