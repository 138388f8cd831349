"""west colibri-flash / west colibri-test: Colibri's flashing and serial test
runner for a Zephyr build, with the board and the firmware taken from the
build directory (docs/flashing.md, "West").

    west build -b stm32h747i_disco/stm32h747xx/m7 samples/zephyr/serial_runner -- \\
        -DCOLIBRI_MODEL_DIR=$PWD/out/model
    west colibri-flash --weights out/model/model.bin          # colibri-flash --backend west
    west colibri-test suite.json --weights out/model/model.bin --port /dev/ttyACM0

The build's Zephyr board (BOARD in CMakeCache.txt) names the Colibri board
file whose zephyr_board equals it; --board overrides. On a board Colibri
emulates (qemu_an547), both boot build/zephyr/zephyr.elf in QEMU instead.
The work is done by the colibri_tools package (colibri-flash, colibri-test),
installed in west's Python or found in this checkout's tools/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from west.commands import WestCommand

CHECKOUT_TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _tools():
    """The colibri_tools package: installed, else the one beside this file."""
    try:
        import colibri_tools  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(CHECKOUT_TOOLS))
    from colibri_tools.board import boards, flash
    from colibri_tools.testing import suite_runner

    return boards, flash, suite_runner


def zephyr_board(build_dir: Path) -> str | None:
    """BOARD of a configured Zephyr build (its CMakeCache.txt)."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith("BOARD:STRING="):
            return line.split("=", 1)[1].strip()
    return None


def colibri_board(boards, build_dir: Path, given: str | None) -> str:
    if given:
        return given
    target = zephyr_board(build_dir)
    if target is None:
        raise SystemExit(f"west colibri: {build_dir} is not a configured Zephyr build (no "
                         "CMakeCache.txt): build first, or give --build-dir and --board")
    for name in boards.board_names():
        if boards.load(name).zephyr_board in (target, target.split("/")[0]):
            return name
    known = ", ".join(f"{n} ({boards.load(n).zephyr_board})" for n in boards.board_names()
                      if boards.load(n).zephyr_board)
    raise SystemExit(f"west colibri: no Colibri board file has zephyr_board = {target!r}; give "
                     f"--board (boards with one: {known})")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-d", "--build-dir", type=Path, default=Path("build"),
                        help="the Zephyr build directory (default: build)")
    parser.add_argument("--board", help="Colibri board name or .toml (default: the board file "
                        "whose zephyr_board is the build's BOARD)")
    parser.add_argument("--weights", required=True, help="model.bin or a weights HEX")


def _emulated(boards, name: str, backend: str | None) -> bool:
    return backend in (None, "qemu") and "machine" in boards.load(name).emulate


class ColibriFlash(WestCommand):
    def __init__(self):
        super().__init__("colibri-flash", "write weights and the Zephyr build to the board",
                         __doc__.split("\n\n")[0], accepts_unknown_args=True)

    def do_add_parser(self, parser_adder):
        parser = parser_adder.add_parser(self.name, help=self.help,
                                         description=self.description)
        _common(parser)
        parser.add_argument("--backend", help="colibri-flash backend (default: west for a real "
                            "board, qemu for an emulated one)")
        return parser

    def do_run(self, args, unknown):
        boards, flash, _ = _tools()
        name = colibri_board(boards, args.build_dir, args.board)
        argv = ["--board", name, "--weights", args.weights]
        if _emulated(boards, name, args.backend):
            argv += ["--backend", "qemu", "--firmware",
                     str(args.build_dir / "zephyr" / "zephyr.elf")]
        else:
            argv += ["--backend", args.backend or "west", "--build-dir", str(args.build_dir)]
        sys.exit(flash.main(argv + unknown))


class ColibriTest(WestCommand):
    def __init__(self):
        super().__init__("colibri-test", "run a golden suite on the board of a Zephyr build",
                         __doc__.split("\n\n")[0], accepts_unknown_args=True)

    def do_add_parser(self, parser_adder):
        parser = parser_adder.add_parser(self.name, help=self.help,
                                         description=self.description)
        parser.add_argument("suite", help="suite JSON from colibri-test golden")
        _common(parser)
        parser.add_argument("--backend", help="as for west colibri-flash")
        return parser

    def do_run(self, args, unknown):
        boards, _, suite_runner = _tools()
        name = colibri_board(boards, args.build_dir, args.board)
        argv = ["run", args.suite, "--board", name, "--weights", args.weights]
        if _emulated(boards, name, args.backend):
            argv += ["--firmware", str(args.build_dir / "zephyr" / "zephyr.elf")]
        else:
            argv += ["--backend", args.backend or "west", "--build-dir", str(args.build_dir)]
        sys.exit(suite_runner.main(argv + unknown))
