"""The Colibri serial protocol, host side (docs/serial-protocol.md is the spec).

Three layers, each usable alone:

* frames: :func:`encode_frame` and :class:`StreamDecoder`, which turns received
  bytes into :class:`Frame`, :class:`TextLine` and :class:`BadFrame` events,
  skipping garbage and resynchronising on the sync bytes;
* payloads: one dataclass per message with ``pack()`` and ``unpack()``;
* :class:`SerialClient`: a pyserial port (any URL ``serial_for_url`` takes:
  ``socket://127.0.0.1:PORT``, a pty path, ``/dev/ttyACM0``) that sends
  requests and waits, with a timeout, for the matching reply.

    with SerialClient.open("socket://127.0.0.1:4321", timeout=10) as dev:
        info = dev.connect()
        dev.reset()
        result = dev.forward([1, 2, 3], top_k=5)
        logits = dev.read_logits()          # float32 LE bytes, vocab_size * 4

Every failure is a :class:`SerialProtocolError` (a ColibriError) naming the
port; :class:`DeviceTimeout` and :class:`DeviceError` say more.
"""

from __future__ import annotations

import collections
import fcntl
import socket
import struct
import termios
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import serial  # pyserial

from .errors import ColibriError
from .status import Status, status_name  # noqa: F401 (status_name: re-exported)

PROTOCOL_VERSION = 1
SYNC0, SYNC1 = 0xC0, 0x1B
SYNC = bytes((SYNC0, SYNC1))
HEADER_BYTES, CRC_BYTES = 6, 4
MAX_PAYLOAD = 4096
MAX_IDS = 1000
MAX_TOP_K = 32
MAX_LOGITS_CHUNK = 1020
MAX_NAME = 127
MAX_ERROR_TEXT = 120
MAX_LINE = 200
NO_TENSOR = 0xFFFFFFFF

FORWARD_LOGITS = 0x01
FORWARD_IN_INTERRUPT = 0x02
CAP_TICKS = 0x01
CAP_INTERRUPT = 0x02
RESULT_RAN_IN_INTERRUPT = 0x01


class Msg(IntEnum):
    HELLO = 0x01
    RESET = 0x02
    FORWARD = 0x03
    GET_LOGITS = 0x04
    GENERATE = 0x05
    VERIFY = 0x06
    INFO = 0x81
    RESET_DONE = 0x82
    RESULT = 0x83
    LOGITS = 0x84
    GENERATED = 0x85
    VERIFY_RESULT = 0x86
    ERROR = 0xFF


class ErrorCode(IntEnum):
    BAD_CRC = 1
    TOO_LONG = 2
    UNKNOWN_TYPE = 3
    TIMEOUT = 4
    BAD_PAYLOAD = 5
    NO_LOGITS = 6
    NO_INTERRUPT = 7


STATUS_CHECKSUM = Status.E_CHECKSUM



class SerialProtocolError(ColibriError):
    """Talking to a device failed; `path` is the port URL."""


class DeviceTimeout(SerialProtocolError):
    """The device did not answer within the timeout."""


class DeviceError(SerialProtocolError):
    """The device answered a request with an ERROR frame."""

    def __init__(self, reply: ErrorReply, request: int, *, path: str | None = None) -> None:
        self.reply = reply
        self.code = reply.code
        name = _enum_name(Msg, request)
        super().__init__(f"device refused {name}: {reply.describe()}", path=path)


class PayloadError(SerialProtocolError):
    """A payload does not have the layout its message type requires."""


def _enum_name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"0x{value:02X}"


# ---- frames ---------------------------------------------------------------------------------

def frame_crc(type_: int, seq: int, payload: bytes) -> int:
    """CRC-32 of type, seq, length and payload (docs/serial-protocol.md section 3)."""
    return zlib.crc32(struct.pack("<BBH", type_, seq, len(payload)) + payload)


