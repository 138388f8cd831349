"""The C side of the protocol (ports/serial, in the Linux serial_runner built
with ASan + UBSan) under hostile input: every bad frame gets an ERROR reply,
nothing hangs, and the runner keeps serving. The runner's stderr is checked
for sanitizer reports when the module ends (conftest.py)."""
from __future__ import annotations

import random
import struct
import time
import zlib

import pytest
from colibri_tools.protocol import (
    DeviceError,
    ErrorCode,
    ErrorReply,
    Frame,
    Msg,
    StreamDecoder,
    TextLine,
    collect,
    encode_frame,
)


def raw_frame(type_: int, seq: int, payload: bytes, length: int | None = None) -> bytes:
    """A frame with a good CRC, and optionally a length field that lies."""
    head = struct.pack("<BBH", type_, seq, len(payload) if length is None else length)
    return b"\xC0\x1B" + head + payload + struct.pack("<I", zlib.crc32(head + payload))


def next_frame(client, seconds: float = 2.0) -> Frame:
    deadline = time.monotonic() + seconds
    while (event := client.next_event(deadline)) is not None:
        if isinstance(event, Frame):
            return event
    raise AssertionError(f"no frame within {seconds} s")


def expect_error(client, code: ErrorCode, seq: int, seconds: float = 2.0) -> ErrorReply:
    frame = next_frame(client, seconds)
    assert frame.type == Msg.ERROR and frame.seq == seq, frame
    reply = ErrorReply.unpack(frame.payload)
    assert reply.code == code, reply
    return reply


def assert_still_serving(client) -> None:
    info = client.hello(timeout=2.0)
    assert info.init_status == 0 and info.vocab_size == 97


def test_info_from_the_c_side(client):
    info = client.info
    assert (info.protocol, info.max_payload, info.vocab_size, info.n_layers) == (1, 4096, 97, 2)
    assert (info.n_experts, info.top_k, info.arch, info.format_major) == (5, 3, 1, 1)
    assert info.board == "test-board" and "CLOCK_MONOTONIC" in info.tick_unit
    assert info.ticks_measured and info.can_interrupt and info.context == 128


def test_garbage_then_a_request(client):
    rng = random.Random(1)
    client.send_raw(bytes(rng.randrange(256) for _ in range(3000)))
    client.drain(0.4)
    assert client.connect(timeout=8.0, attempt=0.6).vocab_size == 97


def test_bad_crc(client):
    frame = bytearray(encode_frame(Msg.HELLO, 33))
    frame[-1] ^= 0x80
    client.send_raw(bytes(frame))
    reply = expect_error(client, ErrorCode.BAD_CRC, 33)
    assert reply.request_type == Msg.HELLO and "CRC" in reply.text
    assert_still_serving(client)


def test_length_65535(client):
    client.send_raw(b"\xC0\x1B\x01\x2A\xFF\xFF" + bytes(100))
    expect_error(client, ErrorCode.TOO_LONG, 0x2A)
    assert_still_serving(client)


@pytest.mark.parametrize("type_", [0x00, 0x0B, 0x42, Msg.INFO, Msg.RESULT, Msg.ERROR])
def test_unknown_type(client, type_):
    client.send_raw(encode_frame(type_, 9, b"abc"))
    assert expect_error(client, ErrorCode.UNKNOWN_TYPE, 9).request_type == type_
    assert_still_serving(client)


def test_frame_cut_midway_then_silence(client):
    frame = encode_frame(Msg.FORWARD, 61, struct.pack("<BBHi", 1, 0, 1, 5))
    start = time.monotonic()
    client.send_raw(frame[:9])
    reply = expect_error(client, ErrorCode.TIMEOUT, 61)
    assert 0.15 < time.monotonic() - start < 3.0, "inter-byte timeout is 200 ms"
    assert "cut short" in reply.text
    assert_still_serving(client)


def test_header_cut_then_silence(client):
    client.send_raw(b"\xC0\x1B\x03")
    expect_error(client, ErrorCode.TIMEOUT, 0)
    assert_still_serving(client)


def test_lone_sync_byte_is_dropped_silently(client):
    client.send_raw(b"\xC0")
    time.sleep(0.3)
    assert_still_serving(client)


def test_frame_sent_byte_by_byte(client):
    frame = encode_frame(Msg.HELLO, 77)
    for i in range(len(frame)):
        client.send_raw(frame[i:i + 1])
        time.sleep(0.01)
    reply = next_frame(client)
    assert (reply.type, reply.seq) == (Msg.INFO, 77)


def test_double_sync_still_starts_a_frame(client):
    client.send_raw(b"\xC0" + encode_frame(Msg.HELLO, 78))
    reply = next_frame(client)
    assert (reply.type, reply.seq) == (Msg.INFO, 78)


BAD_PAYLOADS = {
    "forward_short": (Msg.FORWARD, b"\x01\x00"),
    "forward_length_lies": (Msg.FORWARD, struct.pack("<BBH3i", 1, 0, 4, 1, 2, 3)),
    "forward_1001_ids": (Msg.FORWARD, struct.pack("<BBH", 1, 0, 1001) + bytes(4004)),
    "forward_unknown_flag": (Msg.FORWARD, struct.pack("<BBHi", 0x81, 0, 1, 1)),
    "forward_top_k_33": (Msg.FORWARD, struct.pack("<BBHi", 1, 33, 1, 1)),
    "generate_1001_tokens": (Msg.GENERATE, struct.pack("<HHi", 1001, 1, 1)),
    "get_logits_length": (Msg.GET_LOGITS, b"\x00\x00\x00\x00"),
    "reset_with_payload": (Msg.RESET, b"x"),
    "verify_with_payload": (Msg.VERIFY, b"xy"),
}


