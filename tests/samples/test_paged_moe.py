"""samples/baremetal/paged_moe (and paged_runner) on the emulated Cortex-M55 (qemu_an547, Helium
kernels) and Cortex-A72 (qemu_virt_a72, NEON): nothing of the model in the
address map. The firmware reads the image's start into RAM and the routed
experts, as routed, into the core's expert cache (docs/core.md, An expert
cache in caller memory) through semihosting file reads, QEMU's emulated host
file access (ports/baremetal/semihosting_storage.c). The prompt's logits must
equal, bit for bit, those of the x86-64 colibri-run with the whole image in
memory, and the greedy tokens too, at every cache size from the fewest slots
the core works with up to one per expert, with pinned experts too. A block
that fails its check in storage stops the forward pass with a named status;
a file of another model, or a setting the sample does not know, is refused."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "ports" / "cortex_m")]
from cm_helpers import N_GEN, host_reference, selftest_logits  # noqa: E402

BOARDS = {"qemu_an547": ("qemu-system-arm", "arm-none-eabi-gcc"),
          "qemu_virt_a72": ("qemu-system-aarch64", "aarch64-linux-gnu-gcc")}


def _need(board: str) -> None:
    for tool in BOARDS[board]:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (scripts/setup.sh installs it)")


@pytest.fixture(scope="module")
def paged_model(tmp_path_factory) -> pathlib.Path:
    """A tiny random Mixtral, int4, its experts last (format 1.9)."""
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    root = tmp_path_factory.mktemp("paged_model")
    model, _ = build_model("mixtral", seed=5)
    save_checkpoint(model, root / "hf")
    convert(root / "hf", root / "out", context=64, progress=False, quant="int4",
            experts_last=True)
    return root / "out"


@pytest.fixture(scope="module")
def reference(paged_model, tmp_path_factory):
    """(prompt logits, greedy ids) of colibri-run on x86-64, whole image."""
    done = subprocess.run(["make", "-s", "host"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    from colibri_tools import read_image

    vocab = read_image(paged_model / "model.bin").record.vocab_size
    return host_reference(REPO / "build" / "host" / "colibri-run", paged_model / "model.bin",
                          vocab, tmp_path_factory.mktemp("paged_reference"))


@pytest.fixture(scope="module")
def firmware(paged_model, tmp_path_factory):
    built = {}
    build = tmp_path_factory.mktemp("paged_build")

    def get(board: str) -> pathlib.Path:
        if board not in built:
            done = subprocess.run(["make", "-s", "-j2", "firmware", f"BUILD={build}",
                                   f"BOARD={board}", "APP=paged_moe",
                                   f"MODEL_DIR={paged_model}"],
                                  cwd=REPO, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            built[board] = build / "fw" / board / "paged_moe" / "firmware.elf"
        return built[board]

    return get


def _run(board: str, elf: pathlib.Path, storage: pathlib.Path, *settings: str):
    from colibri_tools.board.qemu import launch

    with launch(board, elf, None, tcp=False, capture=True, timeout=120, storage=storage,
                settings=settings) as session:
        code = session.wait()
        return code, session.output.decode(errors="replace")


def _fields(out: str, key: str) -> dict[str, int]:
    line = next(line for line in out.splitlines() if line.startswith(key))
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def _cache_sizes(image) -> list[tuple[int, str]]:
    """(slots, pin setting): 2 (the fewest), top-k, one layer's experts, all
    of them; and half of them pinned, the hottest guess being layer order."""
    blocks = len(image.expert_blocks())
    record = image.record
    sizes = sorted({2, record.top_k, record.n_experts, blocks})
    pins = ":".join(str(b.layer * record.n_experts + b.expert)
                    for b in image.expert_blocks()[: blocks // 2])
    return [(n, "") for n in sizes] + [(blocks // 2 + 2, pins)]


@pytest.mark.parametrize("board", list(BOARDS))
def test_paged_logits_equal_the_image_in_memory(board, paged_model, reference, firmware):
    _need(board)
    from colibri_tools import read_image

    image = read_image(paged_model / "model.bin")
    want_logits, want_ids = reference
    elf = firmware(board)
    reads = {}
    for slots, pins in _cache_sizes(image):
        settings = [f"slots={slots}", f"gen={N_GEN}"] + ([f"pin={pins}"] if pins else [])
        code, out = _run(board, elf, paged_model / "model.bin", *settings)
        assert code == 0, out[-2000:]
        got = selftest_logits(out, image.record.vocab_size)
        assert got.tobytes() == want_logits.astype(np.float32).tobytes(), settings
        ids = [int(m) for m in re.findall(r"^token \d+ id=(\d+)", out, re.M)]
        assert ids == want_ids, settings
        paged = _fields(out, "paged:")
        cache = _fields(out, "cache:")
        assert paged["resident"] == image.resident_size < image.image_size
        assert paged["slots"] == slots and cache["failures"] == 0
        assert cache["hits"] + cache["reads"] - paged["pinned"] == cache["acquires"]
        reads[slots, pins] = cache["reads"]
    blocks = len(image.expert_blocks())
    assert reads[blocks, ""] <= blocks < reads[2, ""]


def test_a_bad_block_in_storage_stops_the_forward_pass(paged_model, firmware, tmp_path):
    board = "qemu_an547"
    _need(board)
    from colibri_tools import read_image

    image = read_image(paged_model / "model.bin")
    data = bytearray((paged_model / "model.bin").read_bytes())
    for block in image.expert_blocks():  # every block: whichever the router takes
        data[block.offset + block.size // 2] ^= 0x10
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes(data))
    code, out = _run(board, firmware(board), bad, "slots=3")
    assert code == 4, out[-2000:]
    assert re.search(r"forward: the port could not give an expert's block layer=\d+ "
                     r"expert=\d+ read_error=0", out), out[-2000:]


def test_another_file_or_an_unknown_setting_is_refused(paged_model, firmware, tmp_path):
    board = "qemu_an547"
    _need(board)
    elf = firmware(board)
    other = tmp_path / "short.bin"
    other.write_bytes((paged_model / "model.bin").read_bytes()[:-64])
    code, out = _run(board, elf, other)
    assert code == 1 and "storage: not this model" in out, out
    code, out = _run(board, elf, paged_model / "model.bin", "slots=999999")
    assert code == 1 and "setting: slots=999999" in out, out
    code, out = _run(board, elf, paged_model / "model.bin", "pin=0:0", "slots=4")
    assert code == 3 and "expert cache: " in out, out


@pytest.fixture(scope="module")
def paged_f32(paged_model) -> pathlib.Path:
    """The same checkpoint in float32, its experts last: transformers' golden
    suite then holds to 1e-4."""
    from colibri_tools.converter.convert import convert

    out = paged_model.parent / "out_f32"
    convert(paged_model.parent / "hf", out, context=64, progress=False, experts_last=True)
    return out


def test_colibri_test_checks_the_paged_runner(paged_f32, tmp_path):
    """samples/baremetal/paged_runner serves the serial protocol with the
    experts paged: colibri-test run --storage passes transformers' suite on
    the Cortex-M55 board; without the storage the device says its image is
    missing and every case fails."""
    board = "qemu_an547"
    _need(board)
    done = subprocess.run(["make", "-s", "-j2", "firmware", f"BUILD={tmp_path}", f"BOARD={board}",
                           "APP=paged_runner", f"MODEL_DIR={paged_f32}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    elf = tmp_path / "fw" / board / "paged_runner" / "firmware.elf"
    test = str(REPO / ".venv" / "bin" / "colibri-test")
    suite = tmp_path / "suite.json"
    subprocess.run([test, "golden", str(paged_f32.parent / "hf"), "-o", str(suite), "--image",
                    str(paged_f32 / "model.bin")], capture_output=True, timeout=300, check=True)
    argv = [test, "run", "--board", board, "--firmware", str(elf), "--weights",
            str(paged_f32 / "model.bin"), str(suite)]
    done = subprocess.run([*argv, "--storage"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"^4 passed, 0 failed", done.stdout, re.M), done.stdout
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "COLIBRI_E_TRUNCATED" in done.stdout, done.stdout
