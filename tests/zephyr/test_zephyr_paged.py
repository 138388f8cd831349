"""samples/zephyr/paged_moe: the model image in a flash partition, read
through Zephyr's flash driver API (CONFIG_COLIBRI_STORAGE), its start into
RAM and its routed experts into the core's expert cache: nothing of it in
the address map. On native_sim the flash simulator keeps the flash in a
file (the image written at the partition's offset); on
QEMU's AN547 (Cortex-M55, Helium) the simulator's flash lies in DDR, where
QEMU's loader writes the image as a programmer would; colibri-flash writes the
native_sim flash file from the build's devicetree. Each prompt row's
logits (their CRC-32) and the greedy tokens must equal x86-64 colibri-run's
with the whole image in memory; a flipped bit in a stored expert block stops
the forward pass with a named status."""
from __future__ import annotations

import re
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from zephyr_helpers import AN547, NATIVE_SIM, REPO, run_until

APP = "samples/zephyr/paged_moe"
N_IDS, GEN = 8, 8  # the sample's prompt (7 i + 3 mod vocab) and CONFIG_PAGED_MOE_GENERATE


@pytest.fixture(scope="module")
def paged_model(zephyr_model) -> Path:
    """The Zephyr tests' tiny Mixtral, its experts last (the model twister
    builds every application for)."""
    return zephyr_model


@pytest.fixture(scope="module")
def reference(paged_model, colibri_run, tmp_path_factory):
    """(CRC-32 of each prompt row's logits, greedy tokens) on x86-64."""
    from colibri_tools import read_image

    vocab = read_image(paged_model / "model.bin").record.vocab_size
    ids = [(7 * i + 3) % vocab for i in range(N_IDS)]
    path = tmp_path_factory.mktemp("paged_ref") / "logits.f32"
    done = subprocess.run([str(colibri_run), str(paged_model / "model.bin"), "--ids",
                           ",".join(map(str, ids)), "--gen", str(GEN), "--all-logits", str(path)],
                          capture_output=True, text=True, timeout=60, check=True)
    rows = np.fromfile(path, dtype="<f4").reshape(N_IDS, vocab)
    return [zlib.crc32(row.tobytes()) for row in rows], [int(t) for t in done.stdout.split()]


def _dts_value(build, pattern: str) -> int:
    text = (build.directory / "zephyr" / "zephyr.dts").read_text()
    found = re.search(pattern, text, re.S)
    assert found, pattern
    return int(found[1], 16)


def _check(output: str, reference) -> None:
    crcs, tokens = reference
    got = [int(c, 16) for c in re.findall(r"^logits \d+ crc=0x([0-9a-f]{8})$", output, re.M)]
    assert got == crcs, output[-3000:]
    assert [int(t) for t in re.findall(r"^token \d+ id=(\d+)", output, re.M)] == tokens
    paged = dict(re.findall(r"(\w+)=(\d+)", output.split("paged: ")[1].splitlines()[0]))
    assert int(paged["resident"]) < int(paged["image"])
    assert re.search(r"^cache: acquires=\d+ hits=\d+ reads=\d+ bytes_read=\d+ failures=0$",
                     output, re.M)


def _flash_file(build, image: Path, out: Path) -> Path:
    """colibri-flash writes the image into the build's colibri,storage partition."""
    done = subprocess.run([str(REPO / ".venv" / "bin" / "colibri-flash"), "--build-dir",
                           str(build.directory), "--weights", str(image), "--flash-file", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "at 0x200000 in the colibri,storage partition" in done.stdout, done.stdout
    return out


def _flipped(image: Path, out: Path) -> Path:
    from colibri_tools import read_image

    data = bytearray(image.read_bytes())
    for block in read_image(image).expert_blocks():
        data[block.offset + block.size // 2] ^= 0x10
    out.write_bytes(bytes(data))
    return out


def _native(build, flash: Path) -> str:
    return run_until([str(build.directory / "zephyr" / "zephyr.exe"), f"--flash={flash}"],
                     r"^(done|paged_moe: .*)$", timeout=60)


def test_native_sim_reads_the_image_from_a_flash_file(zephyr_build, paged_model, reference,
                                                      tmp_path):
    build = zephyr_build(APP, NATIVE_SIM)
    out = _native(build, _flash_file(build, paged_model / "model.bin", tmp_path / "flash.bin"))
    _check(out, reference)
    bad = _flash_file(build, _flipped(paged_model / "model.bin", tmp_path / "bad.bin"),
                      tmp_path / "bad_flash.bin")
    out = _native(build, bad)
    assert re.search(r"paged_moe: forward: the port could not give an expert's block layer=\d+ "
                     r"expert=\d+ read_error=0", out), out[-2000:]


def test_an547_reads_the_image_through_the_flash_simulator(zephyr_build, paged_model, reference,
                                                           need_qemu):
    build = zephyr_build(APP, AN547)
    from colibri_tools.board.flash_file import storage_partition

    address = _dts_value(build, r"colibri_flash_memory: memory@([0-9a-f]+)")
    address += storage_partition(build.directory).offset
    argv = ["qemu-system-arm", "-machine", "mps3-an547", "-cpu", "cortex-m55", "-nographic",
            "-vga", "none", "-net", "none", "-monitor", "none", "-serial", "stdio",
            "-device", f"loader,file={build.directory / 'zephyr' / 'zephyr.hex'}",
            "-device", f"loader,file={paged_model / 'model.bin'},addr=0x{address:x},force-raw=on"]
    _check(run_until(argv, r"^(done|paged_moe: .*)$", timeout=120), reference)
