"""What the test suite needs from the machine, checked before any test runs.

scripts/setup.sh installs all of it on Debian 12. A missing piece stops the
session in one line that names it, the Debian package that provides it and
the command that installs it, instead of a compile error forty tests deep.
Each check looks for the file or command a test really uses, not for a
package name, so it holds on any machine.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SETUP = "scripts/setup.sh"


@dataclass(frozen=True)
class Need:
    what: str                  # what a test uses it for
    package: str               # the Debian package that provides it
    present: Callable[[], bool]


def _command(name: str) -> Callable[[], bool]:
    return lambda: shutil.which(name) is not None


def _compiler_finds(compiler: str, name: str) -> Callable[[], bool]:
    """The cross compiler resolves a library file (it echoes the bare name when not)."""
    def check() -> bool:
        if shutil.which(compiler) is None:
            return False
        found = subprocess.run([compiler, f"-print-file-name={name}"], capture_output=True,
                               text=True).stdout.strip()
        return os.path.isabs(found) and Path(found).is_file()
    return check


def _clang_runtime(kind: str) -> Callable[[], bool]:
    def check() -> bool:
        if shutil.which("clang") is None:
            return False
        runtime = subprocess.run(["clang", "--print-runtime-dir"], capture_output=True,
                                 text=True).stdout.strip()
        return (Path(runtime) / f"libclang_rt.{kind}-{platform.machine()}.a").is_file()
    return check


NEEDS = [
    Need("the host C compiler", "build-essential", _command("cc")),
    Need("make", "make", _command("make")),
    Need("clang-format (the C style check)", "clang-format", _command("clang-format")),
    Need("clang (libFuzzer targets)", "clang", _command("clang")),
    Need("clang's libFuzzer runtime", "libclang-rt-14-dev", _clang_runtime("fuzzer")),
    Need("clang's AddressSanitizer runtime", "libclang-rt-14-dev", _clang_runtime("asan")),
    Need("the AArch64 cross compiler", "gcc-aarch64-linux-gnu", _command("aarch64-linux-gnu-gcc")),
    Need("glibc for the AArch64 Linux build of colibri-run", "libc6-dev-arm64-cross",
         _compiler_finds("aarch64-linux-gnu-gcc", "libc.a")),
    Need("the Arm bare-metal cross compiler", "gcc-arm-none-eabi", _command("arm-none-eabi-gcc")),
    Need("newlib for Cortex-M firmware", "libnewlib-arm-none-eabi",
         _compiler_finds("arm-none-eabi-gcc", "libc.a")),
    Need("QEMU for the Cortex-M boards", "qemu-system-arm", _command("qemu-system-arm")),
    Need("QEMU for the AArch64 virt board", "qemu-system-arm", _command("qemu-system-aarch64")),
    Need("qemu-user for AArch64 Linux binaries", "qemu-user", _command("qemu-aarch64")),
]

# Only where a Zephyr tree is given (ZEPHYR_BASE): the Zephyr tests skip otherwise.
ZEPHYR_NEEDS = [
    Need("cmake (Zephyr builds)", "cmake", _command("cmake")),
    Need("ninja (Zephyr builds)", "ninja-build", _command("ninja")),
    Need("the devicetree compiler (Zephyr builds)", "device-tree-compiler", _command("dtc")),
]


def missing() -> list[Need]:
    needs = NEEDS + (ZEPHYR_NEEDS if os.environ.get("ZEPHYR_BASE") else [])
    return [need for need in needs if not need.present()]


def report(absent: list[Need]) -> str:
    """One line: what is missing, its packages, how to install them."""
    packages = " ".join(dict.fromkeys(need.package for need in absent))
    things = "; ".join(need.what for need in absent)
    return (f"missing prerequisites: {things} -- run {SETUP} "
            f"(or: apt-get install --no-install-recommends {packages})")
