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
from colibri_tools import boards

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
