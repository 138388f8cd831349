"""Helpers for the Cortex-M port tests: build firmware with the top-level
Makefile, boot it in QEMU as the board file's [emulate] table says, parse the
self-test's lines, and get the x86-64 reference from colibri-run.

Imported by name: conftest.py puts this folder, tools/ and tests/ on sys.path.
"""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np
from colibri_tools.board import boards

REPO = pathlib.Path(__file__).resolve().parents[3]
CC = "arm-none-eabi-gcc"
NM = "arm-none-eabi-nm"
QEMU = "qemu-system-arm"
QEMU_BOARDS = ("qemu_an547", "qemu_an500")
STM32_BOARDS = ("stm32h747i_disco", "stm32h750b_dk")
SELFTEST = "board_selftest_m"
N_IDS = 8  # samples/baremetal/board_selftest_m/main.c
N_GEN = 8
QEMU_TIMEOUT = 60


def missing_tools(*tools: str) -> list[str]:
    return [tool for tool in tools if shutil.which(tool) is None]


def prompt_ids(vocab: int) -> list[int]:
    """The self-test's prompt: ids[i] = (7 i + 3) mod vocab."""
    return [(7 * i + 3) % vocab for i in range(N_IDS)]


@dataclass(frozen=True)
class Firmware:
    board: str
    app: str
    directory: pathlib.Path

    @property
    def elf(self) -> pathlib.Path:
        return self.directory / "firmware.elf"

    @property
    def obj(self) -> pathlib.Path:
        return self.directory / "obj"


def build_firmware(board: str, model_dir: pathlib.Path, build_dir: pathlib.Path,
                   app: str = SELFTEST) -> Firmware:
    """`make firmware BOARD=board APP=app MODEL_DIR=model_dir BUILD=build_dir`."""
    done = subprocess.run(
        ["make", "-s", "-j2", "firmware", f"BOARD={board}", f"APP={app}",
         f"MODEL_DIR={model_dir}", f"BUILD={build_dir}"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise AssertionError(f"make firmware BOARD={board} APP={app} failed:\n"
                             f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return Firmware(board, app, build_dir / "fw" / board / app)


def qemu_argv(board_name: str, elf: pathlib.Path, image: pathlib.Path | None) -> list[str]:
    """The QEMU command line from the board file's [emulate] table; the model
    image goes to the board's weight address with QEMU's generic loader."""
    board = boards.load(board_name)
    emulate = board.emulate
    argv = [emulate["qemu"], "-M", emulate["machine"], "-cpu", emulate["cpu"],
            "-m", emulate["memory"], *emulate.get("extra", []),
            "-display", "none", "-monitor", "none", "-serial", "stdio",
            "-kernel", str(elf)]
    if image is not None:
        argv += ["-device",
                 f"loader,file={image},addr=0x{board.weights.origin:X},force-raw=on"]
    return argv


def run_qemu(board_name: str, elf: pathlib.Path, image: pathlib.Path | None,
             timeout: int = QEMU_TIMEOUT) -> subprocess.CompletedProcess:
    """Boot the firmware; bounded by coreutils timeout and by subprocess."""
    argv = ["timeout", "--kill-after=5", str(timeout), *qemu_argv(board_name, elf, image)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 15,
                          check=False, stdin=subprocess.DEVNULL)


def fields(line: str) -> dict[str, str]:
    """'isr: status=success equal=yes' -> {'status': 'success', 'equal': 'yes'}."""
    return dict(re.findall(r"(\w+)=(\S+)", line))


def selftest_lines(output: str) -> dict[str, str]:
    """The first line for each key ('ticks', 'image', 'isr', ...)."""
    lines: dict[str, str] = {}
    for line in output.splitlines():
        match = re.match(r"^(\w+):", line)
        if match and match.group(1) not in lines:
            lines[match.group(1)] = line
    return lines


def selftest_logits(output: str, vocab: int) -> np.ndarray:
    """The 'logits ROW 0x... 0x...' lines as float32 [N_IDS, vocab]."""
    rows = {}
    for line in output.splitlines():
        if line.startswith("logits "):
            parts = line.split()
            rows[int(parts[1])] = [int(word, 16) for word in parts[2:]]
    assert sorted(rows) == list(range(N_IDS)), sorted(rows)
    words = np.array([rows[i] for i in range(N_IDS)], dtype=np.uint32)
    assert words.shape == (N_IDS, vocab), words.shape
    return words.view(np.float32)


def host_reference(colibri_run: pathlib.Path, image: pathlib.Path, vocab: int,
                   work: pathlib.Path) -> tuple[np.ndarray, list[int]]:
    """x86-64 colibri-run on the same image and prompt: prompt logits and the
    greedily generated ids."""
    logits_path = work / "reference_logits.f32"
    done = subprocess.run(
        [str(colibri_run), str(image), "--ids", ",".join(map(str, prompt_ids(vocab))),
         "--gen", str(N_GEN), "--all-logits", str(logits_path)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    logits = np.fromfile(logits_path, dtype="<f4").reshape(N_IDS, vocab)
    return logits, [int(x) for x in done.stdout.split()]


def elf_symbols(elf: pathlib.Path) -> dict[str, int]:
    out = subprocess.run([NM, str(elf)], capture_output=True, text=True, check=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            symbols[parts[2]] = int(parts[0], 16)
    return symbols
