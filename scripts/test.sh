#!/usr/bin/env bash
# The test command: install what is missing, build, run every test.
# Extra arguments go to pytest (e.g. scripts/test.sh -k golden).
#
# The Zephyr tests and twister run against the Zephyr tree in ZEPHYR_BASE,
# or else against the pruned Zephyr workspace beside this checkout
# (../shared/zephyr, which CI has); with neither they skip and say why.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
make -s -j2 host
if [ -z "${ZEPHYR_BASE:-}" ] && [ -f ../shared/zephyr/colibri-env.sh ]; then
  . ../shared/zephyr/colibri-env.sh
fi
echo "test: Zephyr tree: ${ZEPHYR_BASE:-none (the Zephyr tests skip)}"
exec .venv/bin/python -m pytest -q --durations=20 "$@"
