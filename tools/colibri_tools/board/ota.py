"""Over-the-air weight updates into a device's A/B slots (docs/ota.md), over
the serial protocol's SLOT_* requests (docs/serial-protocol.md 4.7): the
device writes the slot that is not running, verifies it (signature, block
hashes, CRCs) and only then flips its slot record.

    from colibri_tools.board import ota
    with SerialClient.open(url) as dev:
        dev.connect()
        result = ota.update(dev, Path("model.signed.bin").read_bytes())

Library first; colibri-flash --slot auto is the command line.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ColibriError
from ..image.status import status_name
from ..protocol.client import SerialClient
from ..protocol.frames import MAX_PAYLOAD
from ..protocol.messages import SLOT_STATES
from .boards import Board

# Data bytes per SLOT_WRITE (at most MAX_PAYLOAD - 8: the offset): a multiple of
# 256, so every write but the last covers whole program units of a flash that
# programs up to 256 bytes at a time (an ECC flash cannot program a unit twice).
CHUNK = (MAX_PAYLOAD - 8) // 256 * 256      # 3840
ERASE_TIMEOUT = 120.0             # SLOT_BEGIN erases the whole slot span
VERIFY_TIMEOUT = 300.0            # SLOT_FINISH hashes and CRCs the whole image
PENDING = SLOT_STATES.index("pending")   # the state SLOT_FINISH leaves the new slot in


class UpdateError(ColibriError):
    """The device refused an update step; `status` is the colibri status."""

    def __init__(self, message: str, *, status: int, path: str | None = None) -> None:
        self.status = status
        super().__init__(f"{message}: {status_name(status)}", path=path)


class ClaimError(ColibriError):
    """A device's reply contradicts what this host sent it: not believed."""


@dataclass(frozen=True)
class UpdateResult:
    target: int          # the slot written: 0 A, 1 B
    steps: int           # requests sent: begin, writes, finish
    size: int


Progress = Callable[[int, int, str], None]


def steps_for(size: int) -> int:
    """Requests of one update: SLOT_BEGIN, the SLOT_WRITEs, SLOT_FINISH."""
    return 2 + -(-size // CHUNK)


def update(dev: SerialClient, image: bytes, *, allow_older: bool = False,
           progress: Progress | None = None) -> UpdateResult:
    """Send `image` (image + signature block) into the slot that is not
    running. progress(step, total, what) is called after each acknowledged
    request. Raises UpdateError when the device refuses a step (the record
    then still names the old image), ClaimError when a reply contradicts what
    was sent (a byte count, or the record after SLOT_FINISH)."""
    total = steps_for(len(image))
    target = _begin(dev, len(image))
    slot = "AB"[target]
    step = 1
    if progress:
        progress(step, total, f"slot {slot} erased")
    for offset in range(0, len(image), CHUNK):
        sent = min(offset + CHUNK, len(image))
        written = dev.slot_write(offset, image[offset:sent])
        if written.status != 0:
            raise UpdateError(f"writing bytes {offset}.. into slot {slot} failed",
                              status=written.status, path=dev.url)
        if written.written != sent:
            raise ClaimError(f"SLOT_WRITTEN says {written.written} bytes of slot {slot} are "
                             f"written, but {sent} of the {len(image)}-byte image were sent",
                             path=dev.url)
        step += 1
        if progress:
            progress(step, total, f"{written.written} of {len(image)} bytes")
    status = dev.slot_finish(allow_older=allow_older, timeout=VERIFY_TIMEOUT)
    if status != 0:
        raise UpdateError(f"slot {slot} did not verify; the record still names "
                          f"the running image", status=status, path=dev.url)
    _check_record(dev, target, image)
    step += 1
    if progress:
        progress(step, total, f"slot {slot} verified, record flipped")
    return UpdateResult(target, step, len(image))


def _begin(dev: SerialClient, size: int) -> int:
    """SLOT_BEGIN: the slot the device erased for the image (0 A, 1 B)."""
    begun = dev.slot_begin(size, timeout=ERASE_TIMEOUT)
    if begun.status != 0:
        raise UpdateError(f"the device refused a {size}-byte image", status=begun.status,
                          path=dev.url)
    if begun.target not in (0, 1):
        raise ClaimError(f"SLOT_BEGUN names slot {begun.target}; there are only A (0) and B (1)",
                         path=dev.url)
    return begun.target


def _check_record(dev: SerialClient, target: int, image: bytes) -> None:
    """After SLOT_FINISH the record must name the image sent: the target slot
    pending, with the image's fingerprint (its meta CRC-32, bytes 24..27)."""
    state = dev.slot_state()
    fingerprint = int.from_bytes(image[24:28], "little")
    if state.state[target] != PENDING or state.fingerprint[target] != fingerprint:
        raise ClaimError(f"SLOT_FINISH reported success, but the record says "
                         f"{state.describe(target)}; the image sent would make slot "
                         f"{'AB'[target]} pending, fingerprint 0x{fingerprint:08X}",
                         path=dev.url)


def erased_flash(board: Board, path: Path) -> Path:
    """The board's slot flash as an erased file (0xFF), made once and then
    kept: it is the device's flash, it persists like one."""
    if board.slots is None:
        raise ColibriError(f"board {board.name} has no [slots]", path=board.path)
    if path.exists():
        if path.stat().st_size != board.slots.length:
            raise ColibriError(f"is {path.stat().st_size} bytes, not the {board.slots.length} of "
                               f"{board.name}'s slot flash", path=path)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        block = b"\xff" * (1 << 20)
        for _ in range(board.slots.length >> 20):
            f.write(block)
        f.write(b"\xff" * (board.slots.length & ((1 << 20) - 1)))
    return path
