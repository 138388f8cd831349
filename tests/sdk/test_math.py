"""The core's own elementary functions (sdk/src/colibri_math.c) against the
host C library's: sqrtf bit for bit, expf/sinf/cosf/powf within 1 ulp
(tests/sdk/test_math.c does the sweep and prints the worst case)."""
from __future__ import annotations

import pathlib
import re
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_math_matches_the_host_libm_within_one_ulp():
    subprocess.run(["make", "-s", "build/host/test_math"], cwd=REPO, check=True, timeout=300)
    done = subprocess.run([str(REPO / "build" / "host" / "test_math")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\d+ passed, 0 failed$", done.stdout, re.M), done.stdout


def test_the_core_links_no_math_library():
    """No libm symbol is referenced by any object of the core."""
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True, timeout=300)
    undefined = subprocess.run(["nm", "-u", str(REPO / "build" / "host" / "libcolibri.a")],
                               capture_output=True, text=True, check=True).stdout
    libm = {"expf", "powf", "sinf", "cosf", "sqrtf", "sincosf", "exp", "pow", "sin", "cos",
            "sqrt", "logf", "log"}
    used = {line.split()[-1] for line in undefined.splitlines() if line.strip().startswith("U ")}
    assert not (used & libm), f"the core calls libm: {sorted(used & libm)}"