def encode_frame(type_: int, seq: int, payload: bytes = b"") -> bytes:
    """One frame. Raises PayloadError for a payload above 4096 bytes."""
    if len(payload) > MAX_PAYLOAD:
        raise PayloadError(f"payload of {len(payload)} bytes is above {MAX_PAYLOAD}")
    head = struct.pack("<BBH", type_, seq, len(payload))
    return SYNC + head + payload + struct.pack("<I", zlib.crc32(head + payload))


@dataclass(frozen=True)
class Frame:
    type: int
    seq: int
    payload: bytes


@dataclass(frozen=True)
class TextLine:
    text: str


@dataclass(frozen=True)
class BadFrame:
    reason: str


Event = Frame | TextLine | BadFrame


def _printable(byte: int) -> bool:
    return 0x20 <= byte <= 0x7E


class StreamDecoder:
    """Received bytes in, events out. Garbage is skipped; a bad CRC or a
    length above 4096 drops only the sync byte, and scanning goes on from the
    next byte; so does an incomplete frame once a complete good frame follows
    it. Text lines (printable ASCII up to CR or LF) become TextLine."""

    def __init__(self, max_line: int = 4096) -> None:
        self._buf = bytearray()
        self._line: bytearray | None = None
        self._max_line = max_line
        self.skipped = 0  # garbage bytes dropped so far

    def feed(self, data: bytes) -> list[Event]:
        self._buf += data
        events: list[Event] = []
        while self._buf:
            if self._line is not None:
                self._take_text(events)
            elif self._buf[0] == SYNC0:
                if not self._take_frame(events):
                    break
            elif _printable(self._buf[0]):
                self._line = bytearray()
            else:
                del self._buf[0]
                self.skipped += 1
        return events

    def _take_text(self, events: list[Event]) -> None:
        assert self._line is not None
        while self._buf:
            byte = self._buf[0]
            if byte == SYNC0 or byte in b"\r\n" or len(self._line) >= self._max_line:
                events.append(TextLine(self._line.decode("ascii")))
                self._line = None
                if byte != SYNC0:
                    del self._buf[0]
                return
            del self._buf[0]
            if _printable(byte):
                self._line.append(byte)

    def _take_frame(self, events: list[Event]) -> bool:
        """False when more bytes are needed."""
        buf = self._buf
        if len(buf) < 2:
            return False
        if buf[1] != SYNC1:
            del buf[0]
            self.skipped += 1
            return True
        if len(buf) < HEADER_BYTES:
            return False
        type_, seq, length = struct.unpack_from("<BBH", buf, 2)
        if length > MAX_PAYLOAD:
            events.append(BadFrame(f"length {length} above {MAX_PAYLOAD}"))
            del buf[0]
            return True
        end = HEADER_BYTES + length + CRC_BYTES
        if len(buf) < end:
            if not self._good_frame_later():
                return False
            events.append(BadFrame(f"incomplete frame of type 0x{type_:02X} before a good one"))
            del buf[0]
            return True
        frame = self._frame_at(0)
        if frame is None:
            events.append(BadFrame(f"CRC mismatch in a frame of type 0x{type_:02X}"))
            del buf[0]
            return True
        events.append(frame)
        del buf[:end]
        return True

    def _frame_at(self, at: int) -> Frame | None:
        """The complete frame with a good CRC at buf[at:], or None."""
        buf = self._buf
        if len(buf) < at + HEADER_BYTES or buf[at:at + 2] != SYNC:
            return None
        type_, seq, length = struct.unpack_from("<BBH", buf, at + 2)
        end = at + HEADER_BYTES + length + CRC_BYTES
        if length > MAX_PAYLOAD or len(buf) < end:
            return None
        payload = bytes(buf[at + HEADER_BYTES:end - CRC_BYTES])
        (crc,) = struct.unpack_from("<I", buf, end - CRC_BYTES)
        return Frame(type_, seq, payload) if crc == frame_crc(type_, seq, payload) else None

    def _good_frame_later(self) -> bool:
        """True if a complete good frame starts after byte 0: garbage that
        looks like the start of a long frame must not hide real frames."""
        at = self._buf.find(SYNC, 1)
        while at != -1:
            if self._frame_at(at) is not None:
                return True
            at = self._buf.find(SYNC, at + 1)
        return False


