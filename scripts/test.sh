#!/usr/bin/env bash
# The test command: install what is missing, build, run every test.
# Extra arguments go to pytest (e.g. scripts/test.sh -k golden).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
make -s host
exec .venv/bin/python -m pytest -q "$@"
