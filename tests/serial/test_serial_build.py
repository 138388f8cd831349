"""ports/serial is firmware code: it must build warning-free (strict C11,
-Wpedantic -Werror) for a freestanding Cortex-M7 and for aarch64, and call
nothing but the core, memcpy and memset (plus the compiler's own helpers)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from serial_helpers import REPO, make

FORBIDDEN = {"malloc", "calloc", "realloc", "free", "printf", "sprintf", "snprintf", "puts",
             "putchar", "strlen", "strcmp", "strncmp", "strtol", "strtoul", "abort", "exit",
             "time", "clock_gettime", "read", "write", "__errno_location"}
TARGETS = {"freestanding": ("arm-none-eabi-gcc", "arm-none-eabi-nm"),
           "aarch64": ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-nm")}


def _public_core_symbols() -> set[str]:
    """The functions of the public header (colibri.h and the files it includes)."""
    headers = "".join(p.read_text() for p in (REPO / "sdk" / "include").glob("colibri*.h"))
    return set(re.findall(r"\b(colibri_\w+)\s*\(", headers)) | {"colibri_crc32_update"}


def _symbols(nm: str, objects: list, *flags: str) -> set[str]:
    out = subprocess.run([nm, *flags, *map(str, objects)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip() and ":" not in line}


@pytest.mark.parametrize("target", list(TARGETS))
def test_ports_serial_is_freestanding(target):
    compiler, nm = TARGETS[target]
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed (scripts/setup.sh installs it)")
    make("-B", "serial-cross")
    objects = sorted((REPO / "build" / target / "ports" / "serial").glob("*.o"))
    assert len(objects) == len(list((REPO / "ports" / "serial").glob("*.c")))
    external = _symbols(nm, objects, "-u") - _symbols(nm, objects, "--defined-only")
    assert not external & FORBIDDEN
    helpers = {s for s in external if s.startswith("__aeabi_")}  # 64-bit division on Arm
    unexpected = external - {"memcpy", "memset"} - _public_core_symbols() - helpers
    assert not unexpected, f"ports/serial calls {sorted(unexpected)}"
