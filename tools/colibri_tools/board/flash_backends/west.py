"""The west backend: the weights as a HEX file through the runner of a Zephyr
build (`west flash --skip-rebuild --hex-file`), then `west flash` for the
firmware itself, so the board's runner configuration (probe, external loader)
serves both. The build directory must hold a configured build (runners.yaml)."""

from __future__ import annotations

from ..hex_image import build_hex, is_hex_file
from .common import (
    FlashError,
    FlashRequest,
    Step,
    board_ref,
    external_loader_missing,
    flash_key,
    string_list,
    weights_external,
)

EXTERNAL_HINT = ("the runner options that reach the external flash (e.g. ['--extload', "
                 "'<loader>.stldr'] for the stm32cubeprogrammer runner), or [] when the "
                 "board's runner already handles it")


def _west(req: FlashRequest) -> list[str]:
    argv = ["west", "flash", "--build-dir", str(req.build_dir)]
    runner = flash_key(req.board, "west_runner", str)
    argv += ["-r", runner] if runner else []
    argv += ["--dev-id", req.probe] if req.probe else []
    return argv


def _hex_step(req: FlashRequest, out) -> Step:
    board, weights = req.board, req.weights

    def run() -> int:
        out.parent.mkdir(parents=True, exist_ok=True)
        print(build_hex(weights, board, out).summary())
        return 0

    return Step(("colibri-image", str(weights), "--board", board_ref(board), "-o", str(out)),
                "write the weights as Intel HEX at the board's weight address", action=run)


def plan(req: FlashRequest) -> list[Step]:
    board = req.board
    if req.build_dir is None:
        raise FlashError("the west backend flashes a Zephyr build: give --build-dir")
    if req.firmware is not None:
        raise FlashError("with west the firmware is the Zephyr build in --build-dir; "
                         "drop --firmware")
    steps = []
    if req.weights is not None:
        extra = string_list(board, "west_weights_args")
        if weights_external(board) and extra is None:
            raise external_loader_missing(board, "the west runner", "west_weights_args",
                                          EXTERNAL_HINT)
        hex_path = req.weights
        if not is_hex_file(req.weights):
            hex_path = req.workdir / "weights.hex"
            steps.append(_hex_step(req, hex_path))
        steps.append(Step((*_west(req), "--skip-rebuild", "--hex-file", str(hex_path),
                           *(extra or [])), "flash the weights HEX", tool="west",
                          notes=(("the runner verifies as its flash tool does; on the board, "
                                 "colibri_verify() checks every tensor's CRC-32"),)))
    steps.append(Step(tuple(_west(req)), "build if needed, flash the Zephyr firmware and reset",
                      tool="west"))
    return steps
