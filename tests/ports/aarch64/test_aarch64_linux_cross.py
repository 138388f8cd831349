"""Linux AArch64 boards (rpi4, jetson_orin_nano): colibri-run cross-built with
each board's flags (ports/linux/cross.mk) and run under qemu-aarch64 must give
the same logits, bit for bit, and the same tokens as the x86-64 build.

Why bitwise: the reference kernels are strict fp32 without contraction on
both targets, and both link glibc 2.36's libm, whose expf/powf/sinf/cosf give
identical results on x86-64 and AArch64 (docs/port-aarch64.md). The boards
link statically, so a board runs the libm tested here.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
from aarch64_helpers import REPO, make, missing_tool_reason
from colibri_tools.board import boards

LINUX_BOARDS = ["rpi4", "jetson_orin_nano"]
PROMPT = 40
GEN = 12


def _cross_make_args() -> list[str]:
    """Read cross.mk through the Makefile if it includes it, else add it."""
    makefile = (REPO / "Makefile").read_text()
    if "ports/linux/cross.mk" in makefile:
        return []
    return ["-f", "Makefile", "-f", "ports/linux/cross.mk"]


@pytest.fixture(scope="session", params=LINUX_BOARDS)
def cross_run(request, built_once, tmp_path_factory):
    board = boards.load(request.param)
    reason = missing_tool_reason(f"{board.cross_prefix}gcc", board.emulate["qemu"])
    if reason:
        pytest.skip(reason)
    key = ("linux-cross", board.name)
    if key not in built_once:
        build = tmp_path_factory.mktemp(f"cross_{board.name}")
        done = make(*_cross_make_args(), "linux-cross", f"BOARD={board.name}", f"BUILD={build}")
        assert done.returncode == 0, done.stdout + done.stderr
        built_once[key] = build / "linux-cross" / board.name / "colibri-run"
    return board, built_once[key]


def _run(cmd, image, ids, logits_path) -> list[int]:
    done = subprocess.run([*cmd, str(image), "--ids", ",".join(map(str, ids)), "--gen", str(GEN),
                           "--all-logits", str(logits_path)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return [int(t) for t in done.stdout.split()]


def test_cross_binary_is_a_static_aarch64_executable(cross_run):
    board, binary = cross_run
    header = subprocess.run([f"{board.cross_prefix}readelf", "-hl", str(binary)],
                            capture_output=True, text=True, check=True).stdout
    assert "AArch64" in header
    assert "INTERP" not in header, "linked statically (board ldflags)"


def test_cross_build_refuses_a_bare_metal_board(tmp_path):
    done = make(*_cross_make_args(), "linux-cross", "BOARD=qemu_virt_a72", f"BUILD={tmp_path}")
    assert done.returncode != 0
    assert "has port 'baremetal-aarch64', not linux" in done.stderr


def test_logits_bit_identical_to_x86_64(cross_run, tiny_model, host_run, tmp_path):
    board, binary = cross_run
    vocab = tiny_model.config("VOCAB_SIZE")
    ids = np.random.default_rng(7).integers(0, vocab, PROMPT).tolist()
    host_tokens = _run([str(host_run)], tiny_model.image, ids, tmp_path / "host.f32")
    emulated = [board.emulate["qemu"], "-cpu", board.emulate["cpu"], *board.emulate["extra"],
                str(binary)]
    board_tokens = _run(emulated, tiny_model.image, ids, tmp_path / "board.f32")
    host = np.fromfile(tmp_path / "host.f32", dtype="<u4")
    cross = np.fromfile(tmp_path / "board.f32", dtype="<u4")
    assert host.size == PROMPT * vocab
    differ = np.flatnonzero(host != cross)
    assert differ.size == 0, (f"{differ.size} of {host.size} logits differ; max |diff| "
                              f"{np.abs(host.view('<f4') - cross.view('<f4')).max()}")
    assert board_tokens == host_tokens


@pytest.fixture(scope="session", params=["int8", "int4"])
def quantized_model(request, built_once, tmp_path_factory):
    """A tiny Mixtral converted with --quant (int4 with the attention
    projections quantized too): (quant, model.bin, vocab)."""
    key = ("quantized", request.param)
    if key not in built_once:
        from colibri_tools.converter.convert import convert
        from hf_models import build_model, save_checkpoint

        root = tmp_path_factory.mktemp(f"a64_q_{request.param}")
        model, _ = build_model("mixtral", seed=3)
        save_checkpoint(model, root / "hf")
        convert(root / "hf", root / "out", context=64, progress=False, quant=request.param,
                quant_attention=request.param == "int4")
        built_once[key] = (request.param, root / "out" / "model.bin", model.config.vocab_size)
    return built_once[key]


def test_quantized_logits_bit_identical_to_x86_64(cross_run, quantized_model, host_run,
                                                  tmp_path):
    """The quantized products of every AArch64 table the board's CPU runs
    (rpi4's Cortex-A72: neon; the Orin's model: neondot, and neon asked for
    by name) give the x86-64 build's logits (its best table, avx512vnni
    here), bit for bit, and the same tokens."""
    board, binary = cross_run
    quant, image, vocab = quantized_model
    ids = np.random.default_rng(11).integers(0, vocab, PROMPT).tolist()
    host_tokens = _run([str(host_run)], image, ids, tmp_path / "host.f32")
    host = np.fromfile(tmp_path / "host.f32", dtype="<u4")
    emulated = [board.emulate["qemu"], "-cpu", board.emulate["cpu"], *board.emulate["extra"],
                str(binary)]
    for table in board.kernels:
        path = tmp_path / f"{table}.f32"
        board_tokens = _run([*emulated, "--kernels", table], image, ids, path)
        cross = np.fromfile(path, dtype="<u4")
        assert host.size == PROMPT * vocab
        differ = np.flatnonzero(host != cross)
        assert differ.size == 0, (quant, table, f"{differ.size} of {host.size} logits differ")
        assert board_tokens == host_tokens, (quant, table)
