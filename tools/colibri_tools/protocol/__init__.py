"""The Colibri serial protocol, host side (docs/serial-protocol.md is the spec).

Three layers, each its own module and each usable alone:

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

from ..image.status import Status, status_name
from .client import READ_SLICE, DeviceError, SerialClient, collect
from .frames import (
    CAP_INTERRUPT,
    CAP_TICKS,
    CRC_BYTES,
    FORWARD_IN_INTERRUPT,
    FORWARD_LOGITS,
    HEADER_BYTES,
    MAX_ERROR_TEXT,
    MAX_IDS,
    MAX_LINE,
    MAX_LOGITS_CHUNK,
    MAX_NAME,
    MAX_PAYLOAD,
    MAX_TOP_K,
    NO_TENSOR,
    PROTOCOL_VERSION,
    RESULT_RAN_IN_INTERRUPT,
    SYNC,
    SYNC0,
    SYNC1,
    BadFrame,
    DeviceTimeout,
    ErrorCode,
    Event,
    Frame,
    Msg,
    PayloadError,
    SerialProtocolError,
    StreamDecoder,
    TextLine,
    encode_frame,
    frame_crc,
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
    VerifyResult,
)

__all__ = [
    'BadFrame', 'CAP_INTERRUPT', 'CAP_TICKS', 'CRC_BYTES', 'DeviceError', 'DeviceTimeout',
    'ErrorCode', 'ErrorReply', 'Event', 'FORWARD_IN_INTERRUPT', 'FORWARD_LOGITS', 'ForwardRequest',
    'ForwardResult', 'Frame', 'GenerateRequest', 'Generated', 'HEADER_BYTES', 'Info',
    'LogitsChunk', 'LogitsRequest', 'MAX_ERROR_TEXT', 'MAX_IDS', 'MAX_LINE', 'MAX_LOGITS_CHUNK',
    'MAX_NAME', 'MAX_PAYLOAD', 'MAX_TOP_K', 'Msg', 'NO_TENSOR', 'PROTOCOL_VERSION', 'PayloadError',
    'READ_SLICE', 'RESULT_RAN_IN_INTERRUPT', 'ResetDone', 'SYNC', 'SYNC0',
    'SYNC1', 'SerialClient', 'SerialProtocolError', 'Status', 'StreamDecoder', 'TextLine',
    'VerifyResult', 'collect', 'encode_frame', 'frame_crc', 'status_name',
]
