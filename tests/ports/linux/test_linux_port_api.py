"""The port library on its own: build linux_port_api.c against
ports/linux/colibri_linux*.c (and the core, whose kernel table the port hands
out) with the Makefile's warning flags (plain, with ASan/UBSan and with TSan) and run it
on the tiny image."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from linux_helpers import REPO, assert_no_sanitizer_report

WARN = ("-std=c11 -Wall -Wextra -Wpedantic -Werror -Wshadow -Wstrict-prototypes "
        "-Wmissing-prototypes -Wcast-align -Wvla")
FLAVOURS = {
    "plain": "-O2 -g",
    "asan": "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all",
    # the pool's batch protocol (atomics, condition variable) under ThreadSanitizer
    "tsan": "-O1 -g -fsanitize=thread",
}


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_port_api(tmp_path, tiny_image, flavour):
    exe = tmp_path / f"linux_port_api_{flavour}"
    cmd = (["cc", *shlex.split(WARN), *shlex.split(FLAVOURS[flavour]),
            f"-I{REPO / 'sdk/include'}", f"-I{REPO / 'ports/linux'}",
            f"-I{REPO / 'sdk/src'}", str(REPO / "tests/ports/linux/linux_port_api.c"),
            *map(str, sorted((REPO / "ports/linux").glob("colibri_linux*.c"))),
            *(str(p) for sub in (".", "ota", "crypto") for p in sorted((REPO / "sdk/src" / sub).glob("*.c"))),
            str(REPO / "sdk/src/kernels/reference.c"), "-pthread", "-o", str(exe)])
    built = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert built.returncode == 0, built.stderr
    image = tmp_path / "model.bin"
    image.write_bytes(tiny_image.read_bytes())  # a private copy: the test takes locks on it
    done = subprocess.run([str(exe), str(image), str(tmp_path)], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")
    assert_no_sanitizer_report(done)
