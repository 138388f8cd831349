"""Firmware the tools' tests share: built once into build/tests-tools (make
keeps it up to date), for the demo model at context 64."""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build" / "tests-tools"


def demo_model() -> Path:
    """models/tiny_moe converted at context 64 (fits every board's RAM)."""
    from colibri_tools.converter.convert import convert

    out = BUILD / "demo64"
    if not (out / "model.bin").is_file():
        convert(REPO / "models" / "tiny_moe", out, context=64, progress=False)
    return out


def firmware(board: str, app: str = "serial_runner") -> Path:
    done = subprocess.run(["make", "-s", "firmware", f"BUILD={BUILD}", f"BOARD={board}",
                           f"APP={app}", f"MODEL_DIR={demo_model()}"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return BUILD / "fw" / board / app / "firmware.elf"
