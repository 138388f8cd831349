"""colibri-flash --slot auto: an over-the-air style update into the board's
A/B weight slots (docs/ota.md). The image goes into the slot that is not
running, the device verifies it (signature, block hashes, CRCs) and only
then flips its slot record; the next boot tries it and confirms it.

    qemu  the board's slot flash is a file (build/flash/BOARD/slots.img, kept
          between runs like a device's flash); the ota_runner firmware boots on
          it, receives the image over the serial protocol (SLOT_* requests),
          then the board is rebooted and reports the slot it runs
    scp   Linux boards: copy the image, then `colibri-slot install STORE IMAGE`
          on the board ([slots] store)

and, without a board file (serial_update, colibri-flash --slot auto --serial URL),
a device that already serves the serial protocol on its slots (the Zephyr
serial_runner built with CONFIG_COLIBRI_SLOTS, ota_runner on a board): the
image goes over that port, and the device's next reset tries it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ...image import signing
from ...image.signing import ImageCheckError, SignatureError, read_signature
from ...protocol.client import DeviceError, SerialClient
from .. import ota
from .. import qemu as launcher
from ..hex_image import is_hex_file
from .common import FlashError, FlashRequest, Step
from .scp import _target as scp_target

BOOT_TIMEOUT = 120.0


def check_image(req: FlashRequest) -> bytes:
    """The image as the device will check it: signed by the trusted key when
    one is given (or, unsigned, a plain image), and small enough for a slot."""
    board = req.board
    if board.slots is None:
        raise FlashError(f"board {board.name} declares no A/B weight slots ([slots], "
                         f"docs/boards.md)", path=board.path)
    if req.weights is None or is_hex_file(req.weights):
        raise FlashError("--slot auto sends a model image (model.bin, signed or not), not a HEX "
                         "file and not nothing")
    data = req.weights.read_bytes()
    if len(data) > board.slots.slot_size:
        raise FlashError(f"{len(data)} bytes do not fit a {board.slots.slot_size}-byte slot of "
                         f"{board.name}", path=req.weights)
    _check_signature(data, req.trusted_key, req.weights)
    return data


def _check_signature(data: bytes, trusted_key: bytes | None, path) -> None:
    """What the device checks before it flips its record, checked before it
    erases anything: the signature (with a trusted key), then the image itself
    (colibri_init's and colibri_verify's checks)."""
    try:
        if trusted_key is not None:
            read_signature(data, trusted_key, path=path)
        signing.check_image(data, path)
    except SignatureError as exc:
        raise FlashError(f"the device would refuse it: {exc.message}", path=path) from None
    except ImageCheckError as exc:
        raise FlashError(exc.message, path=path) from None


def _check_fingerprint(data: bytes, info) -> None:
    fp = int.from_bytes(data[24:28], "little")
    if info.expected_fingerprint not in (0, fp):
        raise FlashError(f"the firmware is built for the model with fingerprint "
                         f"0x{info.expected_fingerprint:08X}, the image is 0x{fp:08X}")


def _progress(k: int, n: int, what: str) -> None:
    print(f"colibri-flash: step {k}/{n}: {what}")


def _report(dev: SerialClient, board_name: str) -> None:
    state = dev.slot_state()
    running = "none" if state.running > 1 else "AB"[state.running]
    print(f"colibri-flash: {board_name}: running slot {running}; {state.describe(0)}; "
          f"{state.describe(1)}")


def qemu_steps(req: FlashRequest) -> list[Step]:
    board = req.board
    if req.firmware is None:
        raise FlashError("--slot auto on QEMU boots the ota_runner firmware: give --firmware")
    data = check_image(req)
    flash = req.workdir / "slots.img"
    argv = launcher.qemu_argv(board, req.firmware, None, port=0, slots_file=flash)

    def make_flash() -> int:
        ota.erased_flash(board, flash)
        return 0

    def boot(then) -> int:
        with launcher.launch(board, req.firmware, None, timeout=req.timeout,
                             slots_file=flash) as session:
            dev = SerialClient.from_port(session.open_serial(timeout=10), session.url, timeout=30)
            try:
                info = dev.connect(timeout=60)
                return then(dev, info)
            finally:
                dev.close()

    def send(dev: SerialClient, info) -> int:
        _check_fingerprint(data, info)
        _report(dev, board.name)
        result = ota.update(dev, data, allow_older=req.allow_older, progress=_progress)
        print(f"colibri-flash: slot {'AB'[result.target]} written and verified; rebooting")
        return 0

    def after(dev: SerialClient, info) -> int:
        _report(dev, board.name)
        print(f"colibri-flash: running fingerprint 0x{info.fingerprint:08X} "
              f"(image 0x{int.from_bytes(data[24:28], 'little'):08X})")
        return 0 if info.fingerprint == int.from_bytes(data[24:28], "little") else 1

    notes = (f"the slot flash is {flash}, kept between runs (an erased one is made once)",
             "the serial port is a free TCP port chosen at run time (0 above)",
             "colibri-flash talks to the firmware over the serial port (SLOT_BEGIN, SLOT_WRITE "
             f"x {ota.steps_for(len(data)) - 2}, SLOT_FINISH), then boots the board again")
    return [Step(("colibri-flash", "make-slot-flash", str(flash)), "prepare the slot flash file",
                 action=make_flash),
            Step(tuple(argv), f"boot {board.name}, send {req.weights.name} into the inactive slot",
                 tool=argv[0], action=lambda: boot(send), notes=notes),
            Step(tuple(argv), f"reboot {board.name} on the new slot", tool=argv[0],
                 action=lambda: boot(after))]


def scp_steps(req: FlashRequest) -> list[Step]:
    board = req.board
    check_image(req)
    host, folder = scp_target(req)
    if not board.slots.store:
        raise FlashError(f"board {board.name}: --slot auto over scp needs [slots] store",
                         path=board.path)
    remote = f"{folder.rstrip('/')}/{req.weights.name}"
    install = ["colibri-slot", "install", board.slots.store, remote]
    install += ["--trusted-key", req.trusted_key.hex()] if req.trusted_key else []
    install += ["--allow-older"] if req.allow_older else []
    return [Step(("ssh", host, f"mkdir -p {shlex.quote(folder)}"), f"create {folder} on {host}",
                 tool="ssh"),
            Step(("scp", str(req.weights), f"{host}:{folder}/"), "copy the image", tool="scp"),
            Step(("ssh", host, shlex.join(install)),
                 "install it into the inactive slot (verified before the record flips)",
                 tool="ssh", notes=("the next colibri-run --slots tries it and confirms it",))]


def plan(req: FlashRequest, backend: str) -> list[Step]:
    if backend == "qemu":
        return qemu_steps(req)
    if backend == "scp":
        return scp_steps(req)
    raise FlashError(f"--slot auto needs a backend that reaches the device's slot record: qemu "
                     f"(serial protocol to the ota_runner firmware) or scp (colibri-slot on a "
                     f"Linux board); {backend} writes memory through a probe and has no slot "
                     f"support yet (docs/ota.md)")


def serial_update(url: str, image: Path, *, trusted_key: bytes | None = None,
                  allow_older: bool = False, timeout: float = 300.0) -> int:
    """Send image into the inactive slot of the device that serves the serial
    protocol at url (a serial port, a pseudo-terminal, socket://HOST:PORT).
    Before opening the port: the image is signed by trusted_key (when given)
    and passes the device's own image checks; then the device has slots and
    they are large enough. The device verifies it before it flips its record;
    its next reset tries it. Replies that contradict what was sent fail it."""
    if is_hex_file(image):
        raise FlashError("--slot auto sends a model image (model.bin, signed or not), not a HEX "
                         "file", path=image)
    data = image.read_bytes()
    _check_signature(data, trusted_key, image)
    with SerialClient.open(url, timeout=min(timeout, 60.0), connect_timeout=10) as dev:
        info = dev.connect(timeout=min(timeout, 60.0))
        try:
            state = dev.slot_state()
        except DeviceError as exc:
            raise FlashError(f"the device ({info.board}) has no A/B weight slots: {exc}",
                             path=url) from None
        if len(data) > state.slot_size:
            raise FlashError(f"{len(data)} bytes do not fit a {state.slot_size}-byte slot of "
                             f"{info.board}", path=image)
        _check_fingerprint(data, info)
        _report(dev, info.board)
        result = ota.update(dev, data, allow_older=allow_older, progress=_progress)
        _report(dev, info.board)
    print(f"colibri-flash: slot {'AB'[result.target]} written and verified; reset the device to "
          f"try it (a first run that does not confirm it brings the other slot back)")
    return 0
