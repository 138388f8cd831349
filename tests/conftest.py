"""Shared pytest setup (keep it small; suites add their own fixtures in their folders).

tests/ is put on sys.path so suites can `import hf_models`, and tools/ so the
colibri_tools package imports even without `pip install -e .`. Every `make`
a test runs takes as many jobs as the machine has cores (MAKEFLAGS, unless
the caller set it).
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

for _path in (ROOT / "tests", ROOT / "tools"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

os.environ.setdefault("MAKEFLAGS", f"-j{os.cpu_count() or 1}")


def pytest_sessionstart(session):
    """Stop before the first test when the machine lacks a prerequisite
    (tests/prerequisites.py), naming it and how to install it."""
    import pytest
    from prerequisites import missing, report

    absent = missing()
    if absent:
        pytest.exit(report(absent), returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_terminal_summary(terminalreporter):
    """Once, at the end: which kernel tables ran here and which did not, and why."""
    from cpu_tables import not_run_here, runnable

    missing = not_run_here()
    line = f"x86-64 kernel tables run here: {', '.join(runnable()) or 'none'}"
    if missing:
        line += "; not run: " + ", ".join(f"{t} ({why})" for t, why in missing.items())
    terminalreporter.write_line(line)