# ---- payloads --------------------------------------------------------------------------------

def _check_length(name: str, payload: bytes, fixed: int, exact: int | None = None) -> None:
    if len(payload) < fixed or (exact is not None and len(payload) != exact):
        want = exact if exact is not None else f"at least {fixed}"
        raise PayloadError(f"{name} payload has {len(payload)} bytes, expected {want}")


def _pack_ids(ids: Sequence[int]) -> bytes:
    if len(ids) > MAX_IDS:
        raise PayloadError(f"{len(ids)} ids: at most {MAX_IDS} fit in one request")
    return struct.pack(f"<{len(ids)}i", *ids)


def _name(text: str) -> bytes:
    raw = text.encode("ascii", "replace")[:MAX_NAME]
    return bytes((len(raw),)) + raw


def _unpack_name(payload: bytes, at: int, what: str) -> tuple[str, int]:
    if at >= len(payload) or at + 1 + payload[at] > len(payload):
        raise PayloadError(f"INFO {what} runs past the payload")
    n = payload[at]
    return payload[at + 1:at + 1 + n].decode("ascii", "replace"), at + 1 + n


@dataclass(frozen=True)
class Info:
    protocol: int
    max_payload: int
    init_status: int
    fingerprint: int
    expected_fingerprint: int
    vocab_size: int
    context: int
    position: int
    n_layers: int
    n_experts: int
    top_k: int
    arch: int
    capabilities: int
    core_version: tuple[int, int, int]
    format_major: int
    board: str
    tick_unit: str

    FIXED = struct.Struct("<HHIIIIIIIIIII4B")

    @property
    def ticks_measured(self) -> bool:
        return bool(self.capabilities & CAP_TICKS)

    @property
    def can_interrupt(self) -> bool:
        return bool(self.capabilities & CAP_INTERRUPT)

    def pack(self) -> bytes:
        return self.FIXED.pack(
            self.protocol, self.max_payload, self.init_status, self.fingerprint,
            self.expected_fingerprint, self.vocab_size, self.context, self.position, self.n_layers,
            self.n_experts, self.top_k, self.arch, self.capabilities, *self.core_version,
            self.format_major) + _name(self.board) + _name(self.tick_unit)

    @classmethod
    def unpack(cls, payload: bytes) -> Info:
        _check_length("INFO", payload, cls.FIXED.size + 2)
        v = cls.FIXED.unpack_from(payload)
        board, at = _unpack_name(payload, cls.FIXED.size, "board name")
        tick_unit, _ = _unpack_name(payload, at, "tick unit")
        return cls(*v[:13], core_version=tuple(v[13:16]), format_major=v[16], board=board,
                   tick_unit=tick_unit)


@dataclass(frozen=True)
class ResetDone:
    status: int
    position: int

    FIXED = struct.Struct("<II")

    def pack(self) -> bytes:
        return self.FIXED.pack(self.status, self.position)

    @classmethod
    def unpack(cls, payload: bytes) -> ResetDone:
        _check_length("RESET_DONE", payload, cls.FIXED.size, cls.FIXED.size)
        return cls(*cls.FIXED.unpack(payload))


