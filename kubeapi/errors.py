"""The API layer's exceptions, and the one-line form every failure is logged in.

koord-scheduler's exception tree (``koord_scheduler.framework.errors``) and koordlet use these for
anything that went wrong talking to kube-apiserver.
"""

from __future__ import annotations

import logging


class KubeApiError(Exception):
    """Base class of every exception the API layer raises on purpose."""


class ClusterError(KubeApiError):
    """Talking to the cluster failed (API errors, lost watches)."""


class KubeConfigError(KubeApiError):
    """No usable connection: a missing or malformed kubeconfig, or no in-cluster environment.

    The message names the source (``kubeconfig PATH: ...``); ``reason`` is the part after it, for callers
    that name the source their own way (koordlet says ``--kubeconfig PATH``). Importable from
    :mod:`kubeapi.connection` too."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


def is_conflict(exc: BaseException) -> bool:
    """A write refused because the object changed under it: the API server's 409 Conflict (a stale
    ``resourceVersion`` precondition), or the in-memory cluster's same refusal."""
    return getattr(exc, "status", None) == 409 or "the object has been modified" in str(exc)


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
