"""The serial protocol's host client: :class:`SerialClient` on a pyserial port (any URL
``serial_for_url`` takes: ``socket://127.0.0.1:PORT``, a pty path, ``/dev/ttyACM0``) that
sends requests and waits, with a timeout, for the matching reply."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import socket
import struct
import termios
import time
from collections.abc import Iterable, Iterator

import serial  # pyserial

from ..image.image_spec import LIMITS
from .frames import (
    MAX_LINE,
    MAX_LOGITS_CHUNK,
    PROTOCOL_VERSION,
    DeviceTimeout,
    Event,
    Frame,
    Msg,
    PayloadError,
    SerialProtocolError,
    StreamDecoder,
    TextLine,
    _enum_name,
    _printable,
    encode_frame,
)
from .messages import (
    ErrorReply,
    ForwardRequest,
    ForwardResult,
    Generated,
    GenerateRequest,
    Info,
    LogitsChunk,
    LogitsRequest,
    ResetDone,
    SlotBegun,
    SlotState,
    SlotWritten,
    VerifyResult,
)

# ---- the client ------------------------------------------------------------------------------

class DeviceError(SerialProtocolError):
    """The device answered a request with an ERROR frame."""

    def __init__(self, reply: ErrorReply, request: int, *, path: str | None = None) -> None:
        self.reply = reply
        self.code = reply.code
        name = _enum_name(Msg, request)
        super().__init__(f"device refused {name}: {reply.describe()}", path=path)


READ_SLICE = 0.05  # seconds one read may block; every wait is bounded by its own deadline
READ_CHUNK = 4096  # bytes decoded between two looks at the clock (a flood cannot hold a wait)


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
            return self._port.read(min(max(1, self._available()), READ_CHUNK))
        except (serial.SerialException, OSError, termios.error) as exc:
            raise SerialProtocolError(f"the port failed while reading: {exc}",
                                      path=self.url) from exc

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests use this for hostile input)."""
        try:
            self._port.write(data)
            self._port.flush()
        except (serial.SerialException, OSError, termios.error) as exc:  # tcdrain: termios.error
            raise SerialProtocolError(f"the port failed while writing: {exc}",
                                      path=self.url) from exc

    def next_event(self, deadline: float) -> Event | None:
        """The next frame, text line or bad frame, or None at the deadline
        (checked before every event, so no flood of events outlives it)."""
        if time.monotonic() >= deadline:
            return None
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
        with self._port_named():
            frame = encode_frame(type_, seq, payload)
        self.send_raw(frame)
        deadline = time.monotonic() + wait
        while (event := self.next_event(deadline)) is not None:
            if not isinstance(event, Frame) or event.seq != seq:
                continue
            if event.type == Msg.ERROR:
                with self._port_named():
                    reply = ErrorReply.unpack(event.payload)
                raise DeviceError(reply, type_, path=self.url)
            if event.type == type_ | 0x80:
                return event
            raise PayloadError(f"reply of type 0x{event.type:02X} to {_enum_name(Msg, type_)}",
                               path=self.url)
        raise DeviceTimeout(
            f"no reply to {_enum_name(Msg, type_)} within {wait:g} s (is the firmware running, "
            f"the port right and the line clean?){self._recent_text()}", path=self.url)

    @contextlib.contextmanager
    def _port_named(self) -> Iterator[None]:
        """A PayloadError raised inside (a reply that does not decode, a request
        that does not encode) names the port, as a timeout does."""
        try:
            yield
        except PayloadError as exc:
            if exc.path is not None:
                raise
            raise PayloadError(exc.message, path=self.url) from None

    def _ask(self, type_: int, reply: type, payload: bytes = b"", *,
             timeout: float | None = None):
        """Send a request; return its reply decoded as `reply` (a messages class)."""
        frame = self.transact(type_, payload, timeout=timeout)
        with self._port_named():
            return reply.unpack(frame.payload)

    def _recent_text(self) -> str:
        lines = list(self.text_log)[-3:]
        return "; device printed: " + " | ".join(lines) if lines else ""

    def hello(self, *, timeout: float | None = None) -> Info:
        info = self._ask(Msg.HELLO, Info, timeout=timeout)
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
        return self._ask(Msg.RESET, ResetDone)

    def forward(self, ids: Iterable[int], *, logits: bool = True, top_k: int = 0,
                in_interrupt: bool = False, timeout: float | None = None) -> ForwardResult:
        with self._port_named():
            request = ForwardRequest(tuple(ids), logits, top_k, in_interrupt).pack()
        return self._ask(Msg.FORWARD, ForwardResult, request, timeout=timeout)

    def get_logits(self, offset: int, count: int = MAX_LOGITS_CHUNK) -> LogitsChunk:
        with self._port_named():
            request = LogitsRequest(offset, count).pack()
        chunk = self._ask(Msg.GET_LOGITS, LogitsChunk, request)
        if chunk.offset != offset:
            raise PayloadError(f"LOGITS for offset {chunk.offset}, asked {offset}", path=self.url)
        return chunk

    def read_logits(self, chunk: int = MAX_LOGITS_CHUNK, *, timeout: float | None = None) -> bytes:
        """Every kept logit as float32 LE bytes, read in bounded chunks. The
        device's total is believed only up to the vocabulary INFO announced
        (the format's limit before INFO) and must stay the same from chunk to
        chunk; the whole read ends within the timeout."""
        limit = self.info.vocab_size if self.info is not None else LIMITS["vocab_size"]
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        parts, offset, total = [], 0, None
        while total is None or offset < total:
            if time.monotonic() > deadline:
                raise DeviceTimeout(f"reading logits: {offset} of {total} after the timeout",
                                    path=self.url)
            part = self.get_logits(offset, chunk)
            if total is None and part.total > limit:
                raise PayloadError(f"the device announces {part.total} logits, more than the "
                                   f"vocabulary of {limit}", path=self.url)
            if total is not None and part.total != total:
                raise PayloadError(f"the logits total changed from {total} to {part.total}",
                                   path=self.url)
            total = part.total
            if part.count == 0 and offset < total:
                raise PayloadError(f"LOGITS chunk at {offset} of {total} is empty", path=self.url)
            parts.append(part.data)
            offset += part.count
        return b"".join(parts)

    def generate(self, ids: Iterable[int], n_new: int, *,
                 timeout: float | None = None) -> Generated:
        with self._port_named():
            request = GenerateRequest(tuple(ids), n_new).pack()
        return self._ask(Msg.GENERATE, Generated, request, timeout=timeout)

    def verify(self, *, timeout: float | None = None) -> VerifyResult:
        return self._ask(Msg.VERIFY, VerifyResult, timeout=timeout)

    def slot_state(self) -> SlotState:
        return self._ask(Msg.SLOT_STATUS, SlotState)

    def slot_begin(self, size: int, *, timeout: float | None = None) -> SlotBegun:
        """Mark the slot that is not running EMPTY and erase it (slow: give time)."""
        return self._ask(Msg.SLOT_BEGIN, SlotBegun, struct.pack("<Q", size), timeout=timeout)

    def slot_write(self, offset: int, data: bytes, *, timeout: float | None = None) -> SlotWritten:
        return self._ask(Msg.SLOT_WRITE, SlotWritten, struct.pack("<Q", offset) + data,
                         timeout=timeout)

    def slot_finish(self, *, allow_older: bool = False, timeout: float | None = None) -> int:
        """Verify the new slot and flip the record; the colibri status."""
        reply = self.transact(Msg.SLOT_FINISH, struct.pack("<I", int(allow_older)), timeout=timeout)
        if len(reply.payload) != 4:
            raise PayloadError(f"SLOT_FINISHED payload has {len(reply.payload)} bytes, expected 4",
                               path=self.url)
        return struct.unpack("<I", reply.payload)[0]

    def command(self, line: str, *, timeout: float | None = None) -> list[str]:
        """Line mode: send `line`, return the answer's lines up to and
        including the one starting with "ok" or "error"."""
        if len(line) > MAX_LINE or not all(_printable(ord(c)) for c in line):
            raise PayloadError(f"a command line is at most {MAX_LINE} printable ASCII characters",
                               path=self.url)
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