@dataclass(frozen=True)
class ForwardRequest:
    ids: tuple[int, ...]
    keep_logits: bool = True
    top_k: int = 0
    in_interrupt: bool = False

    def pack(self) -> bytes:
        if not 0 <= self.top_k <= MAX_TOP_K:
            raise PayloadError(f"top_k {self.top_k}: 0 to {MAX_TOP_K}")
        flags = (FORWARD_LOGITS if self.keep_logits else 0) | \
                (FORWARD_IN_INTERRUPT if self.in_interrupt else 0)
        return struct.pack("<BBH", flags, self.top_k, len(self.ids)) + _pack_ids(self.ids)

    @classmethod
    def unpack(cls, payload: bytes) -> ForwardRequest:
        _check_length("FORWARD", payload, 4)
        flags, top_k, n = struct.unpack_from("<BBH", payload)
        _check_length("FORWARD", payload, 4, 4 + 4 * n)
        ids = struct.unpack_from(f"<{n}i", payload, 4)
        return cls(ids, bool(flags & FORWARD_LOGITS), top_k, bool(flags & FORWARD_IN_INTERRUPT))


@dataclass(frozen=True)
class ForwardResult:
    status: int
    position: int
    ticks: int
    logits_crc: int
    n_logits: int
    isr_stack_bytes: int
    flags: int
    top: tuple[tuple[int, float], ...]

    FIXED = struct.Struct("<IIQIIIBBH")

    @property
    def ran_in_interrupt(self) -> bool:
        return bool(self.flags & RESULT_RAN_IN_INTERRUPT)

    def pack(self) -> bytes:
        pairs = b"".join(struct.pack("<If", i, v) for i, v in self.top)
        return self.FIXED.pack(self.status, self.position, self.ticks, self.logits_crc,
                               self.n_logits, self.isr_stack_bytes, len(self.top), self.flags,
                               0) + pairs

    @classmethod
    def unpack(cls, payload: bytes) -> ForwardResult:
        _check_length("RESULT", payload, cls.FIXED.size)
        status, pos, ticks, crc, n_logits, stack, k, flags, _ = cls.FIXED.unpack_from(payload)
        _check_length("RESULT", payload, cls.FIXED.size, cls.FIXED.size + 8 * k)
        top = tuple(struct.unpack_from("<If", payload, cls.FIXED.size + 8 * j) for j in range(k))
        return cls(status, pos, ticks, crc, n_logits, stack, flags, top)


@dataclass(frozen=True)
class LogitsRequest:
    offset: int
    count: int

    FIXED = struct.Struct("<IH")

    def pack(self) -> bytes:
        return self.FIXED.pack(self.offset, self.count)

    @classmethod
    def unpack(cls, payload: bytes) -> LogitsRequest:
        _check_length("GET_LOGITS", payload, cls.FIXED.size, cls.FIXED.size)
        return cls(*cls.FIXED.unpack(payload))


@dataclass(frozen=True)
class LogitsChunk:
    offset: int
    total: int
    data: bytes  # count float32 LE values

    FIXED = struct.Struct("<IIHH")

    @property
    def count(self) -> int:
        return len(self.data) // 4

    def values(self) -> tuple[float, ...]:
        return struct.unpack(f"<{self.count}f", self.data)

    def pack(self) -> bytes:
        return self.FIXED.pack(self.offset, self.total, self.count, 0) + self.data

    @classmethod
    def unpack(cls, payload: bytes) -> LogitsChunk:
        _check_length("LOGITS", payload, cls.FIXED.size)
        offset, total, count, _ = cls.FIXED.unpack_from(payload)
        _check_length("LOGITS", payload, cls.FIXED.size, cls.FIXED.size + 4 * count)
        return cls(offset, total, bytes(payload[cls.FIXED.size:]))


@dataclass(frozen=True)
class GenerateRequest:
    ids: tuple[int, ...]
    n_new: int

    def pack(self) -> bytes:
        if not 0 <= self.n_new <= MAX_IDS:
            raise PayloadError(f"{self.n_new} tokens asked: 0 to {MAX_IDS}")
        return struct.pack("<HH", self.n_new, len(self.ids)) + _pack_ids(self.ids)

    @classmethod
    def unpack(cls, payload: bytes) -> GenerateRequest:
        _check_length("GENERATE", payload, 4)
        n_new, n = struct.unpack_from("<HH", payload)
        _check_length("GENERATE", payload, 4, 4 + 4 * n)
        return cls(struct.unpack_from(f"<{n}i", payload, 4), n_new)


