"""The one exception tree of koord-scheduler.

Plugins report outcomes through :class:`~koord_scheduler.framework.status.Status`; only bugs and
infrastructure failures raise, and they raise one of these.
"""

from __future__ import annotations

import logging

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


def describe(exc: BaseException) -> str:
    """``Type: message`` (``Type`` alone when the message is empty): the one line an error is logged as."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def log_failure(logger: logging.Logger, what: str, exc: BaseException, *, level: int = logging.ERROR) -> None:
    """Log that ``what`` failed with ``exc`` as one line (``what: Type: message``) at ``level``; the
    traceback follows at debug level only (``-v 4`` and up), so a failure at default verbosity is one
    clear line, however unexpected."""
    logger.log(level, "%s: %s", what, describe(exc))
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s: traceback", what, exc_info=exc)
