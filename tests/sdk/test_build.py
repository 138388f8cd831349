"""Build properties of the core: warning-free strict C11 on every target,
no allocation/printing/OS symbol in its objects, and a freestanding build."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# What the core may take from outside itself: memcpy/memset (its math is its own).
ALLOWED = {"memcpy", "memset", "_GLOBAL_OFFSET_TABLE_"}  # (the last: -fPIC, the linker's)
FORBIDDEN = {"malloc", "calloc", "realloc", "free", "printf", "fprintf", "puts", "abort",
             "exit", "time", "clock_gettime", "errno", "__errno_location"}
TARGETS = {
    "host": ("cc", "nm"),
    "aarch64": ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-nm"),
    "cortex-m7": ("arm-none-eabi-gcc", "arm-none-eabi-nm"),
    "freestanding": ("arm-none-eabi-gcc", "arm-none-eabi-nm"),
}


def _objects(target: str) -> list[pathlib.Path]:
    return sorted((REPO / "build" / target / "sdk" / "src").rglob("*.o"))


def _symbols(nm: str, objects: list[pathlib.Path], flag: str) -> set[str]:
    out = subprocess.run([nm, flag, *map(str, objects)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip() and ":" not in line}


@pytest.mark.parametrize("target", list(TARGETS))
def test_core_builds_strict_and_calls_nothing_it_should_not(target):
    compiler, nm = TARGETS[target]
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed (scripts/setup.sh installs it)")
    make_target = {"host": "host", "freestanding": "freestanding"}.get(target, "cross")
    subprocess.run(["make", "-s", "-B", make_target], cwd=REPO, check=True,
                   capture_output=True)
    objects = _objects(target)
    assert len(objects) >= 10
    undefined = _symbols(nm, objects, "-u")
    defined = _symbols(nm, objects, "--defined-only")
    external = undefined - defined
    assert not external & FORBIDDEN
    assert external <= ALLOWED, f"unexpected external symbols: {sorted(external - ALLOWED)}"
    exported = _symbols(nm, objects, "--extern-only") & defined
    unprefixed = sorted(name for name in exported if not name.startswith("colibri_"))
    assert unprefixed == [], f"global symbols without the colibri_ prefix: {unprefixed}"


def test_core_sources_have_no_preprocessor_conditionals_outside_compat():
    """#if lives in colibri_compat.h (and ports), not in the core's sources."""
    offenders = []
    for path in (REPO / "sdk" / "src").rglob("*.[ch]"):
        if path.name == "colibri_compat.h":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith(("#if", "#ifdef", "#ifndef", "#elif")):
                guard = line.split()[1] if len(line.split()) > 1 else ""
                if not guard.endswith("_H"):
                    offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders


def test_ports_and_samples_include_no_private_core_header():
    """Ports and samples see the core through sdk/include/colibri.h only."""
    private = {p.name for p in (REPO / "sdk" / "src").rglob("*.h")}
    offenders = []
    for folder in ("ports", "samples"):
        for path in (REPO / folder).rglob("*.[ch]"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and pathlib.Path(m.group(1)).name in private and \
                        not (path.parent / m.group(1)).exists():
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {m.group(1)}")
    assert offenders == [], offenders
