"""The suite's prerequisite check (tests/prerequisites.py, run by conftest.py
before any test): each missing piece is found, and pytest stops at once with
one line naming it, its Debian package and scripts/setup.sh."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import prerequisites

REPO = Path(__file__).resolve().parents[1]


def _path_without(tmp_path: Path, hidden: str) -> str:
    """A PATH of links to every command on PATH except `hidden`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for tool in Path(directory).glob("*") if Path(directory).is_dir() else []:
            link = bin_dir / tool.name
            if tool.name != hidden and not link.exists() and os.access(tool, os.X_OK):
                link.symlink_to(tool)
    return str(bin_dir)


def test_this_machine_has_everything():
    assert prerequisites.missing() == []


def test_a_missing_command_is_named_with_its_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _path_without(tmp_path, "qemu-aarch64"))
    absent = prerequisites.missing()
    assert [need.package for need in absent] == ["qemu-user"]
    line = prerequisites.report(absent)
    assert "\n" not in line and "qemu-user" in line and "scripts/setup.sh" in line


def test_a_missing_cross_library_is_found_through_the_compiler(tmp_path, monkeypatch):
    compiler = tmp_path / "bin" / "aarch64-linux-gnu-gcc"
    monkeypatch.setenv("PATH", _path_without(tmp_path, "aarch64-linux-gnu-gcc"))
    compiler.write_text("#!/bin/sh\necho libc.a\n")  # what gcc prints when it finds nothing
    compiler.chmod(0o755)
    assert [need.package for need in prerequisites.missing()] == ["libc6-dev-arm64-cross"]


def test_pytest_stops_before_the_first_test(tmp_path):
    env = dict(os.environ, PATH=_path_without(tmp_path, "arm-none-eabi-gcc"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_prerequisites.py"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "gcc-arm-none-eabi" in done.stdout + done.stderr
    assert "passed" not in done.stdout
    assert shutil.which("arm-none-eabi-gcc")  # the real one is untouched
