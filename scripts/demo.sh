#!/usr/bin/env bash
# The main job: install what is missing, build, convert a Hugging Face MoE
# checkpoint, run it with the C engine and compare with transformers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
make -s host
exec .venv/bin/python scripts/demo.py "$@"
