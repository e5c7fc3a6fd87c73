"""ttrpc over the NRI multiplexer on one unix socket: serve the plugin service, call the runtime service.

A plain thread reads the socket (not koordlet's event loop: a long strategy tick there must not delay a
container's creation). Requests on connection 1 are handed to ``handler`` in that thread and answered on the
same stream; calls this side makes go out on connection 2 with odd stream ids and wait for their response.
Only unary calls exist in NRI; stream data frames are refused as a protocol error.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from koordlet.runtimehooks.nri.framing import (
    PLUGIN_SERVICE_CONN,
    RUNTIME_SERVICE_CONN,
    FrameError,
    MessageType,
    MuxDecoder,
    TTRPCDecoder,
    TTRPCFrame,
    encode_mux,
    encode_ttrpc,
)
from koordlet.runtimehooks.nri.proto import ttrpc_pb2

log = logging.getLogger("koordlet.nri")

CODE_OK = 0
CODE_UNKNOWN = 2
CODE_UNIMPLEMENTED = 12
READ_SIZE = 1 << 16


class RPCError(Exception):
    """A call answered with a non-OK status, or a request this side cannot serve (gRPC code and message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"code {code}: {message}")
        self.code = code
        self.message = message


class ConnectionClosedError(ConnectionError):
    """The socket closed (or broke) before the call was answered."""


Handler = Callable[[str, str, bytes], bytes]
"""``(service, method, request payload) -> response payload``; raise :class:`RPCError` for an error status."""


@dataclass(slots=True)
class _Pending:
    done: threading.Event
    response: ttrpc_pb2.Response | None = None


class MuxedTTRPC:
    """One plugin connection. :meth:`start` the reader, :meth:`call` the runtime, :meth:`close` when done;
    ``closed`` is set once the socket is gone (either side)."""

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler,
        *,
        serve_conn: int = PLUGIN_SERVICE_CONN,
        call_conn: int = RUNTIME_SERVICE_CONN,
    ) -> None:
        """``serve_conn``/``call_conn``: the plugin's roles by default; a test's fake runtime swaps them."""
        if serve_conn == call_conn:
            raise ValueError("serve_conn and call_conn must differ")
        self.sock = sock
        self.handler = handler
        self.serve_conn = serve_conn
        self.call_conn = call_conn
        self.closed = threading.Event()
        self.close_reason = ""
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()
        self._next_stream = 1
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        self._reader = threading.Thread(target=self._read_loop, name="nri-ttrpc", daemon=True)
        self._reader.start()

    def close(self, reason: str = "closed by koordlet") -> None:
        if not self.close_reason:
            self.close_reason = reason
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()
        self._closed()

    def join(self, timeout: float | None = None) -> None:
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout)

    def _closed(self) -> None:
        self.closed.set()
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.done.set()

    # -- calls to the runtime -----------------------------------------------------------------

    def call(self, service: str, method: str, payload: bytes, *, timeout: float) -> bytes:
        """A unary call on the runtime service connection; the response payload. Raises :class:`RPCError`
        on an error status, :class:`ConnectionClosedError` if the socket goes, ``TimeoutError`` after ``timeout``."""
        request = ttrpc_pb2.Request(
            service=service, method=method, payload=payload, timeout_nano=int(timeout * 1_000_000_000)
        )
        waiter = _Pending(threading.Event())
        with self._pending_lock:
            if self.closed.is_set():
                raise ConnectionClosedError(self.close_reason or "connection closed")
            stream_id = self._next_stream
            self._next_stream += 2
            self._pending[stream_id] = waiter
        try:
            self._send(self.call_conn, TTRPCFrame(stream_id, MessageType.REQUEST, request.SerializeToString()))
            if not waiter.done.wait(timeout):
                raise TimeoutError(f"{service}/{method}: no answer within {timeout:g}s")
        finally:
            with self._pending_lock:
                self._pending.pop(stream_id, None)
        response = waiter.response
        if response is None:
            raise ConnectionClosedError(self.close_reason or "connection closed")
        if response.status.code != CODE_OK:
            raise RPCError(response.status.code, response.status.message)
        return response.payload

    def _send(self, conn_id: int, frame: TTRPCFrame) -> None:
        data = encode_mux(conn_id, encode_ttrpc(frame))
        with self._write_lock:
            try:
                self.sock.sendall(data)
            except OSError as err:
                self.close(f"write failed: {err}")
                raise ConnectionClosedError(self.close_reason) from err

    # -- the reader ---------------------------------------------------------------------------

    def _read_loop(self) -> None:
        mux = MuxDecoder()
        streams = {self.serve_conn: TTRPCDecoder(), self.call_conn: TTRPCDecoder()}
        try:
            while True:
                try:
                    data = self.sock.recv(READ_SIZE)
                except OSError as err:
                    if not self.close_reason:
                        self.close_reason = f"read failed: {err}"
                    return
                if not data:
                    if not self.close_reason:
                        self.close_reason = "the runtime closed the connection"
                    return
                for conn_id, payload in mux.feed(data):
                    decoder = streams.get(conn_id)
                    if decoder is None:
                        continue  # a connection nobody opened here (the Go multiplexer drops those too)
                    for frame in decoder.feed(payload):
                        self._dispatch(conn_id, frame)
        except (FrameError, RPCError, ConnectionClosedError) as err:
            if not self.close_reason:
                self.close_reason = f"protocol error: {err}"
        finally:
            self.close(self.close_reason or "reader stopped")

    def _dispatch(self, conn_id: int, frame: TTRPCFrame) -> None:
        if conn_id == self.call_conn:
            if frame.type is not MessageType.RESPONSE:
                raise FrameError(f"{frame.type.name} frame on connection {conn_id}, where this side calls")
            response = ttrpc_pb2.Response()
            response.ParseFromString(frame.data)
            with self._pending_lock:
                waiter = self._pending.get(frame.stream_id)
            if waiter is not None:
                waiter.response = response
                waiter.done.set()
            return
        if frame.type is not MessageType.REQUEST:
            raise FrameError(f"{frame.type.name} frame on connection {conn_id}, where this side serves (unary calls)")
        request = ttrpc_pb2.Request()
        request.ParseFromString(frame.data)
        try:
            payload = self.handler(request.service, request.method, request.payload)
            status = ttrpc_pb2.Status(code=CODE_OK)
        except RPCError as err:
            payload, status = b"", ttrpc_pb2.Status(code=err.code, message=err.message)
        except Exception as err:  # the handler's bug must not take the connection down
            log.warning("NRI %s/%s failed: %s: %s", request.service, request.method, type(err).__name__, err)
            payload, status = b"", ttrpc_pb2.Status(code=CODE_UNKNOWN, message=f"{type(err).__name__}: {err}")
        response = ttrpc_pb2.Response(status=status, payload=payload)
        self._send(self.serve_conn, TTRPCFrame(frame.stream_id, MessageType.RESPONSE, response.SerializeToString()))
