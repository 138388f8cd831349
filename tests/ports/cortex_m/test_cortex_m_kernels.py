"""Every kernel table of a Cortex-M QEMU board against the contract, kernel
by kernel, on the emulated CPU itself: tests/sdk/test_kernels.c built for
the board (its compiler flags and `kernels` from the board file) with a
minimal bare-metal start (kernels_m/) and newlib's semihosting, run in
QEMU. On qemu_an547 that checks the Helium table (Cortex-M55, MVE) slot by
slot, the quantized products included, on qemu_an500 the DSP table
(Cortex-M7, SMLAD), both against the C library's fmaf/rintf definition, as
the host tables are checked under ASan."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest
from cm_helpers import CC, QEMU, REPO, missing_tools, qemu_argv
from colibri_tools.board import boards
from kernel_slots import kernel_sources

HERE = REPO / "tests" / "ports" / "cortex_m" / "kernels_m"
BOARDS = ("qemu_an547", "qemu_an500")  # Helium (Cortex-M55), DSP (Cortex-M7)


def _cc(args: list[str]) -> None:
    done = subprocess.run([CC, *args], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _build(board_name: str, out: pathlib.Path) -> pathlib.Path:
    board = boards.load(board_name)
    subprocess.run([sys.executable, "-m", "colibri_tools.board.board_cli", "ld", board_name, "-o",
                    str(out / "memory.ld")], cwd=REPO, check=True, timeout=60)
    tables = [*board.kernels, "reference"]
    table_list = "".join(f"&colibri_kernels_{name}," for name in tables)
    flags = [*board.cflags, "-std=c11", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off",
             "-fno-fast-math", "-O2", f"-I{REPO / 'sdk/include'}", f"-I{REPO / 'sdk/src'}",
             f"-DCOLIBRI_TEST_KERNEL_TABLES={table_list}"]
    # The test's own definition stays scalar: GCC would vectorise some of its
    # fp32 loops with MVE, whose float instructions flush subnormals.
    spec = out / "test_kernels.o"
    _cc([*flags, "-fno-tree-vectorize", "-c", str(REPO / "tests/sdk/test_kernels.c"), "-o",
         str(spec)])
    sources = [*sorted(HERE.glob("*.c")), *sorted((REPO / "sdk/src").glob("*.c")),
               *sorted({path for name in tables for path in kernel_sources(name)})]
    elf = out / "test_kernels.elf"
    _cc([*flags, "--specs=rdimon.specs", f"-L{out}", "-T", str(HERE / "link.ld"), str(spec),
         *map(str, sources), "-lm", "-o", str(elf)])
    return elf


@pytest.mark.parametrize("board_name", BOARDS)
def test_board_kernel_tables_meet_the_contract(board_name, tmp_path):
    missing = missing_tools(CC, QEMU)
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/setup.sh installs them)")
    elf = _build(board_name, tmp_path)
    argv = ["timeout", "--kill-after=5", "300", *qemu_argv(board_name, elf, None)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=320, check=False,
                          stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    for name in boards.load(board_name).kernels:
        assert f"{name}: checked" in output, output[-3000:]
    assert "reference: checked" in output
    assert re.search(r"^\d+ passed, 0 failed$", output, re.M), output[-3000:]
