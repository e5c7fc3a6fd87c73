"""The runtime's side of NRI for tests: a unix socket koordlet's plugin dials, speaking the same multiplexed
ttrpc with the roles swapped (it serves ``Runtime`` on connection 2 and calls ``Plugin`` on connection 1),
as containerd/nri's ``pkg/adaptation`` does."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from koordlet.runtimehooks.nri.framing import PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN
from koordlet.runtimehooks.nri.plugin import PLUGIN_SERVICE, RUNTIME_SERVICE
from koordlet.runtimehooks.nri.proto import api_pb2
from koordlet.runtimehooks.nri.ttrpc import CODE_UNIMPLEMENTED, MuxedTTRPC, RPCError

TIMEOUT = 5.0


class FakeRuntime:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        self.listener.settimeout(TIMEOUT)
        self.registered = threading.Event()
        self.registration: api_pb2.RegisterPluginRequest | None = None
        self.conn: MuxedTTRPC | None = None

    def _serve(self, service: str, method: str, payload: bytes) -> bytes:
        if service == RUNTIME_SERVICE and method == "RegisterPlugin":
            self.registration = api_pb2.RegisterPluginRequest.FromString(payload)
            self.registered.set()
            return api_pb2.Empty().SerializeToString()
        raise RPCError(CODE_UNIMPLEMENTED, f"{service}/{method}")

    def accept(self) -> api_pb2.ConfigureResponse:
        """Take the plugin's connection, wait for it to register, configure it; its answer."""
        sock, _ = self.listener.accept()
        sock.settimeout(None)
        self.registered.clear()
        self.conn = MuxedTTRPC(sock, self._serve, serve_conn=RUNTIME_SERVICE_CONN, call_conn=PLUGIN_SERVICE_CONN)
        self.conn.start()
        assert self.registered.wait(TIMEOUT), "the plugin did not register"
        request = api_pb2.ConfigureRequest(
            runtime_name="fake", runtime_version="v0", request_timeout=2000, NRI_version="v0.12.3"
        )
        return api_pb2.ConfigureResponse.FromString(self.call("Configure", request))

    def call(self, method: str, request: object, *, timeout: float = TIMEOUT) -> bytes:
        assert self.conn is not None
        return self.conn.call(PLUGIN_SERVICE, method, request.SerializeToString(), timeout=timeout)  # type: ignore[attr-defined]

    def synchronize(self, pods: list[api_pb2.PodSandbox], containers: list[api_pb2.Container]) -> None:
        """Split in two messages (``more``), as the runtime does for a large state."""
        first = api_pb2.SynchronizeRequest(pods=pods[:1], containers=containers[:1], more=True)
        assert api_pb2.SynchronizeResponse.FromString(self.call("Synchronize", first)).more
        rest = api_pb2.SynchronizeRequest(pods=pods[1:], containers=containers[1:], more=False)
        assert not api_pb2.SynchronizeResponse.FromString(self.call("Synchronize", rest)).update

    def run_pod_sandbox(self, pod: api_pb2.PodSandbox) -> None:
        self.call("RunPodSandbox", api_pb2.RunPodSandboxRequest(pod=pod))

    def create_container(
        self, pod: api_pb2.PodSandbox, container: api_pb2.Container
    ) -> api_pb2.CreateContainerResponse:
        request = api_pb2.CreateContainerRequest(pod=pod, container=container)
        return api_pb2.CreateContainerResponse.FromString(self.call("CreateContainer", request))

    def update_container(
        self, pod: api_pb2.PodSandbox, container: api_pb2.Container, resources: api_pb2.LinuxResources
    ) -> api_pb2.UpdateContainerResponse:
        request = api_pb2.UpdateContainerRequest(pod=pod, container=container, linux_resources=resources)
        return api_pb2.UpdateContainerResponse.FromString(self.call("UpdateContainer", request))

    def drop(self) -> None:
        """Close the plugin's connection (the runtime restarted)."""
        if self.conn is not None:
            self.conn.close("fake runtime restart")

    def close(self) -> None:
        self.drop()
        self.listener.close()
