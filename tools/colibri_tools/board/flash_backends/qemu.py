"""The qemu backend: boot the emulated board from its [emulate] table, serial on
stdio (or a TCP port with --port), bounded by the request's timeout. The exit
status is the firmware's (semihosting)."""

from __future__ import annotations

import sys

from .. import qemu as launcher
from .common import FlashError, FlashRequest, Step


def plan(req: FlashRequest) -> list[Step]:
    board = req.board
    if req.firmware is None:
        raise FlashError("the qemu backend boots firmware: give --firmware firmware.elf")
    launcher.check_weight_region(board)
    argv = launcher.qemu_argv(board, req.firmware, req.weights, port=req.port)
    notes = [f"the run is bounded by {req.timeout:g} s, then QEMU is killed"]
    if req.weights is not None and req.verify:
        notes.insert(0, "colibri-flash adds -S and -qmp to this command, reads the weights back "
                        "over QMP (pmemsave) and compares them before the CPU starts")
    if req.port is not None:
        notes.append(f"QEMU waits for a client on the serial port: 127.0.0.1:{req.port} "
                     f"(pyserial URL socket://127.0.0.1:{req.port})")

    def boot() -> int:
        session = launcher.launch(board, req.firmware, req.weights, tcp=req.port is not None,
                                  port=req.port, timeout=req.timeout, verify=req.verify,
                                  capture="tee", check=False)   # plan_flash checked it
        with session:
            if req.port is not None:
                print(f"colibri-flash: serial console on 127.0.0.1:{req.port}, waiting for a "
                      f"client (up to {req.timeout:g} s)", flush=True)
            session.start()
            status = session.wait()
            fault = session.explain(status)
            if fault:
                print(f"colibri-flash: {board.name} stopped on a fault (exit {status}): {fault}",
                      file=sys.stderr)
            return status

    return [Step(tuple(argv), f"boot {board.name} in QEMU", tool=argv[0], action=boot,
                 notes=tuple(notes))]