@dataclass(frozen=True)
class Generated:
    status: int
    position: int
    total_ticks: int
    prompt_ticks: int
    ticks_per_token: int
    tokens: tuple[int, ...]

    FIXED = struct.Struct("<IIQQQHH")

    def pack(self) -> bytes:
        return self.FIXED.pack(self.status, self.position, self.total_ticks, self.prompt_ticks,
                               self.ticks_per_token, len(self.tokens), 0) + \
            struct.pack(f"<{len(self.tokens)}I", *self.tokens)

    @classmethod
    def unpack(cls, payload: bytes) -> Generated:
        _check_length("GENERATED", payload, cls.FIXED.size)
        *head, n, _ = cls.FIXED.unpack_from(payload)
        _check_length("GENERATED", payload, cls.FIXED.size, cls.FIXED.size + 4 * n)
        return cls(*head, tokens=struct.unpack_from(f"<{n}I", payload, cls.FIXED.size))


@dataclass(frozen=True)
class VerifyResult:
    status: int
    bad_tensor: int
    ticks: int

    FIXED = struct.Struct("<IIQ")

    def pack(self) -> bytes:
        return self.FIXED.pack(self.status, self.bad_tensor, self.ticks)

    @classmethod
    def unpack(cls, payload: bytes) -> VerifyResult:
        _check_length("VERIFY_RESULT", payload, cls.FIXED.size, cls.FIXED.size)
        return cls(*cls.FIXED.unpack(payload))


@dataclass(frozen=True)
class ErrorReply:
    code: int
    request_type: int
    text: str

    FIXED = struct.Struct("<HBB")

    def describe(self) -> str:
        return f"ERROR {_enum_name(ErrorCode, self.code)} ({self.code}): {self.text}"

    def pack(self) -> bytes:
        raw = self.text.encode("ascii", "replace")[:MAX_ERROR_TEXT]
        return self.FIXED.pack(self.code, self.request_type, len(raw)) + raw

    @classmethod
    def unpack(cls, payload: bytes) -> ErrorReply:
        _check_length("ERROR", payload, cls.FIXED.size)
        code, type_, n = cls.FIXED.unpack_from(payload)
        _check_length("ERROR", payload, cls.FIXED.size, cls.FIXED.size + n)
        return cls(code, type_, payload[cls.FIXED.size:].decode("ascii", "replace"))


# ---- the client ------------------------------------------------------------------------------

READ_SLICE = 0.05  # seconds one read may block; every wait is bounded by its own deadline


