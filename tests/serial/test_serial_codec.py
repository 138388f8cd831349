"""The Python codec of the serial protocol: frames, payloads and the stream
decoder, against hand-built bytes (docs/serial-protocol.md sections 3 and 4)."""
from __future__ import annotations

import random
import struct
import zlib

import pytest
from colibri_tools.protocol import (
    BadFrame,
    ErrorReply,
    ForwardRequest,
    ForwardResult,
    Frame,
    Generated,
    GenerateRequest,
    Info,
    LogitsChunk,
    LogitsRequest,
    Msg,
    PayloadError,
    ResetDone,
    StreamDecoder,
    TextLine,
    VerifyResult,
    collect,
    encode_frame,
)


def test_crc_is_zlib_crc32():
    assert zlib.crc32(b"123456789") == 0xCBF43926


def test_frame_layout_by_hand():
    frame = encode_frame(Msg.FORWARD, 7, b"\x01\x02\x03")
    body = bytes([0x03, 7, 3, 0, 1, 2, 3])
    assert frame == b"\xC0\x1B" + body + struct.pack("<I", zlib.crc32(body))
    assert len(encode_frame(Msg.HELLO, 1)) == 10


def test_payload_limit():
    assert len(encode_frame(Msg.ERROR, 1, bytes(4096))) == 4106
    with pytest.raises(PayloadError):
        encode_frame(Msg.ERROR, 1, bytes(4097))


PAYLOADS = [
    Info(1, 4096, 0, 0x852F7291, 0, 97, 64, 3, 2, 5, 3, 1, 3, (0, 1, 0), 1, "qemu_virt_a72",
         "instructions (qemu -icount shift=0)"),
    ResetDone(0, 0),
    ForwardRequest((1, 2, -3, 96), True, 5, True),
    ForwardResult(0, 4, 123456789012, 0xDEADBEEF, 97, 2048, 1, ((3, 1.5), (9, -0.25))),
    LogitsRequest(1020, 1020),
    LogitsChunk(0, 97, struct.pack("<3f", 1.0, -2.5, 3.25)),
    GenerateRequest((1, 2, 3), 8),
    Generated(12, 20, 1000, 400, 75, (5, 6, 7)),
    VerifyResult(5, 17, 99),
    ErrorReply(3, 0x42, "unknown message type"),
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_payload_round_trip_through_frames(payload):
    frame = encode_frame(0x83, 200, payload.pack())
    [event] = StreamDecoder().feed(frame)
    assert isinstance(event, Frame) and event.seq == 200
    assert type(payload).unpack(event.payload) == payload


def test_info_layout_offsets():
    raw = PAYLOADS[0].pack()
    assert len(raw) == 52 + 1 + 13 + 1 + 35
    assert struct.unpack_from("<I", raw, 8)[0] == 0x852F7291
    assert raw[52] == 13 and raw[53:66] == b"qemu_virt_a72"


def test_truncated_payloads_are_refused():
    for payload in PAYLOADS:
        raw = payload.pack()
        with pytest.raises(PayloadError):
            type(payload).unpack(raw[:-1] if len(raw) > 4 else b"")


def test_forward_request_limits():
    with pytest.raises(PayloadError):
        ForwardRequest(tuple(range(1001))).pack()
    with pytest.raises(PayloadError):
        ForwardRequest((1,), top_k=33).pack()
    assert len(ForwardRequest(tuple(range(1000))).pack()) == 4004


def test_decoder_skips_garbage_and_reads_split_frames():
    frame = encode_frame(Msg.INFO, 9, PAYLOADS[0].pack())
    stream = b"\x00\xFF\x1B\xC0\x00" + frame + b"\x80\x81" + frame
    decoder = StreamDecoder()
    events = []
    for i in range(len(stream)):  # one byte at a time
        events += decoder.feed(stream[i:i + 1])
    frames = collect(events, Frame)
    assert [f.seq for f in frames] == [9, 9]
    assert Info.unpack(frames[1].payload) == PAYLOADS[0]
    assert decoder.skipped >= 6


def test_decoder_resyncs_inside_a_bad_frame():
    good = encode_frame(Msg.RESULT, 4, PAYLOADS[3].pack())
    broken = bytearray(encode_frame(Msg.RESULT, 3, bytes(40)))
    broken[12] ^= 1
    events = StreamDecoder().feed(bytes(broken[:-2]) + good)  # the bad frame swallows `good`...
    assert collect(events, BadFrame)
    assert [f.seq for f in collect(events, Frame)] == [4]      # ...which is found again


def test_decoder_oversize_length_drops_only_the_sync_byte():
    good = encode_frame(Msg.HELLO, 5)
    events = StreamDecoder().feed(b"\xC0\x1B\x01\x01\xFF\xFF" + good)
    assert "length 65535" in collect(events, BadFrame)[0].reason
    assert collect(events, Frame) == [Frame(Msg.HELLO, 5, b"")]


def test_decoder_text_lines_and_frames_interleave():
    hello = encode_frame(Msg.HELLO, 1)
    events = StreamDecoder().feed(b"ok: fine\r\n" + hello + b"tokens: 1 2\r\nhalf" + hello)
    assert [type(e) for e in events] == [TextLine, Frame, TextLine, TextLine, Frame]
    assert [e.text for e in collect(events, TextLine)] == ["ok: fine", "tokens: 1 2", "half"]


def test_decoder_survives_random_bytes():
    rng = random.Random(7)
    good = encode_frame(Msg.VERIFY_RESULT, 77, PAYLOADS[8].pack())
    noise = bytes(rng.randrange(256) for _ in range(20000))
    events = StreamDecoder().feed(noise + good)
    assert collect(events, Frame)[-1] == Frame(Msg.VERIFY_RESULT, 77, PAYLOADS[8].pack())
