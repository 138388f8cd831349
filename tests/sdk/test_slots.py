"""A/B weight slots on a simulated NOR flash (tests/sdk/test_slots.c): power
cut at every write step of an update (sampled here: every 25th step and the
last 8, each torn three ways; the whole sweep is `scripts/ota-powercut.sh`,
docs/ota.md), refused images (other key, unsigned, corrupted, rollback),
revert of a first run that never confirmed, broken records."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from colibri_tools.image import signing
from ota_images import KEY, PUBLIC, write_update_images

REPO = pathlib.Path(__file__).resolve().parents[2]


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


@pytest.mark.skipif(shutil.which("clang") is None, reason="libFuzzer needs clang")
def test_fuzz_ota_parsers_for_a_while(update_images, tmp_path, record_property):
    """tests/fuzz/fuzz_ota.c on the signature block, on a slot store that
    boot selection reads and rewrites, and on an update (begin, writes,
    finish, then boot, confirm, reject) into such a store, seeded with a
    signed image, a store holding two, and an update of it; a crash,
    sanitizer report, leak, or a PENDING slot whose bytes differ from the
    update's fails. A longer campaign:
    docs/ota.md, "Fuzzing"."""
    subprocess.run(["make", "-s", "build/fuzz/fuzz_ota"], cwd=REPO, check=True)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    signed = signing.sign_image(small_image(tmp_path / "small.bin"), KEY, block_log2=12)
    slot = -(-len(signed) // 256) * 256
    store = b"\xff" * 512 + (signed + b"\xff" * (slot - len(signed))) * 2
    (corpus / "signed").write_bytes(b"\0" + signed)
    (corpus / "store").write_bytes(b"\1" + store)
    # an update of the signed image into a store holding it in slot A (the
    # record erased): sectors - 6, flags (chunk 64; with and without the key)
    sectors = len(store) // 256
    assert 6 <= sectors <= 261
    for flags in (63 << 2 | 2, 63 << 2):
        (corpus / f"update{flags & 2}").write_bytes(bytes([2, sectors - 6, flags]) + store
                                                    + signed)
    seconds = os.environ.get("COLIBRI_FUZZ_OTA_SECONDS", "10")
    done = subprocess.run(
        [str(REPO / "build" / "fuzz" / "fuzz_ota"), f"-max_total_time={seconds}", "-timeout=10",
         "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=int(seconds) + 120)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = int(re.search(r"Done (\d+) runs", done.stderr).group(1))
    record_property("fuzz_ota_runs", runs)
    assert runs >= 20 * int(seconds), f"only {runs} executions in {seconds} s"


def small_image(path: pathlib.Path) -> bytes:
    """A 1-layer, 2-expert image of a few KiB: fuzz inputs stay short."""
    sys.path.insert(0, str(REPO / "tests" / "ports" / "linux"))
    from colibri_tools.image.image_spec import ModelRecord
    from linux_tiny_image import write_tiny_image

    record = ModelRecord(vocab_size=8, hidden_size=8, n_layers=1, n_heads=2, n_kv_heads=1,
                         head_dim=4, max_context=8, dense_intermediate=0, expert_intermediate=4,
                         n_experts=2, shared_intermediate=0, rms_eps=1e-5, rope_theta=10000.0,
                         top_k=1, router_norm_topk=1)
    return write_tiny_image(path, record=record, alignment=64).read_bytes()


def test_layout_rule_is_one_in_c_and_python(tmp_path):
    """colibri_slots_layout (the Linux store, the Zephyr partition) and
    SlotLayout (board files, board_config.h) place records and slots alike,
    for sizes that divide evenly and sizes that do not."""
    from colibri_tools.board.boards import SlotLayout

    cases = [(0x04000000, 0x40000), (1 << 20, 4096), (3 * 4096 + 100, 4096), (8192, 4096),
             (5 * (1 << 17) + 777, 1 << 17), (1 << 33, 4096), (0, 4096)]
    program = tmp_path / "layout.c"
    program.write_text(
        '#include <stdio.h>\n#include <stdlib.h>\n#include "colibri.h"\n'
        "int main(int argc, char **argv) {\n"
        "  for (int i = 1; i + 1 < argc; i += 2) { colibri_slots s = {0};\n"
        "    colibri_slots_layout(&s, strtoull(argv[i], 0, 0), (uint32_t)strtoul(argv[i + 1], 0, 0));\n"
        '    printf("%llu %llu %llu %llu %llu\\n", (unsigned long long)s.record[0],\n'
        "           (unsigned long long)s.record[1], (unsigned long long)s.slot[0],\n"
        "           (unsigned long long)s.slot[1], (unsigned long long)s.slot_size); }\n"
        "  return 0; }\n")
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True)
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Isdk/include", str(program),
                    "build/host/libcolibri.a", "-o", str(exe)], cwd=REPO, check=True)
    args = [str(v) for case in cases for v in case]
    lines = subprocess.run([str(exe), *args], capture_output=True, text=True, check=True,
                           timeout=30).stdout.splitlines()
    for (length, sector), line in zip(cases, lines, strict=True):
        py = SlotLayout(origin=0, length=length, sector=sector)
        want = [*py.records, *py.slots, py.slot_size] if py.slot_size > 0 else None
        got = [int(v) for v in line.split()]
        if want is None:
            assert got[4] == 0, (length, sector, got)
        else:
            assert got == want, (length, sector, got, want)
