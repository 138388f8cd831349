"""The host client against devices that misbehave: silent, absent, chatty,
slow, or hanging up mid-reply. Every wait must end within its timeout with an
error that names the port."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from colibri_tools.protocol import (
    DeviceTimeout,
    Frame,
    Info,
    Msg,
    PayloadError,
    SerialClient,
    SerialProtocolError,
    StreamDecoder,
    encode_frame,
)

INFO = Info(1, 4096, 0, 0x1234ABCD, 0, 97, 64, 0, 2, 5, 3, 1, 1, (0, 1, 0), 1, "fake", "ticks")


class FakeDevice:
    """A TCP server that runs `behave(conn)` for each client, in a thread."""

    def __init__(self, behave) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.server.getsockname()[1]}"
        self.behave = behave
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn:
            self.behave(conn)

    def close(self) -> None:
        self.server.close()


def read_request(conn: socket.socket) -> Frame:
    decoder = StreamDecoder()
    while True:
        data = conn.recv(4096)
        if not data:
            raise ConnectionError("client went away")
        for event in decoder.feed(data):
            if isinstance(event, Frame):
                return event


@pytest.fixture
def fake():
    devices = []

    def start(behave) -> FakeDevice:
        devices.append(FakeDevice(behave))
        return devices[-1]

    yield start
    for d in devices:
        d.close()


def test_device_that_never_answers(fake):
    device = fake(lambda conn: time.sleep(3))
    with SerialClient.open(device.url, timeout=0.5) as client:
        start = time.monotonic()
        with pytest.raises(DeviceTimeout) as info:
            client.hello()
        elapsed = time.monotonic() - start
    assert 0.45 < elapsed < 2.5  # generous: the machine may be loaded
    message = str(info.value)
    assert device.url in message and "no reply to HELLO within 0.5 s" in message


def test_connect_gives_up_within_its_timeout(fake):
    device = fake(lambda conn: time.sleep(3))
    with SerialClient.open(device.url, timeout=5) as client:
        start = time.monotonic()
        with pytest.raises(DeviceTimeout, match="no INFO reply to HELLO within 1 s"):
            client.connect(timeout=1.0, attempt=0.3)
        assert time.monotonic() - start < 3.0


def test_nothing_listening():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]  # closed again: nothing listens there
    start = time.monotonic()
    with pytest.raises(SerialProtocolError, match="cannot open the port") as info:
        SerialClient.open(f"socket://127.0.0.1:{port}", connect_timeout=0.5)
    assert time.monotonic() - start < 3
    assert str(port) in str(info.value)


def test_missing_device_path():
    with pytest.raises(SerialProtocolError, match="/dev/ttyCOLIBRI_NONE"):
        SerialClient.open("/dev/ttyCOLIBRI_NONE")


def test_a_pty_whose_device_died_is_an_error_naming_it():
    """The other end of a pseudo-terminal gone (a native_sim board killed,
    a USB serial adapter pulled): tcdrain fails with termios.error, which
    must come out as the client's error, naming the port."""
    master, slave = os.openpty()
    name = os.ttyname(slave)
    client = SerialClient.open(name, timeout=1)
    os.close(master)
    os.close(slave)
    with pytest.raises(SerialProtocolError, match=f"{name}: the port failed while writing"):
        client.send_raw(b"")
    client.close()


def test_chatty_slow_device_with_stale_replies(fake):
    def behave(conn):
        request = read_request(conn)
        reply = encode_frame(Msg.INFO, request.seq, INFO.pack())
        conn.sendall(b"boot banner\r\n\x00\xff garbage \xc0\x1b\x83")           # text, junk
        conn.sendall(encode_frame(Msg.INFO, (request.seq + 100) % 256, b"x"))  # stale seq
        conn.sendall(encode_frame(Msg.RESULT, request.seq, b"")[:-1] + b"\x00")  # bad CRC
        for i in range(0, len(reply), 5):                                     # slow, split
            conn.sendall(reply[i:i + 5])
            time.sleep(0.01)
        time.sleep(1)

    device = fake(behave)
    with SerialClient.open(device.url, timeout=3) as client:
        assert client.hello() == INFO
        assert "boot banner" in client.text_log


def test_device_hangs_up_mid_reply(fake):
    def behave(conn):
        request = read_request(conn)
        conn.sendall(encode_frame(Msg.INFO, request.seq, INFO.pack())[:20])

    device = fake(behave)
    with SerialClient.open(device.url, timeout=3) as client:
        start = time.monotonic()
        with pytest.raises(SerialProtocolError, match="port failed while reading"):
            client.hello()
        assert time.monotonic() - start < 3


