"""Where board files come from: the checkout's boards/ (the one copy in git),
a wheel's packaged copy (tests/tools/test_fresh_venv.py), and folders named by
$COLIBRI_BOARDS, which are searched first (a user's own boards, or a changed
copy of a shipped one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _board(argv: list[str], boards: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    env.pop("COLIBRI_BOARDS", None)
    if boards is not None:
        env["COLIBRI_BOARDS"] = boards
    return subprocess.run([sys.executable, "-m", "colibri_tools.board.board_cli", *argv], env=env,
                          capture_output=True, text=True, timeout=60)


def test_checkout_boards_by_default():
    done = _board(["list"], None)
    assert done.returncode == 0
    rows = done.stdout.splitlines()
    assert rows[0].split()[:3] == ["board", "arch", "port"]          # the header row
    assert sorted(line.split()[0] for line in rows[1:]) == sorted(
        p.stem for p in (REPO / "boards").glob("*.toml"))


def test_colibri_boards_adds_and_overrides(tmp_path):
    mine, override = tmp_path / "mine", tmp_path / "override"
    mine.mkdir()
    override.mkdir()
    text = (REPO / "boards" / "qemu_an547.toml").read_text()
    (mine / "my_m55.toml").write_text(text.replace('name = "qemu_an547"', 'name = "my_m55"'))
    (override / "qemu_an547.toml").write_text(
        text.replace("0x90000000", "0x91000000").replace("0x9000_0000", "0x9100_0000"))
    dirs = os.pathsep.join([str(mine), str(override)])
    listed = _board(["list"], dirs).stdout.split("\n")
    names = [line.split()[0] for line in listed if line]
    assert "my_m55" in names and "qemu_an547" in names and "rpi4" in names
    assert "0x91000000" in _board(["header", "qemu_an547"], dirs).stdout  # the first folder wins
    assert "0x90000000" in _board(["header", "qemu_an547"], None).stdout


def test_no_board_files_is_an_error_not_an_empty_list(tmp_path, monkeypatch):
    from colibri_tools.board import board_cli, boards

    monkeypatch.setattr(boards, "BOARDS_DIR", tmp_path)
    monkeypatch.delenv("COLIBRI_BOARDS", raising=False)
    assert board_cli.main(["list"]) == 1