class SerialClient:
    """Requests to one device over one pyserial port. Not thread-safe."""

    def __init__(self, port, url: str, *, timeout: float = 10.0) -> None:
        self._port = port
        self.url = url
        self.timeout = timeout
        self._decoder = StreamDecoder()
        self._pending: collections.deque[Event] = collections.deque()
        self._seq = 0
        self.text_log: collections.deque[str] = collections.deque(maxlen=500)
        self.info: Info | None = None
        self._socket = getattr(port, "_socket", None)

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, timeout: float = 10.0, baudrate: int = 115200,
             connect_timeout: float = 5.0) -> SerialClient:
        """Open url with serial_for_url, retrying a refused TCP connection for
        up to connect_timeout seconds (QEMU may still be starting)."""
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                port = serial.serial_for_url(url, baudrate=baudrate, timeout=READ_SLICE,
                                             write_timeout=timeout)
                break
            except (serial.SerialException, OSError, ValueError) as exc:
                if time.monotonic() >= deadline or not url.startswith("socket://"):
                    raise SerialProtocolError(f"cannot open the port: {exc}", path=url) from exc
                time.sleep(0.05)
        client = cls(port, url, timeout=timeout)
        client._set_nodelay()
        return client

    @classmethod
    def from_port(cls, port, url: str, *, timeout: float = 10.0) -> SerialClient:
        """Wrap a pyserial port opened elsewhere (QemuSession.open_serial, say);
        its timeout is set to the client's short read slice."""
        port.timeout = READ_SLICE
        client = cls(port, url, timeout=timeout)
        client._set_nodelay()
        return client

    def _set_nodelay(self) -> None:
        # Nagle on the host side costs ~45 ms per round trip (delayed ACK).
        if self._socket is not None:
            self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self._socket is not None and self._port.is_open:
            # pyserial's socket close sleeps 0.3 s "for quick reconnects"; the
            # runner and QEMU need no such pause.
            try:
                self._socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._socket.close()
            self._port._socket = None
            self._port.is_open = False
            self._socket = None
        self._port.close()

    def __enter__(self) -> SerialClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- bytes ------------------------------------------------------------------------

    def _available(self) -> int:
        if self._socket is not None:
            buf = bytearray(4)
            fcntl.ioctl(self._socket.fileno(), termios.FIONREAD, buf)
            return int.from_bytes(buf, "little")
        return self._port.in_waiting

    def _read_some(self) -> bytes:
        """What has arrived, or waits up to READ_SLICE for one byte."""
        try:
            return self._port.read(max(1, self._available()))
        except (serial.SerialException, OSError) as exc:
            raise SerialProtocolError(f"the port failed while reading: {exc}",
                                      path=self.url) from exc

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests use this for hostile input)."""
        try:
            self._port.write(data)
            self._port.flush()
        except (serial.SerialException, OSError) as exc:
            raise SerialProtocolError(f"the port failed while writing: {exc}",
                                      path=self.url) from exc

    def next_event(self, deadline: float) -> Event | None:
        """The next frame, text line or bad frame, or None at the deadline."""
        while not self._pending:
            if time.monotonic() >= deadline:
                return None
            data = self._read_some()
            if data:
                self._pending.extend(self._decoder.feed(data))
        event = self._pending.popleft()
        if isinstance(event, TextLine):
            self.text_log.append(event.text)
        return event

    def drain(self, quiet: float = 0.1) -> None:
        """Drop whatever arrives until the line has been quiet for `quiet` s."""
        end = time.monotonic() + quiet
        while self.next_event(end) is not None:
            end = time.monotonic() + quiet

    # -- requests ---------------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq = self._seq % 255 + 1
        return self._seq

    def transact(self, type_: int, payload: bytes = b"", *, timeout: float | None = None) -> Frame:
        """Send one request; return its reply frame (type_ | 0x80). An ERROR
        reply raises DeviceError; no reply in time raises DeviceTimeout."""
        wait = self.timeout if timeout is None else timeout
        seq = self._next_seq()
        self.send_raw(encode_frame(type_, seq, payload))
        deadline = time.monotonic() + wait
        while (event := self.next_event(deadline)) is not None:
            if not isinstance(event, Frame) or event.seq != seq:
                continue
            if event.type == Msg.ERROR:
                raise DeviceError(ErrorReply.unpack(event.payload), type_, path=self.url)
            if event.type == type_ | 0x80:
                return event
            raise PayloadError(f"reply of type 0x{event.type:02X} to {_enum_name(Msg, type_)}",
                               path=self.url)
        raise DeviceTimeout(
            f"no reply to {_enum_name(Msg, type_)} within {wait:g} s (is the firmware running, "
            f"the port right and the line clean?){self._recent_text()}", path=self.url)

    def _recent_text(self) -> str:
        lines = list(self.text_log)[-3:]
        return "; device printed: " + " | ".join(lines) if lines else ""

    def hello(self, *, timeout: float | None = None) -> Info:
        info = Info.unpack(self.transact(Msg.HELLO, timeout=timeout).payload)
        self.info = info
        return info

    def connect(self, *, timeout: float | None = None, attempt: float = 1.0) -> Info:
        """HELLO until INFO comes back (a half-received frame left on the line
        by an earlier session can swallow the first one); checks the protocol
        version."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            try:
                info = self.hello(timeout=max(0.01, min(attempt, left)))
                break
            except (DeviceTimeout, DeviceError) as exc:  # e.g. BAD_CRC: leftovers on the line
                if time.monotonic() >= deadline:
                    last = f"; last: {exc.message}" if isinstance(exc, DeviceError) else ""
                    raise DeviceTimeout(f"no INFO reply to HELLO within {wait:g} s (is the "
                                        f"firmware running and the port right?)"
                                        f"{self._recent_text()}{last}", path=self.url) from None
        if info.protocol != PROTOCOL_VERSION:
            raise SerialProtocolError(f"device speaks protocol {info.protocol}, this host "
                                      f"{PROTOCOL_VERSION}", path=self.url)
        return info

    def reset(self) -> ResetDone:
        return ResetDone.unpack(self.transact(Msg.RESET).payload)

    def forward(self, ids: Iterable[int], *, logits: bool = True, top_k: int = 0,
                in_interrupt: bool = False, timeout: float | None = None) -> ForwardResult:
        request = ForwardRequest(tuple(ids), logits, top_k, in_interrupt)
        return ForwardResult.unpack(self.transact(Msg.FORWARD, request.pack(),
                                                  timeout=timeout).payload)

    def get_logits(self, offset: int, count: int = MAX_LOGITS_CHUNK) -> LogitsChunk:
        chunk = LogitsChunk.unpack(self.transact(Msg.GET_LOGITS,
                                                 LogitsRequest(offset, count).pack()).payload)
        if chunk.offset != offset:
            raise PayloadError(f"LOGITS for offset {chunk.offset}, asked {offset}", path=self.url)
        return chunk

    def read_logits(self, chunk: int = MAX_LOGITS_CHUNK) -> bytes:
        """Every kept logit as float32 LE bytes, read in bounded chunks."""
        parts, offset, total = [], 0, None
        while total is None or offset < total:
            part = self.get_logits(offset, chunk)
            total = part.total
            if part.count == 0 and offset < total:
                raise PayloadError(f"LOGITS chunk at {offset} of {total} is empty", path=self.url)
            parts.append(part.data)
            offset += part.count
        return b"".join(parts)

    def generate(self, ids: Iterable[int], n_new: int, *,
                 timeout: float | None = None) -> Generated:
        request = GenerateRequest(tuple(ids), n_new)
        return Generated.unpack(self.transact(Msg.GENERATE, request.pack(),
                                              timeout=timeout).payload)

    def verify(self, *, timeout: float | None = None) -> VerifyResult:
        return VerifyResult.unpack(self.transact(Msg.VERIFY, timeout=timeout).payload)

    def command(self, line: str, *, timeout: float | None = None) -> list[str]:
        """Line mode: send `line`, return the answer's lines up to and
        including the one starting with "ok" or "error"."""
        if len(line) > MAX_LINE or not all(_printable(ord(c)) for c in line):
            raise PayloadError(f"a command line is at most {MAX_LINE} printable ASCII characters")
        wait = self.timeout if timeout is None else timeout
        self.send_raw(line.encode("ascii") + b"\r\n")
        deadline = time.monotonic() + wait
        lines: list[str] = []
        while (event := self.next_event(deadline)) is not None:
            if isinstance(event, TextLine):
                lines.append(event.text)
                if event.text.startswith(("ok", "error")):
                    return lines
        raise DeviceTimeout(f"no 'ok' or 'error' line after {line!r} within {wait:g} s "
                            f"(got {lines!r})", path=self.url)


def collect(events: Iterable[Event], kind: type) -> list:
    """The events of one kind (Frame, TextLine, BadFrame)."""
    return [e for e in events if isinstance(e, kind)]
