"""The serial protocol's frames (docs/serial-protocol.md): constants, message types,
errors, :func:`encode_frame` and :class:`StreamDecoder`, which turns received bytes into
:class:`Frame`, :class:`TextLine` and :class:`BadFrame` events, skipping garbage and
resynchronising on the sync bytes."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum

from ..errors import ColibriError

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
    SLOT_STATUS = 0x07
    SLOT_BEGIN = 0x08
    SLOT_WRITE = 0x09
    SLOT_FINISH = 0x0A
    INFO = 0x81
    RESET_DONE = 0x82
    RESULT = 0x83
    LOGITS = 0x84
    GENERATED = 0x85
    VERIFY_RESULT = 0x86
    SLOT_STATE = 0x87
    SLOT_BEGUN = 0x88
    SLOT_WRITTEN = 0x89
    SLOT_FINISHED = 0x8A
    ERROR = 0xFF


class ErrorCode(IntEnum):
    BAD_CRC = 1
    TOO_LONG = 2
    UNKNOWN_TYPE = 3
    TIMEOUT = 4
    BAD_PAYLOAD = 5
    NO_LOGITS = 6
    NO_INTERRUPT = 7
    NO_SLOTS = 8





class SerialProtocolError(ColibriError):
    """Talking to a device failed; `path` is the port URL."""


class DeviceTimeout(SerialProtocolError):
    """The device did not answer within the timeout."""


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
