#!/bin/sh
# The whole power-cut sweep of the A/B slot update (docs/ota.md): a cut at
# every write step of boot + update + trial boot + confirm, each torn three
# ways, on a simulated NOR flash (tests/sdk/test_slots.c, optimised build).
# The test suite runs a sample of it; this runs all of it (about 1 minute).
#   scripts/ota-powercut.sh [MODEL.bin]     (default: a converted tiny Qwen2-MoE)
set -eu
cd "$(dirname "$0")/.."
PY=.venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s build/host/test_slots
model=${1:-}
if [ -z "$model" ]; then
    "$PY" - "$work" <<'PY'
import sys, pathlib
sys.path.insert(0, "tests")
from colibri_tools.converter.convert import convert
from hf_models import build_model, save_checkpoint
root = pathlib.Path(sys.argv[1])
model, _ = build_model("qwen2_moe", seed=3)
save_checkpoint(model, root / "hf")
convert(root / "hf", root / "out", context=64, progress=False)
PY
    model=$work/out/model.bin
fi
key=$("$PY" - "$model" "$work/ota" <<'PY'
import sys, pathlib
sys.path.insert(0, "tests")
from ota_images import PUBLIC, write_update_images
write_update_images(pathlib.Path(sys.argv[1]).read_bytes(), pathlib.Path(sys.argv[2]))
print(PUBLIC.hex())
PY
)
exec build/host/test_slots "$work/ota/old.bin" "$work/ota/new.bin" "$work/ota/other.bin" \
    "$work/ota/unsigned.bin" "$key" 1