@pytest.mark.parametrize("name", BAD_PAYLOADS)
def test_bad_payload(client, name):
    type_, payload = BAD_PAYLOADS[name]
    with pytest.raises(DeviceError) as info:
        client.transact(type_, payload)
    assert info.value.code == ErrorCode.BAD_PAYLOAD
    assert_still_serving(client)


def test_get_logits_without_logits(client):
    client.reset()
    with pytest.raises(DeviceError) as info:
        client.get_logits(0, 10)
    assert info.value.code == ErrorCode.NO_LOGITS
    client.forward([1, 2], logits=False)
    with pytest.raises(DeviceError):
        client.get_logits(0, 10)


def test_get_logits_bounds(client):
    client.reset()
    client.forward([1, 2, 3])
    assert client.get_logits(90, 1020).count == 7
    assert client.get_logits(97, 5).count == 0
    with pytest.raises(DeviceError) as info:
        client.get_logits(98, 1)
    assert info.value.code == ErrorCode.BAD_PAYLOAD
    with pytest.raises(DeviceError):
        client.get_logits(0, 1021)


def test_colibri_statuses_travel_as_numbers(client):
    client.reset()
    assert client.forward([1, 97]).status == 11        # COLIBRI_E_TOKEN_OUT_OF_RANGE
    assert client.forward([-1]).status == 11
    assert client.forward([]).status == 1              # COLIBRI_E_BAD_ARGUMENT
    result = client.forward(list(range(97)) + list(range(32)))   # 129 ids > context 128
    assert result.status == 12 and result.position == 0          # refused: nothing changed
    assert client.forward([1, 2]).position == 2
    generated = client.generate([3], 200)                        # runs out of context
    assert generated.status == 12 and generated.position == 128
    assert len(generated.tokens) == 126


def test_replies_keep_request_order_and_seq(client):
    frames = b"".join(encode_frame(Msg.HELLO, seq) for seq in (101, 102, 103))
    client.send_raw(frames)
    assert [next_frame(client).seq for _ in range(3)] == [101, 102, 103]


def test_mutated_frames_never_stop_the_runner(client):
    rng = random.Random(11)
    valid = [encode_frame(Msg.FORWARD, 5, struct.pack("<BBH2i", 1, 3, 2, 1, 2)),
             encode_frame(Msg.GENERATE, 6, struct.pack("<HH2i", 3, 2, 4, 5)),
             encode_frame(Msg.GET_LOGITS, 7, struct.pack("<IH", 0, 50)),
             encode_frame(Msg.HELLO, 8), b"gen 1 2 / 3\r\n", b"info\r\n"]
    blob = bytearray()
    for _ in range(300):
        piece = bytearray(rng.choice(valid))
        for _ in range(rng.randrange(3)):
            piece[rng.randrange(len(piece))] ^= 1 << rng.randrange(8)
        if rng.random() < 0.2:
            piece = piece[:rng.randrange(1, len(piece))]
        blob += piece
    client.send_raw(bytes(blob))
    client.drain(0.6)
    client.reset()
    assert client.connect(timeout=8.0, attempt=0.6).vocab_size == 97


def test_frames_and_lines_follow_each_other(client):
    client.send_raw(b"reset\r\n" + encode_frame(Msg.HELLO, 90) + b"info\n" +
                    encode_frame(Msg.VERIFY, 91) + b"hel" + encode_frame(Msg.HELLO, 92))
    deadline = time.monotonic() + 3
    events = []
    while len(collect(events, Frame)) < 3 and (e := client.next_event(deadline)) is not None:
        events.append(e)
    assert [(f.type, f.seq) for f in collect(events, Frame)] == [
        (Msg.INFO, 90), (Msg.VERIFY_RESULT, 91), (Msg.INFO, 92)]
    texts = [t.text for t in collect(events, TextLine)]
    assert texts[0] == "ok: position 0" and "board: test-board" in texts
    assert not any("unknown command" in t for t in texts)  # "hel" was abandoned silently


def test_python_decoder_reads_the_c_frames_split_anywhere(client):
    client.send_raw(encode_frame(Msg.FORWARD, 3, struct.pack("<BBH3i", 1, 32, 3, 1, 2, 3)))
    raw = b""
    deadline = time.monotonic() + 2
    while len(raw) < 32 + 8 * 32 + 10 and time.monotonic() < deadline:
        raw += client._read_some()
    decoder = StreamDecoder()
    events = [e for i in range(0, len(raw), 7) for e in decoder.feed(raw[i:i + 7])]
    [frame] = collect(events, Frame)
    assert frame.type == Msg.RESULT and len(frame.payload) == 32 + 8 * 32


def test_an_idle_client_does_not_block_the_next_one(start_runner, tiny):
    """A client that connects and says nothing is disconnected after
    --idle-timeout seconds; the client waiting behind it is then served."""
    import socket

    from colibri_tools.protocol import SerialClient

    r = start_runner(tiny["image"], "--idle-timeout", "1")
    idle = socket.create_connection(("127.0.0.1", r.port))
    try:
        started = time.monotonic()
        with SerialClient.open(r.url, timeout=10) as second:
            info = second.connect()
        assert info.vocab_size > 0
        assert 0.8 < time.monotonic() - started < 6
        assert "closing a connection idle for 1 s" in r.stderr()
    finally:
        idle.close()
