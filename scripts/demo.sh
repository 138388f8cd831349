#!/usr/bin/env bash
# The main job: install what is missing, build, convert the trained demo
# MoE model, build the hello_moe firmware for an emulated board, write the
# weights as an Intel HEX image at the board's weight address (0x90000000 on
# the default qemu_virt_a72), boot the board in QEMU and show the model
# generating text on its serial console; then compare with transformers.
#   scripts/demo.sh [--board qemu_virt_a72|qemu_an547|qemu_an500] [--prompt TEXT] [--gen N]
#                   [--quant int8|int4]
#   scripts/demo.sh --linux     the Linux-only demo (colibri-run vs transformers)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
make -s host
if [ "${1:-}" = "--linux" ]; then
  shift
  exec .venv/bin/python scripts/demo_linux.py "$@"
fi
exec .venv/bin/python scripts/demo_board.py "$@"
