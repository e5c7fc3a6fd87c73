"""HTTP scheduler extenders, as kube-scheduler calls them: the client (:mod:`.client`), the protocol's
JSON (:mod:`.wire`) and their place in the scheduling and binding cycles (:mod:`.phase`)."""

from koord_scheduler.extenders.client import ExtenderError, HTTPExtender, tls_context
from koord_scheduler.extenders.phase import (
    EXTENDER_NAME,
    Extenders,
    ExtenderVerdicts,
    bind_with_extenders,
    extender_score,
)
from koord_scheduler.extenders.preemption import process_preemption

__all__ = [
    "EXTENDER_NAME",
    "ExtenderError",
    "ExtenderVerdicts",
    "Extenders",
    "HTTPExtender",
    "bind_with_extenders",
    "extender_score",
    "process_preemption",
    "tls_context",
]
