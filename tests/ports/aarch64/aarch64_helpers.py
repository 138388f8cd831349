"""Helpers for the AArch64 port tests: build firmware, boot it under QEMU as
the board file's [emulate] table says, read the self-test's report.

Imported by name (the conftest puts this folder, tools/ and tests/ on sys.path).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from dataclasses import dataclass

from colibri_tools.board.boards import Board
from colibri_tools.board.qemu import NO_NETWORK

REPO = pathlib.Path(__file__).resolve().parents[3]
QEMU_TIMEOUT_S = 60        # a self-test run takes well under a second
BUILD_TIMEOUT_S = 600
PROMPT_LEN = 8             # samples/baremetal/board_selftest/main.c
GEN_TOKENS = 8
EXIT_FAULT = 3             # ports/baremetal/aarch64/exceptions.c
EXIT_BAD_EL = 4            # ports/baremetal/aarch64/startup.S


def selftest_prompt(vocab_size: int) -> list[int]:
    """The self-test's fixed prompt: ids (1 + 3 i) mod vocab_size."""
    return [(1 + 3 * i) % vocab_size for i in range(PROMPT_LEN)]


def make(*args: str, timeout: int = BUILD_TIMEOUT_S) -> subprocess.CompletedProcess:
    jobs = f"-j{min(os.cpu_count() or 1, 8)}"
    return subprocess.run(["make", "-s", jobs, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False)


def missing_tool_reason(*tools: str) -> str | None:
    for tool in tools:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup.sh installs it)"
    return None


@dataclass(frozen=True)
class Firmware:
    board: Board
    directory: pathlib.Path      # build/fw/<board>/<app> under the test's BUILD

    @property
    def elf(self) -> pathlib.Path:
        return self.directory / "firmware.elf"

    @property
    def objects(self) -> pathlib.Path:
        return self.directory / "obj"


def build_firmware(board: Board, app: str, model_dir: pathlib.Path,
                   build_dir: pathlib.Path) -> Firmware:
    done = make("firmware", f"BOARD={board.name}", f"APP={app}", f"MODEL_DIR={model_dir}",
                f"BUILD={build_dir}")
    if done.returncode != 0:
        raise AssertionError(f"firmware build failed:\n{done.stdout}\n{done.stderr}")
    return Firmware(board, build_dir / "fw" / board.name / app)


def qemu_command(board: Board, elf: pathlib.Path, image: pathlib.Path | None,
                 machine_options: str = "") -> list[str]:
    """qemu-system-* from the board's [emulate] table, the console UART on
    stdio, the firmware with -kernel and the weights with QEMU's generic
    loader at the board's weight address."""
    emu = board.emulate
    cmd = ["timeout", str(QEMU_TIMEOUT_S), emu["qemu"], "-M", emu["machine"] + machine_options,
           "-cpu", emu["cpu"], "-m", emu["memory"], *emu.get("extra", []),
           "-display", "none", "-monitor", "none", "-serial", "stdio", *NO_NETWORK,
           "-kernel", str(elf)]
    if image is not None:
        cmd += ["-device", f"loader,file={image},addr=0x{board.weights.origin:X},force-raw=on"]
    return cmd


@dataclass(frozen=True)
class SelftestRun:
    returncode: int
    output: str

    def values(self, key: str) -> list[str]:
        """Every "key: value" line's value, in order."""
        prefix = key + ": "
        return [line[len(prefix):].strip() for line in self.output.splitlines()
                if line.startswith(prefix)]

    def value(self, key: str) -> str:
        found = self.values(key)
        assert len(found) == 1, f"expected one '{key}:' line, got {found}\n{self.output}"
        return found[0]

    def field(self, key: str, name: str) -> str:
        """The word after `name` in the line `key: ... name WORD ...`."""
        words = self.value(key).split()
        assert name in words, f"no '{name}' in '{key}: {self.value(key)}'"
        return words[words.index(name) + 1]


def run_firmware(firmware: Firmware, image: pathlib.Path | None, *, stdin: bytes = b"",
                 machine_options: str = "") -> SelftestRun:
    done = subprocess.run(qemu_command(firmware.board, firmware.elf, image, machine_options),
                          input=stdin, capture_output=True, timeout=QEMU_TIMEOUT_S + 10,
                          check=False)
    output = done.stdout.decode(errors="replace")
    assert done.returncode != 124, f"QEMU timed out after {QEMU_TIMEOUT_S} s:\n{output}"
    return SelftestRun(done.returncode, output)


def elf_symbols(nm: str, elf: pathlib.Path) -> dict[str, tuple[int, str]]:
    """name -> (value, type letter) from nm."""
    out = subprocess.run([nm, str(elf)], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            table[parts[2]] = (int(parts[0], 16), parts[1])
    return table
