"""Formatting is not argued about: the C sources follow .clang-format (Debian's
clang-format 14) and the Python sources pass ruff with the rules in
pyproject.toml. Each failure names the files and the command that fixes them."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                          *patterns], cwd=REPO, capture_output=True, text=True, check=True)
    return [name for name in out.stdout.split() if (REPO / name).is_file()]


def test_c_sources_follow_clang_format():
    files = _tracked("sdk/*.[ch]", "ports/*.[ch]", "samples/*.[ch]", "tests/*.[ch]")
    assert len(files) > 50
    done = subprocess.run([shutil.which("clang-format") or "clang-format", "--style=file",
                           "--dry-run", "-Werror", *files], cwd=REPO, capture_output=True,
                          text=True)
    offenders = sorted({line.split(":")[0] for line in done.stderr.splitlines()
                        if ": error:" in line})
    assert done.returncode == 0, f"not formatted: {offenders} (fix: clang-format -i FILE)"


def test_python_sources_pass_ruff():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise",
                           "tools", "tests", "scripts"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr + "\n(fix: ruff check --fix)"
