"""The NRI multiplexer and ttrpc frames, byte for byte (containerd/nri pkg/net/multiplex, containerd/ttrpc
PROTOCOL.md), and the generated messages against hand-encoded protobuf."""

from __future__ import annotations

import pytest

from koordlet.runtimehooks.nri.framing import (
    MUX_MAX_PAYLOAD,
    TTRPC_MAX_DATA,
    FrameError,
    MessageType,
    MuxDecoder,
    TTRPCDecoder,
    TTRPCFrame,
    encode_mux,
    encode_ttrpc,
)
from koordlet.runtimehooks.nri.proto import api_pb2, ttrpc_pb2


def test_ttrpc_frame_is_length_stream_type_flags_then_data() -> None:
    frame = TTRPCFrame(stream_id=1, type=MessageType.REQUEST, data=b"abc")
    want = b"\x00\x00\x00\x03" + b"\x00\x00\x00\x01" + b"\x01" + b"\x00" + b"abc"
    assert encode_ttrpc(frame) == want
    assert TTRPCDecoder().feed(want) == [frame]


def test_mux_frame_is_conn_id_and_length_then_payload() -> None:
    assert encode_mux(2, b"xyz") == b"\x00\x00\x00\x02\x00\x00\x00\x03xyz"
    assert encode_mux(1, b"") == b"\x00\x00\x00\x01\x00\x00\x00\x00"


def test_mux_splits_writes_into_frames_containerds_4k_reader_accepts() -> None:
    payload = bytes(range(256)) * 20  # 5120 bytes
    wire = encode_mux(1, payload)
    frames = MuxDecoder().feed(wire)
    assert [(conn, len(p)) for conn, p in frames] == [(1, 4096), (1, 1024)]
    assert b"".join(p for _, p in frames) == payload


@pytest.mark.parametrize("conn_id", [pytest.param(0, id="reserved-zero"), pytest.param(1 << 32, id="too-big")])
def test_mux_refuses_connection_ids_outside_its_range(conn_id: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_mux(conn_id, b"x")


def test_decoders_reassemble_frames_fed_one_byte_at_a_time() -> None:
    frames = [TTRPCFrame(3, MessageType.RESPONSE, b"r" * 10), TTRPCFrame(5, MessageType.REQUEST, b"")]
    stream = b"".join(encode_ttrpc(f) for f in frames)
    wire = encode_mux(2, stream[:7]) + encode_mux(1, b"other") + encode_mux(2, stream[7:])
    mux, ttrpc = MuxDecoder(), TTRPCDecoder()
    got: list[TTRPCFrame] = []
    others: list[bytes] = []
    for i in range(len(wire)):
        for conn, payload in mux.feed(wire[i : i + 1]):
            if conn == 2:
                got += ttrpc.feed(payload)
            else:
                others.append(payload)
    assert got == frames
    assert others == [b"other"]
    assert mux.pending == 0 and ttrpc.pending == 0


def test_ttrpc_decoder_refuses_a_length_over_4mib_before_buffering_it() -> None:
    header = (TTRPC_MAX_DATA + 1).to_bytes(4, "big") + (1).to_bytes(4, "big") + b"\x01\x00"
    with pytest.raises(FrameError, match="exceeds"):
        TTRPCDecoder().feed(header)


def test_ttrpc_decoder_refuses_an_unknown_message_type() -> None:
    with pytest.raises(FrameError, match="type 9"):
        TTRPCDecoder().feed(b"\x00\x00\x00\x00\x00\x00\x00\x01\x09\x00")


def test_mux_decoder_refuses_an_oversized_frame() -> None:
    header = (1).to_bytes(4, "big") + (MUX_MAX_PAYLOAD + 1).to_bytes(4, "big")
    with pytest.raises(FrameError, match="exceeds"):
        MuxDecoder().feed(header)


def test_encoder_refuses_a_message_over_the_limit() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        encode_ttrpc(TTRPCFrame(1, MessageType.REQUEST, b"x" * (TTRPC_MAX_DATA + 1)))


def test_generated_ttrpc_request_matches_hand_encoded_protobuf() -> None:
    """Field numbers from containerd/ttrpc request.proto: service=1, method=2, payload=3, timeout_nano=4."""
    request = ttrpc_pb2.Request(service="s", method="m", payload=b"\x01", timeout_nano=2)
    assert request.SerializeToString() == b"\x0a\x01s" + b"\x12\x01m" + b"\x1a\x01\x01" + b"\x20\x02"
    response = ttrpc_pb2.Response.FromString(b"\x0a\x05\x08\x05\x12\x01x")  # status{code=5, message="x"}
    assert (response.status.code, response.status.message) == (5, "x")


def test_generated_nri_adjustment_encodes_cpu_shares_as_an_optional_wrapper() -> None:
    """api.proto: ContainerAdjustment.linux=6 → resources=2 → cpu=2 → shares=1 (OptionalUInt64.value=1)."""
    adjust = api_pb2.ContainerAdjustment()
    adjust.linux.resources.cpu.shares.value = 2
    # 32 08 (linux, 8 bytes) 12 06 (resources) 12 04 (cpu) 0a 02 (shares) 08 02 (value = 2)
    assert adjust.SerializeToString() == bytes.fromhex("3208 1206 1204 0a02 0802")
    assert api_pb2.Field.Value("None") == 0  # a Python keyword, still reachable at run time
