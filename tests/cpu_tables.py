"""Which of the library's x86-64 kernel tables this CPU runs, and why not the
others: the one list the tests iterate (a table this CPU cannot run is left
out, not skipped per test) and say once, in the session's summary
(tests/conftest.py), which were not run here and why."""
from __future__ import annotations

import functools
import pathlib
import platform

# table -> the /proc/cpuinfo flag the Linux port's probe needs for it (besides
# AVX2, FMA and F16C, which every CPU with these flags has).
X86_TABLES = {"avx512vnni": "avx512_vnni", "avx512": "avx512f", "avx2": "avx2"}


@functools.cache
def cpu_flags() -> frozenset[str]:
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "flags:")
    return frozenset(line.split(":", 1)[1].split())


def runnable() -> list[str]:
    """The x86 tables this CPU runs, fastest first ([] off x86-64)."""
    if platform.machine() != "x86_64":
        return []
    return [t for t, flag in X86_TABLES.items() if flag in cpu_flags()]


def not_run_here() -> dict[str, str]:
    """table -> why this machine does not run it."""
    if platform.machine() != "x86_64":
        return {t: f"an x86-64 table, this is {platform.machine()}" for t in X86_TABLES}
    return {t: f"this CPU lacks {flag}" for t, flag in X86_TABLES.items()
            if flag not in cpu_flags()}
