"""The openocd backend: one `openocd -f CONFIG -c "program FILE verify ..."`
run that writes the weights and the firmware (OpenOCD's `program` erases,
writes and, with verify, reads back and compares), then starts the firmware.

Weights in external QSPI flash need a flash bank for that memory (the stmqspi
driver on STM32): [flash] openocd_qspi_bank names the bank the config file
declares, or openocd_external gives commands that declare it. The firmware is
then started with "reset init" + "resume", so that the config's reset-init
handler maps the QSPI before the firmware reads the weights (override with
[flash] openocd_start)."""

from __future__ import annotations

from ..hex_image import is_hex_file
from .common import (
    FlashError,
    FlashRequest,
    Step,
    external_loader_missing,
    flash_key,
    string_list,
    tcl_word,
    weights_external,
)

EXTERNAL_HINT = ("the name of the flash bank its openocd_config declares for that memory "
                 "(OpenOCD's board/stm32h747i-disco.cfg declares 'stm32h747xih6.qspi' with "
                 "QUADSPI=1), or set [flash] openocd_external to OpenOCD commands that declare "
                 "one, e.g. ['flash bank $_CHIPNAME.qspi stmqspi 0x90000000 0 0 0 "
                 "$_CHIPNAME.cpu0 0x52005000']")


def _configs(req: FlashRequest) -> list[str]:
    board = req.board
    configs = string_list(board, "openocd_config")
    if not configs:
        raise FlashError(f"board {board.name}: [flash] has no openocd_config (the -f config, "
                         f"e.g. board/stm32h747i-disco.cfg)", path=board.path)
    return configs


def _start(req: FlashRequest, external: bool) -> list[str]:
    start = string_list(req.board, "openocd_start")
    if start is not None:
        return start
    return ["reset init", "resume"] if external else ["reset run"]


def plan(req: FlashRequest) -> list[Step]:
    board = req.board
    external = weights_external(board)
    before = string_list(board, "openocd_external") or []
    if req.weights is not None and external and not before \
            and not flash_key(board, "openocd_qspi_bank", str):
        raise external_loader_missing(board, "OpenOCD", "openocd_qspi_bank", EXTERNAL_HINT)
    verify = " verify" if req.verify else ""
    argv = ["openocd"]
    argv += ["-c", f"adapter serial {tcl_word(req.probe)}"] if req.probe else []
    for command in before:
        argv += ["-c", command]
    for config in _configs(req):
        argv += ["-f", config]
    what = []
    if req.weights is not None:
        where = "" if is_hex_file(req.weights) else f" 0x{board.weights.origin:08X}"
        argv += ["-c", f"program {tcl_word(str(req.weights))}{verify}{where}"]
        what.append("the weights")
    if req.firmware is not None:
        argv += ["-c", f"program {tcl_word(str(req.firmware))}{verify}"]
        what.append("the firmware")
    for command in [*_start(req, external), "shutdown"]:
        argv += ["-c", command]
    return [Step(tuple(argv), f"write {' and '.join(what)}{verify and ', verify'}, start",
                 tool="openocd")]
