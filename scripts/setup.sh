#!/usr/bin/env bash
# Install what a fresh Debian 12 machine lacks to build and test Colibri:
# Debian packages (compilers, cross compilers, clang for the fuzzer) and a
# Python venv in .venv with the project's tools. Safe to run again: it only
# installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Installed with --no-install-recommends, so every package a build or a test
# uses is named here, Recommends included (tests/prerequisites.py checks the
# files they provide before the suite starts):
#   libc6-dev-arm64-cross  glibc for the AArch64 *Linux* build of colibri-run
#                          (rpi4, jetson_orin_nano; run under qemu-user). The
#                          bare-metal AArch64 firmware does not use it: it is
#                          built -nostdinc against the port's own headers.
#   libclang-rt-14-dev     clang's libFuzzer and sanitizer runtimes (make fuzz)
#   clang-format           the C style check (tests/test_style.py, .clang-format)
#   cmake ninja-build device-tree-compiler gperf
#                          what a Zephyr build needs (tests/zephyr, twister)
#   g++-aarch64-linux-gnu  C++ for the AArch64 build of llama.cpp that
#                          colibri-bench --emulate counts instructions
#                          beside (docs/performance.md); cmake builds it
# (Never gcc-multilib: on Debian 12 it removes gcc-aarch64-linux-gnu.)
APT_PACKAGES=(
  build-essential make clang libclang-rt-14-dev clang-format python3-venv python3-dev
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross
  gcc-arm-none-eabi binutils-arm-none-eabi libnewlib-arm-none-eabi
  qemu-system-arm qemu-user
  cmake ninja-build device-tree-compiler gperf
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
STAMP=.venv/.colibri-setup
WANT="$(cat pyproject.toml scripts/setup.sh scripts/runtime_deps.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  # The CPU build of torch first, so nothing pulls a larger build in.
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[dev,zephyr,plot]"
  # The wheels of the tools' runtime dependencies, at the versions just
  # installed: the fresh-venv test (tests/tools/test_fresh_venv.py) installs
  # the colibri-tools wheel from here with --no-index.
  rm -rf .venv/wheelhouse
  .venv/bin/python -m pip freeze --exclude-editable > .venv/wheelhouse-pins.txt
  .venv/bin/python -m pip download -q --only-binary :all: -d .venv/wheelhouse \
      -c .venv/wheelhouse-pins.txt $(.venv/bin/python scripts/runtime_deps.py)
  echo "$WANT" > "$STAMP"
fi
