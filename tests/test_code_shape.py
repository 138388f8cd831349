"""The shape of the code a reader meets (issue 23): no source file over 600
lines in sdk/, ports/ and tools/, and no C function over 80 lines in the core
(sdk/src) and the Linux port. Functions are found as clang-format lays them
out: a definition's body opens with a brace at the start of a line and ends
at the next closing brace at the start of a line."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
SOURCE = re.compile(r"\.(c|h|py|cmake|mk)$|(^|/)(CMakeLists\.txt|Kconfig)$")


def _tracked(*folders: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                          *folders], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / name for name in out.stdout.split() if SOURCE.search(name)
            and (REPO / name).is_file()]


def _functions(path: Path):
    """(first line, line count, signature) of each function definition."""
    lines = path.read_text().splitlines()
    start = None
    for i, line in enumerate(lines):
        opens = line == "{" or (re.match(r"[A-Za-z_].*\)\s*\{$", line)
                                and not line.startswith(("struct", "typedef", "enum", "union")))
        if opens and start is None:
            start = i
        elif line.startswith("}") and start is not None:
            head = lines[start - 1] if lines[start] == "{" else lines[start]
            yield start + 1, i - start + 1, head.strip()
            start = None


def test_no_source_file_over_600_lines():
    files = _tracked("sdk", "ports", "tools")
    assert len(files) > 100
    long = {str(p.relative_to(REPO)): n for p in files
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}, f"files over {MAX_FILE_LINES} lines: {long}"


def test_no_function_over_80_lines_in_the_core_and_the_linux_port():
    files = [p for p in _tracked("sdk/src", "ports/linux") if p.suffix == ".c"]
    assert len(files) > 30
    long = [f"{p.relative_to(REPO)}:{first} {head} ({n} lines)" for p in files
            for first, n, head in _functions(p) if n > MAX_FUNCTION_LINES]
    assert long == [], long


def test_the_function_finder_finds_functions():
    """The finder sees every function of a known file (so the limit above
    cannot pass by finding nothing)."""
    found = {head for _, _, head in _functions(REPO / "sdk" / "src" / "kernels" / "reference.c")}
    assert any("colibri_reference_dot" in head for head in found)
    assert len(found) >= 15
