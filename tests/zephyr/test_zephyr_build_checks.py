"""What the module's build refuses and writes: model files from two
conversions stop the configuration with a message naming them, and the
weights HEX holds model.bin at the devicetree address the firmware reads."""
from __future__ import annotations

import re
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


def _convert(tmp_path, name: str, *args: str):
    from colibri_tools.converter.convert import main as convert_main
    out = tmp_path / name
    assert convert_main([str(REPO / "models" / "tiny_moe"), "-o", str(out), "--quiet", *args]) == 0
    return out


def _west(zephyr, board, model_dir, build_dir, *, cmake_only: bool):
    argv = [zephyr.west, "build", *(["--cmake-only"] if cmake_only else []), "-p", "always",
            "-b", board, "-d", str(build_dir), str(REPO / "samples/zephyr/hello_moe"), "--",
            f"-DCOLIBRI_MODEL_DIR={model_dir}"]
    done = subprocess.run(argv, cwd=REPO, env=board_env(board), capture_output=True, text=True,
                          timeout=600)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def test_a_model_too_big_for_sram_stops_before_the_link_naming_a_context_that_fits(
        zephyr, zephyr_build, tmp_path):
    """The demo model at its default context (256) needs 512 KiB of KV state:
    more than the AN547's 512 KiB SRAM. The configuration stops with the
    largest context that fits, and at that context hello_moe links."""
    zephyr_build("samples/zephyr/hello_moe", AN547)  # skips without the toolchain/modules
    code, log = _west(zephyr, AN547, _convert(tmp_path, "default"), tmp_path / "b1",
                      cmake_only=True)
    assert code != 0
    m = re.search(r"RAM buffers do not fit mps3/corstone300/an547: 1 x \(KV state 524288 bytes for "
                  r"context 256 .* the SRAM is 524288 bytes .* The largest context that fits is "
                  r"(\d+): convert again with colibri-convert \.\.\. --context \1\.", log)
    assert m, log[-3000:]
    fit = int(m.group(1))
    assert 64 <= fit < 256
    code, log = _west(zephyr, AN547, _convert(tmp_path, "fits", "--context", str(fit)),
                      tmp_path / "b2", cmake_only=False)
    assert code == 0, log[-3000:]


OTA_SYMBOLS = re.compile(r"\b(colibri_slots?_\w+|colibri_signature_\w+|colibri_ed25519_\w+|"
                         r"colibri_sha512\w*|colibri_fe_\w+)\b")


def _symbols(nm: str, path) -> str:
    done = subprocess.run([nm, str(path)], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def test_an547_build_has_the_helium_table_and_no_ota_without_slots(zephyr_build):
    """CONFIG_COLIBRI_KERNELS_HELIUM defaults on for the Cortex-M55 (MVE with
    floating point), and sdk/src/ota and sdk/src/crypto are compiled only with
    CONFIG_COLIBRI_SLOTS: neither the firmware nor the colibri library of a
    build without slots has a symbol of theirs."""
    nm = shutil.which("arm-none-eabi-nm")
    if nm is None:
        pytest.skip("arm-none-eabi-nm not installed (Debian: binutils-arm-none-eabi)")
    build = zephyr_build("samples/zephyr/hello_moe", AN547)
    libraries = sorted(build.directory.glob("**/libcolibri.a"))
    assert len(libraries) == 1, libraries
    for path in (build.elf, libraries[0]):
        text = _symbols(nm, path)
        assert re.search(r"\bcolibri_kernels_helium\b", text), f"{path}: no Helium table"
        assert sorted(set(OTA_SYMBOLS.findall(text))) == [], f"{path}: OTA/crypto compiled in"
    members = subprocess.run(["arm-none-eabi-ar", "t", str(libraries[0])], capture_output=True,
                             text=True, timeout=60, check=True).stdout.split()
    assert {"helium.c.obj", "dsp.c.obj", "reference.c.obj"} <= set(members), members
    assert not {m for m in members if m.startswith(("slot_", "signature", "ed25519", "sha512"))}
