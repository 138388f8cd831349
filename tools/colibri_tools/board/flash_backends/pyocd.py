"""The pyocd backend: `pyocd flash` for the weights and the firmware, and a
readback of the weight region (`pyocd commander -c savemem`) compared with the
weights file. Weights in external QSPI flash need a flash algorithm (FLM) for
that memory, given by a pyOCD user script named in [flash] pyocd_script."""

from __future__ import annotations

from ..hex_image import is_hex_file
from .common import (
    FlashError,
    FlashRequest,
    Step,
    board_file,
    check_step,
    external_loader_missing,
    flash_key,
    weights_external,
    weights_span,
)

SCRIPT_HINT = ("a pyOCD user script whose will_connect() adds the external memory with "
               "target.memory_map.add_region(FlashRegion(start=..., length=..., blocksize=..., "
               "flm='<the board's QSPI loader>.FLM')); the vendor's CMSIS pack usually ships "
               "that FLM for its discovery boards")


def _connection(req: FlashRequest, script: str | None) -> list[str]:
    board = req.board
    target = flash_key(board, "pyocd_target", str)
    if not target:
        raise FlashError(f"board {board.name}: [flash] has no pyocd_target (the name "
                         f"`pyocd list --targets` shows)", path=board.path)
    args = ["-t", target]
    pack = board_file(board, "pyocd_pack")
    args += ["--pack", pack] if pack else []
    args += ["--script", script] if script else []
    args += ["-u", req.probe] if req.probe else []
    return args


def plan(req: FlashRequest) -> list[Step]:
    board, steps = req.board, []
    if req.weights is not None:
        script = board_file(board, "pyocd_script")
        if weights_external(board) and not script:
            said = " ([flash] pyocd_qspi = false)" if board.flash.get("pyocd_qspi") is False else ""
            raise external_loader_missing(board, f"pyOCD{said}", "pyocd_script", SCRIPT_HINT)
        conn = _connection(req, script)
        address, size = weights_span(board, req.weights)
        if is_hex_file(req.weights):
            write = ["pyocd", "flash", *conn, "--format", "hex", "--no-reset", str(req.weights)]
        else:
            write = ["pyocd", "flash", *conn, "--base-address", f"0x{address:08X}",
                     "--format", "bin", "--no-reset", str(req.weights)]
        steps.append(Step(tuple(write), f"write the weights at 0x{address:08X}", tool="pyocd"))
        if req.verify:
            readback = req.workdir / "weights.readback"
            steps.append(Step(("pyocd", "commander", *conn, "-c",
                               f"savemem 0x{address:08X} {size} {readback}"),
                              f"read {size} bytes back from 0x{address:08X}", tool="pyocd"))
            steps.append(check_step(req, readback))
    if req.firmware is not None:
        steps.append(Step(("pyocd", "flash", *_connection(req, None), str(req.firmware)),
                          "write the firmware and reset", tool="pyocd"))
    return steps
