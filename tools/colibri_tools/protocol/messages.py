"""The serial protocol's payloads: one dataclass per message with ``pack()`` and
``unpack()`` (docs/serial-protocol.md)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from .frames import (
    CAP_INTERRUPT,
    CAP_TICKS,
    FORWARD_IN_INTERRUPT,
    FORWARD_LOGITS,
    MAX_ERROR_TEXT,
    MAX_IDS,
    MAX_NAME,
    MAX_TOP_K,
    RESULT_RAN_IN_INTERRUPT,
    ErrorCode,
    PayloadError,
    _enum_name,
)

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


SLOT_STATES = ("empty", "pending", "trying", "good", "bad")


@dataclass(frozen=True)
class SlotState:
    """SLOT_STATE: the device's A/B slot record (docs/serial-protocol.md 4.7)."""
    status: int
    running: int            # 0 A, 1 B, 0xFF none
    signed_only: int        # 1: the device takes only images signed by its key
    state: tuple[int, int]
    seq: int
    generation: tuple[int, int]
    fingerprint: tuple[int, int]
    reserved: int
    image_version: tuple[int, int]
    slot_size: int

    FIXED = struct.Struct("<IBBBBIIIIIIQQQ")

    def describe(self, slot: int) -> str:
        state = self.state[slot]
        name = SLOT_STATES[state] if state < len(SLOT_STATES) else f"state {state}"
        return (f"slot {'AB'[slot]}: {name}, fingerprint 0x{self.fingerprint[slot]:08X}, "
                f"version {self.image_version[slot]}")

    def pack(self) -> bytes:
        return self.FIXED.pack(self.status, self.running, self.signed_only, *self.state, self.seq,
                               *self.generation, *self.fingerprint, self.reserved,
                               *self.image_version, self.slot_size)

    @classmethod
    def unpack(cls, payload: bytes) -> SlotState:
        _check_length("SLOT_STATE", payload, cls.FIXED.size, cls.FIXED.size)
        v = cls.FIXED.unpack(payload)
        return cls(v[0], v[1], v[2], (v[3], v[4]), v[5], (v[6], v[7]), (v[8], v[9]), v[10],
                   (v[11], v[12]), v[13])


@dataclass(frozen=True)
class SlotBegun:
    status: int
    target: int

    FIXED = struct.Struct("<II")

    @classmethod
    def unpack(cls, payload: bytes) -> SlotBegun:
        _check_length("SLOT_BEGUN", payload, cls.FIXED.size, cls.FIXED.size)
        return cls(*cls.FIXED.unpack(payload))


@dataclass(frozen=True)
class SlotWritten:
    status: int
    written: int

    FIXED = struct.Struct("<IQ")

    @classmethod
    def unpack(cls, payload: bytes) -> SlotWritten:
        _check_length("SLOT_WRITTEN", payload, cls.FIXED.size, cls.FIXED.size)
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
