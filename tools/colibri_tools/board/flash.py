"""colibri-flash: put the weights and the firmware on a board, or boot its emulation.

    colibri-flash --board stm32h747i_disco --weights model.bin --firmware firmware.elf
    colibri-flash --board qemu_virt_a72 --weights model.bin --firmware firmware.elf --port 5555
    colibri-flash --board B --backend openocd --weights weights.hex --dry-run
    colibri-flash --board qemu_virt_a72 --slot auto --weights model.signed.bin --firmware ota.elf
    colibri-flash --slot auto --serial /dev/ttyACM0 --weights model.signed.bin --trusted-key K.pub
    colibri-flash --build-dir build --weights model.bin --flash-file flash.bin   (Zephyr storage)

Library first: plan_flash() makes a FlashPlan (the exact commands, from the
board file), run_plan() runs it, format_plan() prints it; main() is the CLI.

Before any command: the weights must fit the board's weight region (a
model.bin is validated and its size checked; a HEX must have bytes there),
and no firmware byte may land inside the weight region. Backends:
colibri_tools/board/flash_backends/. docs/flashing.md says what each one does.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ColibriError
from ..image.signing import check_image, load_public_key
from ..version import add_version_option
from . import ota
from .board_check import check_firmware
from .boards import REPO, Board, in_source_tree, load
from .flash_backends import PLANNERS, FlashError, FlashRequest, Step
from .flash_backends import slots as slot_backend
from .flash_backends.common import INSTALL_HINTS
from .hex_firmware import Piece, check_layout, check_model, load_firmware, model_piece
from .hex_image import hex_extent, is_hex_file

# Readbacks and converted files: the checkout's build/, else (an installed
# wheel) the user's cache, never the installation's own folders.
WORK_ROOT = REPO / "build" / "flash" if in_source_tree() else \
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "colibri" / "flash"


@dataclass(frozen=True)
class FlashPlan:
    board: Board
    backend: str
    steps: tuple[Step, ...]
    workdir: Path          # readbacks and converted files


def supported_backends(board: Board) -> list[str]:
    """Backends the board file allows: [flash] backends if given; else the
    [flash] method plus every backend whose keys the board file has
    (pyocd_target, openocd_config, west_runner, path for scp), plus qemu when
    [emulate] names a QEMU machine."""
    flash = board.flash
    declared = flash.get("backends")
    if declared is not None and not isinstance(declared, list):
        raise FlashError(f"board {board.name}: [flash] backends must be a list", path=board.path)
    if declared is None:
        keys = {"pyocd": "pyocd_target", "openocd": "openocd_config", "west": "west_runner",
                "scp": "path", "stm32cubeprogrammer": "cubeprogrammer_external_loader"}
        declared = [flash.get("method")] + [name for name, key in keys.items() if key in flash]
    names = list(dict.fromkeys(d for d in declared if d in PLANNERS))
    if "machine" in board.emulate and "qemu" not in names:
        names.append("qemu")
    return names


def default_backend(board: Board) -> str:
    method = board.flash.get("method")
    if method in PLANNERS:
        return method
    names = supported_backends(board)
    if not names:
        how = f" (its [flash] method is {method!r})" if method else ""
        raise FlashError(f"board {board.name} has no backend colibri-flash can drive{how}; "
                         f"known backends: {', '.join(PLANNERS)}", path=board.path)
    return names[0]


def _check_inputs(board: Board, weights: Path | None, firmware: Path | None) -> None:
    """The weights fit the weight region; no firmware byte lands inside it."""
    for path in (weights, firmware):
        if path is not None and not path.is_file():
            raise FlashError("no such file", path=path)
    if board.port == "linux":            # the weights are a file, mapped anywhere at run time
        if weights is not None and not is_hex_file(weights):
            check_model(weights, board)
            check_image(weights, weights)
        if firmware is not None:
            check_firmware(board, firmware)
        return
    pieces: list[Piece] = []
    if weights is not None and is_hex_file(weights):
        lo, hi = hex_extent(weights, board.weights)
        pieces.append(Piece(lo, hi - lo, weights.name, data=b""))
    elif weights is not None:
        pieces.append(model_piece(weights, board))
        check_image(weights, weights)
    else:
        pieces.append(Piece(board.weights.origin, 0, "weights", data=b""))
    if firmware is not None:
        check_layout(board.weights, [*pieces, *load_firmware(firmware).pieces], board.name)
        check_firmware(board, firmware)


def plan_flash(board: Board | str, *, backend: str | None = None, weights: str | Path | None = None,
               firmware: str | Path | None = None, build_dir: str | Path | None = None,
               port: int | None = None, probe: str | None = None,
               workdir: str | Path | None = None, timeout: float = 300.0,
               verify: bool = True, host: str | None = None, slot: str | None = None,
               trusted_key: bytes | None = None, allow_older: bool = False) -> FlashPlan:
    board = board if isinstance(board, Board) else load(board)
    backend = backend or default_backend(board)
    if backend not in PLANNERS:
        raise FlashError(f"unknown backend {backend!r}; known: {', '.join(PLANNERS)}")
    allowed = supported_backends(board)
    if backend not in allowed:
        raise FlashError(f"board {board.name} does not support the {backend} backend "
                         f"(it supports: {', '.join(allowed) or 'none'})", path=board.path)
    if weights is None and firmware is None and build_dir is None:
        raise FlashError("nothing to do: give --weights, --firmware or --build-dir")
    weights = Path(weights) if weights is not None else None
    firmware = Path(firmware) if firmware is not None else None
    if slot not in (None, "auto"):
        raise FlashError(f"--slot {slot}: only 'auto' (the slot that is not running)")
    if slot is None:
        _check_inputs(board, weights, firmware)
    request = FlashRequest(board, weights, firmware,
                           Path(build_dir) if build_dir is not None else None, port, probe,
                           Path(workdir) if workdir is not None else WORK_ROOT / board.name,
                           timeout, verify, host, slot, trusted_key, allow_older)
    steps = slot_backend.plan(request, backend) if slot else PLANNERS[backend](request)
    return FlashPlan(board, backend, tuple(steps), request.workdir)


def format_plan(plan: FlashPlan) -> str:
    """One shell-quoted command per line; notes as # comments after their command."""
    lines = []
    for step in plan.steps:
        lines.append(shlex.join(step.argv))
        lines += [f"# {note}" for note in step.notes]
    return "\n".join(lines) + "\n"


