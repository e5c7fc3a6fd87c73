"""How the colocation controllers reach the API server: one small protocol, a real and an in-memory one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from koord_scheduler.scheduler.controllers.decide import Write
from kubeapi.events import EventRecorder, Regarding
from kubeapi.http import ApiHttp

REPORTING_CONTROLLER = "koord-scheduler/slo-controller"


@dataclass(frozen=True, slots=True)
class ConfigMapRecord:
    """The ``slo-controller-config`` ConfigMap: identity and ``data``."""

    namespace: str
    name: str
    uid: str
    data: Mapping[str, str]


def parse_config_map(obj: Mapping[str, Any]) -> ConfigMapRecord:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    data = obj.get("data") if isinstance(obj.get("data"), Mapping) else {}
    assert isinstance(data, Mapping)
    return ConfigMapRecord(
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        {str(k): v for k, v in data.items() if isinstance(v, str)},
    )


class ControllerApi(Protocol):
    async def send(self, write: Write) -> None:
        """Perform ``write``; raises ``ClusterError`` (``ApiError`` with the status) on failure."""
        ...

    def warn_config(self, config_map: ConfigMapRecord, *, reason: str, message: str) -> None:
        """A Warning Event on the ConfigMap (never blocks)."""
        ...


class KubeControllerApi:
    """Writes through its own :class:`ApiHttp` (own token bucket), Events through the scheduler's recorder."""

    def __init__(self, http: ApiHttp, events: EventRecorder) -> None:
        self.http = http
        self.events = events

    async def send(self, write: Write) -> None:
        await self.http.request(write.verb, write.path, body=write.body, content_type=write.content_type)

    def warn_config(self, config_map: ConfigMapRecord, *, reason: str, message: str) -> None:
        regarding = Regarding("ConfigMap", "v1", config_map.namespace, config_map.name, config_map.uid)
        self.events.record_for(
            regarding,
            event_type="Warning",
            reason=reason,
            action="LoadConfig",
            note=message,
            controller=REPORTING_CONTROLLER,
        )


@dataclass(slots=True)
class MemoryControllerApi:
    """Records writes and warnings (unit tests, the benchmark)."""

    writes: list[Write] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    fail: dict[str, Exception] = field(default_factory=dict)
    """path → exception raised for writes to it."""

    async def send(self, write: Write) -> None:
        error = self.fail.get(write.path)
        if error is not None:
            raise error
        self.writes.append(write)

    def warn_config(self, config_map: ConfigMapRecord, *, reason: str, message: str) -> None:
        self.warnings.append((reason, message))
