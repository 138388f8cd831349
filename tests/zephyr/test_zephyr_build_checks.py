"""What the module's build refuses and writes: model files from two
conversions stop the configuration with a message naming them, and the
weights HEX holds model.bin at the devicetree address the firmware reads."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from zephyr_helpers import AN547, NATIVE_SIM, REPO, board_env


def test_model_files_from_two_conversions_are_refused(zephyr, zephyr_model, tmp_path):
    other = REPO / "out" / "demo" / "model" / "model.bin"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copyfile(zephyr_model / "model_config.h", mixed / "model_config.h")
    if other.is_file():
        shutil.copyfile(other, mixed / "model.bin")
    else:  # a valid image of another model: flip one byte of the meta CRC
        data = bytearray((zephyr_model / "model.bin").read_bytes())
        data[24] ^= 0xFF
        (mixed / "model.bin").write_bytes(bytes(data))
    done = subprocess.run(
        [zephyr.west, "build", "--cmake-only", "-p", "always", "-b", NATIVE_SIM,
         "-d", str(tmp_path / "build"), str(REPO / "samples/zephyr/hello_moe"), "--",
         f"-DCOLIBRI_MODEL_DIR={mixed}"],
        cwd=REPO, env=board_env(NATIVE_SIM), capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    log = " ".join((done.stdout + done.stderr).split())
    assert "Colibri: model.bin fingerprint" in log and "files from two conversions" in log, log[-3000:]


def test_weights_hex_is_model_bin_at_the_devicetree_address(zephyr_build, zephyr_model):
    intelhex = pytest.importorskip("intelhex")
    build = zephyr_build("samples/zephyr/hello_moe", AN547)
    weights = build.weights()
    image = (zephyr_model / "model.bin").read_bytes()
    hexfile = intelhex.IntelHex(str(build.zephyr_dir / "colibri_weights.hex"))
    start = int(weights["address"], 16)
    assert hexfile.segments() == [(start, start + len(image))]
    assert hexfile.tobinstr(start=start, size=len(image)) == image
    assert weights["image_size"] == len(image) <= weights["region_size"]