def test_error_reply_becomes_device_error(fake):
    from colibri_tools.protocol import DeviceError, ErrorReply

    def behave(conn):
        request = read_request(conn)
        conn.sendall(encode_frame(Msg.ERROR, request.seq, ErrorReply(3, 1, "nope").pack()))
        time.sleep(0.5)

    device = fake(behave)
    with SerialClient.open(device.url, timeout=3) as client:
        with pytest.raises(DeviceError, match="device refused HELLO: ERROR UNKNOWN_TYPE") as info:
            client.hello()
        assert info.value.code == 3


def test_line_mode_timeout(fake):
    device = fake(lambda conn: (conn.recv(100), conn.sendall(b"tokens: 1 2\r\n"), time.sleep(2)))
    with SerialClient.open(device.url, timeout=0.4) as client:
        with pytest.raises(DeviceTimeout, match="no 'ok' or 'error' line"):
            client.command("gen 1 / 2")


def _logits_device(totals):
    """HELLO -> INFO (vocab 97); each GET_LOGITS -> one logit and the next of totals."""
    from colibri_tools.protocol import LogitsChunk, LogitsRequest

    def behave(conn):
        replies = iter(totals)
        while True:
            try:
                request = read_request(conn)
            except ConnectionError:
                return
            if request.type == Msg.HELLO:
                conn.sendall(encode_frame(Msg.INFO, request.seq, INFO.pack()))
            else:
                offset = LogitsRequest.unpack(request.payload).offset
                chunk = LogitsChunk(offset, next(replies), b"\0\0\x80\x3f")
                conn.sendall(encode_frame(Msg.LOGITS, request.seq, chunk.pack()))
    return behave


def test_logits_total_beyond_the_vocabulary_is_refused(fake):
    device = fake(_logits_device([2**32 - 1] * 10))
    with SerialClient.open(device.url, timeout=3) as client:
        client.connect()
        started = time.monotonic()
        with pytest.raises(SerialProtocolError, match=r"announces 4294967295 logits, more than "
                                                      r"the vocabulary of 97") as info:
            client.read_logits()
        assert time.monotonic() - started < 1.0
        assert device.url in str(info.value)


def test_logits_total_that_changes_is_refused(fake):
    device = fake(_logits_device([3, 5, 5]))
    with SerialClient.open(device.url, timeout=3) as client:
        client.connect()
        with pytest.raises(SerialProtocolError, match="total changed from 3 to 5"):
            client.read_logits()


def test_flood_of_garbage_keeps_the_timeout(fake):
    """A device that sends garbage as fast as it can (text lines, bad frames,
    stale replies) cannot hold the client past its timeout by more than a
    read slice and one bounded chunk of decoding (issue 13, item 3)."""
    junk = (b"noise \xc0\x1b line\r\n" + encode_frame(Msg.INFO, 250, b"stale") +
            encode_frame(Msg.RESULT, 1, b"")[:-1] + b"\x00") * 4000

    def behave(conn):
        read_request(conn)
        end = time.monotonic() + 6
        while time.monotonic() < end:
            try:
                conn.sendall(junk)
            except OSError:
                return

    device = fake(behave)
    with SerialClient.open(device.url, timeout=2.0) as client:
        start = time.monotonic()
        with pytest.raises(DeviceTimeout) as info:
            client.hello()
        elapsed = time.monotonic() - start
    assert 1.95 < elapsed < 2.7, elapsed  # (the bug it guards against overran by 1.55 s)
    assert device.url in str(info.value)



@pytest.mark.parametrize("type_, payload, ask, needle", [
    (Msg.INFO, b"\x01\x00short", "hello", "INFO payload has 7 bytes"),
    (Msg.ERROR, b"\x03", "hello", "ERROR payload has 1 bytes"),
    (Msg.SLOT_STATE, bytes(10), "slot_state", "SLOT_STATE payload has 10 bytes"),
    (Msg.SLOT_WRITTEN, bytes(3), "slot_write", "SLOT_WRITTEN payload has 3 bytes"),
])
def test_payload_errors_name_the_port(fake, type_, payload, ask, needle):
    """A reply whose payload does not decode names the port, as a timeout
    does (issue 25): "socket://HOST:PORT: INFO payload has ...". """
    def behave(conn):
        request = read_request(conn)
        conn.sendall(encode_frame(type_, request.seq, payload))
        time.sleep(1)

    device = fake(behave)
    with SerialClient.open(device.url, timeout=3) as client:
        call = {"hello": client.hello, "slot_state": client.slot_state,
                "slot_write": lambda: client.slot_write(0, b"x")}[ask]
        with pytest.raises(PayloadError, match=needle) as info:
            call()
        with pytest.raises(PayloadError, match="5000 bytes is above 4096") as too_big:
            client.transact(Msg.SLOT_WRITE, bytes(5000))
    assert str(info.value).startswith(f"{device.url}: "), str(info.value)
    assert str(too_big.value).startswith(f"{device.url}: "), str(too_big.value)