def missing_tools(plan: FlashPlan) -> list[str]:
    return sorted({s.tool for s in plan.steps if s.tool and shutil.which(s.tool) is None})


def _install_hint(tool: str) -> str:
    key = "qemu" if tool.startswith("qemu-system") else tool
    return INSTALL_HINTS.get(key, "install it and put it on PATH")


def run_plan(plan: FlashPlan) -> int:
    """Run every step in order; stop at the first failure. Returns the last
    step's exit status (for qemu: the firmware's)."""
    missing = missing_tools(plan)
    if missing:
        raise FlashError("; ".join(f"{tool} not found: {_install_hint(tool)}" for tool in missing))
    plan.workdir.mkdir(parents=True, exist_ok=True)
    status = 0
    for step in plan.steps:
        print(f"colibri-flash: {step.what}", file=sys.stderr)
        status = step.action() if step.action else subprocess.run(step.argv, check=False).returncode
        if status != 0 and plan.backend != "qemu":
            raise FlashError(f"{step.what} failed (exit status {status}): {shlex.join(step.argv)}")
    return status


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="colibri-flash",
                                description="Flash weights and firmware to a board, or boot its "
                                            "QEMU emulation, from its board file.")
    p.add_argument("--board", help="board name (boards/NAME.toml) or a .toml path (required "
                                   "but with --serial)")
    p.add_argument("--weights", type=Path, help="model.bin, or a weights HEX from colibri-image")
    p.add_argument("--firmware", type=Path, help="firmware .elf or .hex")
    p.add_argument("--backend", choices=sorted(PLANNERS),
                   help="default: the board file's [flash] method")
    p.add_argument("--build-dir", type=Path, help="west: the Zephyr build directory")
    p.add_argument("--port", type=int, help="qemu: serve the serial console on this TCP port "
                                            "(default: stdio)")
    p.add_argument("--probe", help="debug probe serial number / unique id")
    p.add_argument("--host", help="scp: the board's user@address (Linux boards)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="qemu: kill the emulation after this many seconds (default 300)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip reading the weights back")
    p.add_argument("--work-dir", type=Path, help="where readbacks go (default build/flash/BOARD)")
    p.add_argument("--slot", choices=["auto"],
                   help="update the A/B weight slot that is not running (docs/ota.md): the "
                        "device verifies the image before it flips its slot record")
    p.add_argument("--trusted-key", type=Path,
                   help="--slot: the public key (PEM) the image must be signed with")
    p.add_argument("--serial", metavar="URL",
                   help="--slot auto to a device that already serves the serial protocol on its "
                        "A/B slots (Zephyr serial_runner with CONFIG_COLIBRI_SLOTS, ota_runner): "
                        "a serial port, /dev/pts/N or socket://HOST:PORT; no board file needed")
    p.add_argument("--allow-older", action="store_true",
                   help="--slot: accept an image whose signed version is below the running one")
    p.add_argument("--flash-file", type=Path, metavar="FILE",
                   help="with --build-dir (a Zephyr build with CONFIG_COLIBRI_STORAGE) and "
                        "--weights: write FILE, the build's storage flash with the image in "
                        "its colibri,storage partition (native_sim: zephyr.exe --flash=FILE); "
                        "no board file needed")
    p.add_argument("--dry-run", action="store_true",
                   help="print the commands, one per line, and run nothing")
    add_version_option(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.serial is not None and (args.slot != "auto" or args.weights is None):
        parser.error("--serial goes with --slot auto --weights IMAGE")
    if args.flash_file is not None:
        return _flash_file(parser, args)
    if args.serial is None and args.board is None:
        parser.error("--board is required (but with --slot auto --serial URL)")
    try:
        key = load_public_key(args.trusted_key) if args.trusted_key else None
        if args.serial is not None:
            if args.dry_run:
                steps = ota.steps_for(args.weights.stat().st_size)
                print(f"# send {args.weights} to the device at {args.serial}: SLOT_BEGIN, "
                      f"SLOT_WRITE x {steps - 2}, SLOT_FINISH")
                return 0
            return slot_backend.serial_update(args.serial, args.weights, trusted_key=key,
                                              allow_older=args.allow_older, timeout=args.timeout)
        plan = plan_flash(args.board, backend=args.backend, weights=args.weights,
                          firmware=args.firmware, build_dir=args.build_dir, port=args.port,
                          probe=args.probe, workdir=args.work_dir, timeout=args.timeout,
                          verify=args.verify, host=args.host, slot=args.slot,
                          trusted_key=key, allow_older=args.allow_older)
        if args.dry_run:
            sys.stdout.write(format_plan(plan))
            for tool in missing_tools(plan):
                print(f"colibri-flash: note: {tool} not found: {_install_hint(tool)}",
                      file=sys.stderr)
            return 0
        return run_plan(plan)
    except (ColibriError, OSError) as exc:
        print(f"colibri-flash: error: {exc}", file=sys.stderr)
        return 1


def _flash_file(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .flash_file import write_partition_file

    if args.build_dir is None or args.weights is None:
        parser.error("--flash-file goes with --build-dir BUILD --weights model.bin")
    try:
        part = write_partition_file(args.flash_file, args.weights, args.build_dir)
    except (ColibriError, OSError) as exc:
        print(f"colibri-flash: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.flash_file}: {part.flash_size} bytes of flash, {args.weights} at "
          f"0x{part.offset:X} in the colibri,storage partition ({part.size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
