"""The stm32cubeprogrammer backend: ST's STM32_Programmer_CLI over the board's
ST-LINK (SWD), the way Zephyr's stm32cubeprogrammer runner calls it, for
bare-metal firmware (no Zephyr build needed). Weights in the external QSPI
flash go through ST's external loader for the board ([flash]
cubeprogrammer_external_loader, a .stldr file STM32CubeProgrammer ships in
its bin/ExternalLoader folder); each write is verified by the tool (--verify),
the firmware last, then started."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..hex_image import is_hex_file
from .common import (
    FlashError,
    FlashRequest,
    Step,
    external_loader_missing,
    flash_key,
    weights_external,
)

CLI = "STM32_Programmer_CLI"
EXTERNAL_HINT = ("the external loader file for the board's QSPI flash, as STM32CubeProgrammer "
                 "ships it in bin/ExternalLoader (MT25TL01G_STM32H747I-DISCO.stldr for the "
                 "STM32H747I-DISCO)")


def _loader(name: str) -> str:
    """A loader named by file name lives in STM32CubeProgrammer's ExternalLoader folder."""
    if Path(name).is_absolute():
        return name
    cli = shutil.which(CLI)
    folder = Path(cli).resolve().parent / "ExternalLoader" if cli else Path("ExternalLoader")
    return str(folder / name)


def _connect(req: FlashRequest) -> list[str]:
    options = "port=swd reset=HWrst" + (f" sn={req.probe}" if req.probe else "")
    return [CLI, "--connect", options]


def plan(req: FlashRequest) -> list[Step]:
    board, steps = req.board, []
    verify = ["--verify"] if req.verify else []
    if req.weights is not None:
        loader = flash_key(board, "cubeprogrammer_external_loader", str)
        if weights_external(board) and not loader:
            raise external_loader_missing(board, "STM32CubeProgrammer",
                                          "cubeprogrammer_external_loader", EXTERNAL_HINT)
        where = [] if is_hex_file(req.weights) else [f"0x{board.weights.origin:08X}"]
        argv = [*_connect(req), *(["-el", _loader(loader)] if loader else []),
                "--download", str(req.weights), *where, *verify]
        steps.append(Step(tuple(argv), "write the weights" + (", verify" if verify else ""),
                          tool=CLI))
    if req.firmware is not None:
        steps.append(Step((*_connect(req), "--download", str(req.firmware), *verify, "--start"),
                          "write the firmware" + (", verify" if verify else "") + ", start",
                          tool=CLI))
    if not steps:
        raise FlashError("nothing to write: give --weights and/or --firmware")
    return steps
