"""A/B weight slots on a simulated NOR flash (tests/sdk/test_slots.c): power
cut at every write step of an update (sampled here: every 25th step and the
last 8, each torn three ways; the whole sweep is `scripts/ota-powercut.sh`,
docs/ota.md), refused images (other key, unsigned, corrupted, rollback),
revert of a first run that never confirmed, broken records."""
from __future__ import annotations

import os
import re
import subprocess

import pytest
from ota_images import PUBLIC, write_update_images


@pytest.fixture(scope="module")
def update_images(valid_image, tmp_path_factory):
    return write_update_images(valid_image.read_bytes(), tmp_path_factory.mktemp("ota"))


def run_slots(binary, images, stride: int) -> str:
    done = subprocess.run([str(binary), str(images["old"]), str(images["new"]),
                           str(images["other"]), str(images["unsigned"]), PUBLIC.hex(),
                           str(stride)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_power_cut_at_sampled_steps_boots_old_or_new(asan_bins, update_images, record_property):
    stride = int(os.environ.get("COLIBRI_POWERCUT_STRIDE", "25"))
    out = run_slots(asan_bins / "test_slots", update_images, stride)
    steps, cuts, old, new = map(int, re.search(
        r"steps=(\d+) cuts=(\d+) booted_old=(\d+) booted_new=(\d+)", out).groups())
    record_property("powercut_cuts", cuts)
    assert steps > 100 and cuts >= 3 * (steps // stride) and old > 0 and new > 0
    assert re.search(r"^(\d+) passed, 0 failed$", out, re.M)
