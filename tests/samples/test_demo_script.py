"""The README's main command, scripts/demo.sh, minus set-up: the board demo
script must run end to end and print MATCH (short generation, fast board)."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None or
                    shutil.which("arm-none-eabi-gcc") is None,
                    reason="qemu-system-arm or arm-none-eabi-gcc missing (scripts/setup.sh)")
def test_board_demo_prints_match():
    done = subprocess.run([sys.executable, "scripts/demo_board.py", "--board", "qemu_an500",
                           "--gen", "8", "--prompt", "Emma"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "hello_moe on qemu_an500" in done.stdout
    assert done.stdout.rstrip().endswith("MATCH")


@pytest.mark.skipif(shutil.which("qemu-system-arm") is None or
                    shutil.which("arm-none-eabi-gcc") is None,
                    reason="qemu-system-arm or arm-none-eabi-gcc missing (scripts/setup.sh)")
def test_paged_demo_prints_match():
    """scripts/demo.sh --paged: models/paged_moe, whose experts are 3.4 times
    the Cortex-M55 board's RAM, read from storage into an expert cache."""
    done = subprocess.run([sys.executable, "scripts/demo_board.py", "--paged", "--gen", "8"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "paged_moe on qemu_an547" in done.stdout
    figures = done.stdout.split("== the figures")[1]
    assert "the experts are 3.4x the RAM" in figures and "hit rate" in figures
    assert done.stdout.rstrip().endswith("MATCH")
