#!/usr/bin/env bash
# Install what a fresh Debian 12 machine lacks to build and test Colibri:
# Debian packages (compilers, cross compilers, clang for the fuzzer) and a
# Python venv in .venv with the project's tools. Safe to run again: it only
# installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential make clang python3-venv python3-dev
  gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu
  gcc-arm-none-eabi binutils-arm-none-eabi libnewlib-arm-none-eabi
  qemu-system-arm qemu-user
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
WANT="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  # The CPU build of torch first, so nothing pulls a larger build in.
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[dev]"
  echo "$WANT" > "$STAMP"
fi
