"""The ``extenders[]`` entries of ``KubeSchedulerConfiguration`` (kube-scheduler's ``config.Extender``).

Wire names follow kube-scheduler's v1 API (``urlPrefix``, ``enableHTTPS``, ``tlsConfig``...). The
semantic checks (positive weight for a prioritizer, one binder, managed resource names) are in
:mod:`apis.config.validation`; here the models only decode and default.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from apis.config.duration import GoDuration
from apis.config.types_base import ConfigModel

DEFAULT_EXTENDER_TIMEOUT_SECONDS = 5.0
"""kube-scheduler's ``DefaultExtenderTimeout``: used when ``httpTimeout`` is absent or zero."""


def _decode_bytes(value: Any) -> Any:
    """``[]byte`` fields are base64 in JSON/YAML, as Go's encoding/json writes them."""
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"must be base64-encoded data: {exc}") from exc
    return value


GoBytes = Annotated[bytes, BeforeValidator(_decode_bytes)]


class ExtenderTLSConfig(ConfigModel):
    """``ExtenderTLSConfig``: files or inline PEM data; data wins over a file, as in client-go."""

    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: GoBytes = b""
    key_data: GoBytes = b""
    ca_data: GoBytes = b""


class ExtenderManagedResource(ConfigModel):
    name: str
    ignored_by_scheduler: bool = False
    """True: NodeResourcesFit does not check this resource (the extender alone answers for it)."""


class Extender(ConfigModel):
    """One HTTP extender. ``weight`` only matters with ``prioritizeVerb``; ``httpTimeout`` 0 means 5 s."""

    url_prefix: str = ""
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = Field(default=False, alias="enableHTTPS")
    tls_config: ExtenderTLSConfig | None = None
    http_timeout: GoDuration = 0.0
    node_cache_capable: bool = False
    managed_resources: tuple[ExtenderManagedResource, ...] = ()
    ignorable: bool = False

    @property
    def timeout_seconds(self) -> float:
        """``httpTimeout``, or the default where it is zero or negative (no Go client waits forever here)."""
        return self.http_timeout if self.http_timeout > 0 else DEFAULT_EXTENDER_TIMEOUT_SECONDS


def ignored_extender_resources(extenders: tuple[Extender, ...]) -> tuple[str, ...]:
    """Names every extender marked ``ignoredByScheduler``, in configuration order."""
    return tuple(r.name for e in extenders for r in e.managed_resources if r.ignored_by_scheduler)
