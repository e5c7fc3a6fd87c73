"""The two frame layers of an NRI plugin connection, as pure encoders and incremental decoders.

One unix socket carries two logical connections (containerd/nri ``pkg/net/multiplex``): connection 1 is
the plugin service (the runtime calls the plugin), connection 2 the runtime service (the plugin calls the
runtime). Each **mux frame** is ``conn id (uint32 BE) | payload length (uint32 BE) | payload``; the payloads
of one connection, concatenated, are that connection's byte stream.

Each connection's stream carries **ttrpc frames** (containerd/ttrpc ``PROTOCOL.md``): ``data length (uint32
BE) | stream id (uint32 BE) | type (uint8) | flags (uint8) | data``, data at most 4 MiB. Type 1 is a
request (a protobuf ``ttrpc.Request``), 2 a response (``ttrpc.Response``), 3 stream data (unused by NRI).
Client-initiated streams have odd ids.

Nothing here does I/O: bytes in, frames out (and back), so every limit is testable on its own.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

MUX_HEADER = struct.Struct(">II")
TTRPC_HEADER = struct.Struct(">IIBB")

PLUGIN_SERVICE_CONN = 1
"""The runtime is the ttrpc client here, the plugin serves ``nri.pkg.api.v1alpha1.Plugin``."""
RUNTIME_SERVICE_CONN = 2
"""The plugin is the ttrpc client here, the runtime serves ``nri.pkg.api.v1alpha1.Runtime``."""

TTRPC_MAX_DATA = 4 << 20
"""ttrpc's ``messageLengthMax``: a frame announcing more is refused (the peer is broken or hostile)."""
MUX_MAX_PAYLOAD = TTRPC_HEADER.size + TTRPC_MAX_DATA
"""The multiplexer's ``maxPayloadSize``."""
MUX_WRITE_CHUNK = 4096
"""What this side puts in one mux frame at most: containerd's ttrpc reads each connection through a 4 KiB
``bufio.Reader``, and the multiplexer hands it one frame per read, refusing one larger than the read
buffer; frames of at most 4 KiB always fit."""


class FrameError(ValueError):
    """The peer sent something that is not a frame of this protocol; the connection must be dropped."""


class MessageType(IntEnum):
    REQUEST = 1
    RESPONSE = 2
    DATA = 3


@dataclass(frozen=True, slots=True)
class TTRPCFrame:
    stream_id: int
    type: MessageType
    data: bytes
    flags: int = 0


def encode_mux(conn_id: int, payload: bytes, *, chunk: int = MUX_WRITE_CHUNK) -> bytes:
    """``payload`` on connection ``conn_id``, in frames of at most ``chunk`` bytes (one frame when empty)."""
    if not 0 < conn_id <= 0xFFFFFFFF:
        raise ValueError(f"mux connection id {conn_id} out of range (1..2^32-1; 0 is reserved)")
    if chunk <= 0:
        raise ValueError(f"chunk must be > 0, got {chunk}")
    view = memoryview(payload)
    pieces = (view[i : i + chunk] for i in range(0, len(view), chunk))
    parts = [MUX_HEADER.pack(conn_id, len(piece)) + piece for piece in pieces]
    return b"".join(parts) if parts else MUX_HEADER.pack(conn_id, 0)


def encode_ttrpc(frame: TTRPCFrame) -> bytes:
    if len(frame.data) > TTRPC_MAX_DATA:
        raise ValueError(f"ttrpc message of {len(frame.data)} bytes exceeds the {TTRPC_MAX_DATA} byte limit")
    return TTRPC_HEADER.pack(len(frame.data), frame.stream_id, int(frame.type), frame.flags) + frame.data


class MuxDecoder:
    """Splits the socket's bytes into ``(conn id, payload)`` frames; :meth:`feed` returns the complete ones."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buffer += data
        out: list[tuple[int, bytes]] = []
        while len(self._buffer) >= MUX_HEADER.size:
            conn_id, length = MUX_HEADER.unpack_from(self._buffer)
            if length > MUX_MAX_PAYLOAD:
                raise FrameError(f"mux frame of {length} bytes on connection {conn_id} exceeds {MUX_MAX_PAYLOAD}")
            end = MUX_HEADER.size + length
            if len(self._buffer) < end:
                break
            out.append((conn_id, bytes(self._buffer[MUX_HEADER.size : end])))
            del self._buffer[:end]
        return out

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buffer)


class TTRPCDecoder:
    """Splits one logical connection's byte stream into ttrpc frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[TTRPCFrame]:
        self._buffer += data
        out: list[TTRPCFrame] = []
        while len(self._buffer) >= TTRPC_HEADER.size:
            length, stream_id, kind, flags = TTRPC_HEADER.unpack_from(self._buffer)
            if length > TTRPC_MAX_DATA:
                raise FrameError(f"ttrpc message of {length} bytes on stream {stream_id} exceeds {TTRPC_MAX_DATA}")
            try:
                message_type = MessageType(kind)
            except ValueError:
                raise FrameError(f"ttrpc message type {kind} on stream {stream_id} is unknown") from None
            end = TTRPC_HEADER.size + length
            if len(self._buffer) < end:
                break
            out.append(TTRPCFrame(stream_id, message_type, bytes(self._buffer[TTRPC_HEADER.size : end]), flags))
            del self._buffer[:end]
        return out

    @property
    def pending(self) -> int:
        return len(self._buffer)
