"""The small, typed handle a plugin receives from its factory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from apis.core.types import Pod
from koord_scheduler.framework.snapshot import ClusterSnapshot
from koord_scheduler.framework.types import ObjectKind


class ClusterClient(Protocol):
    """Writes plugins may make to the cluster. Implemented by the real API source and the simulator.

    Every method raises :class:`~koord_scheduler.framework.errors.ClusterError` on failure.
    """

    async def bind(self, pod: Pod, node_name: str) -> None:
        """Bind through the pods/binding subresource."""
        ...

    async def patch_pod_metadata(
        self,
        pod: Pod,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        """Merge-patch labels/annotations (None deletes a key)."""
        ...

    async def delete_pod(self, pod: Pod, *, reason: str) -> None: ...

    async def set_nominated_node_name(self, pod: Pod, node_name: str) -> None:
        """Write ``status.nominatedNodeName`` of a pending pod (``""`` clears it): a merge-patch
        ``{"status": {"nominatedNodeName": ...}}`` on pods/status. A pod that is gone is not an error."""
        ...

    async def patch_object_status(
        self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        """Merge-patch ``status`` (the status subresource) of an object of ``kind``; returns the parsed
        updated object. ``patch`` is the body, e.g. ``{"status": {"phase": "Available"}}``."""
        ...

    async def patch_object(
        self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *, namespace: str = ""
    ) -> Any:
        """Merge-patch the object itself (metadata, spec); returns the parsed updated object."""
        ...

    async def record_event(
        self, kind: ObjectKind | None, name: str, *, namespace: str = "", type: str, reason: str, message: str
    ) -> None:
        """An Event about an object (``kind`` None means a Pod)."""
        ...


class FrameworkHandle(Protocol):
    """What every plugin may use. Koordinator's extended handle adds reservation services to this."""

    @property
    def snapshot(self) -> ClusterSnapshot: ...

    @property
    def cluster(self) -> ClusterClient: ...

    @property
    def clock(self) -> Callable[[], float]:
        """Seconds since the epoch; fixed in ``simulate --now`` and in tests."""
        ...
