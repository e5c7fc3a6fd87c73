"""DefaultBinder binds through the injected cluster client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.core.types import ObjectMeta, Pod
from koord_scheduler.framework.cycle_state import CycleState
from koord_scheduler.framework.errors import ClusterError
from koord_scheduler.framework.status import Code, Status
from koord_scheduler.plugins.defaultbinder import plugin as defaultbinder
from tests.fwtest import FakeHandle, make_snapshot


@dataclass
class RecordingCluster:
    """A ClusterClient that records binds and can be told to fail."""

    fail_with: str = ""
    binds: list[tuple[str, str]] = field(default_factory=list)

    async def bind(self, pod: Pod, node_name: str) -> None:
        if self.fail_with:
            raise ClusterError(self.fail_with)
        self.binds.append((pod.key, node_name))

    async def patch_pod_metadata(
        self,
        pod: Pod,
        *,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> None:
        raise AssertionError("DefaultBinder must not patch")

    async def delete_pod(self, pod: Pod, *, reason: str) -> None:
        raise AssertionError("DefaultBinder must not delete")


POD = Pod(ObjectMeta("web-0", "shop", uid="uid-1"))


async def test_bind_calls_cluster() -> None:
    cluster = RecordingCluster()
    binder = defaultbinder.new(None, FakeHandle(make_snapshot([]), cluster=cluster))
    status = await binder.bind(CycleState(), POD, "node-1")
    assert (status, cluster.binds) == (Status(), [("shop/web-0", "node-1")])


async def test_cluster_error_becomes_error_status() -> None:
    cluster = RecordingCluster(fail_with='pods "web-0" not found')
    binder = defaultbinder.new(None, FakeHandle(make_snapshot([]), cluster=cluster))
    status = await binder.bind(CycleState(), POD, "node-1")
    assert status == Status(Code.ERROR, ('pods "web-0" not found',))
    assert cluster.binds == []
