"""Helpers shared by the Linux port tests (imported by name; the conftest
puts this folder, tools/ and tests/ on sys.path)."""

from __future__ import annotations

import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[3]
RUN_TIMEOUT = 120


def make(target: str) -> subprocess.CompletedProcess:
    """`make -s -j2 target` in the repository (two cores here)."""
    return subprocess.run(["make", "-s", "-j2", target], cwd=REPO, capture_output=True, text=True,
                          timeout=900, check=False)


def run(binary: pathlib.Path, *args: object, **kwargs) -> subprocess.CompletedProcess:
    """Run binary with args; text output; never raises on a non-zero exit."""
    kwargs.setdefault("timeout", RUN_TIMEOUT)
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          check=False, **kwargs)


def assert_clean_failure(done: subprocess.CompletedProcess, status: int, *phrases: str) -> None:
    """Exit status `status` (not a signal), nothing on stdout, each phrase on
    stderr, and no sanitizer report."""
    assert done.returncode == status, (done.returncode, done.stderr)
    assert done.stdout == ""
    for phrase in phrases:
        assert phrase in done.stderr, (phrase, done.stderr)
    assert_no_sanitizer_report(done)


def assert_no_sanitizer_report(done: subprocess.CompletedProcess) -> None:
    assert "Sanitizer" not in done.stderr and "runtime error" not in done.stderr, done.stderr
