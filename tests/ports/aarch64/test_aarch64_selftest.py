"""The AArch64 bare-metal port end to end: samples/baremetal/board_selftest
built for qemu_virt_a72 and booted on qemu-system-aarch64 -M virt -cpu
cortex-a72 (the board file's [emulate] table), the model image loaded at the
board's weight address with QEMU's generic loader.

Golden values: the x86-64 Linux build of the same core (colibri-run), which
must agree bit for bit (docs/port-aarch64.md, "Cross-target equality").
"""
from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest
from aarch64_helpers import (
    EXIT_BAD_EL,
    EXIT_FAULT,
    GEN_TOKENS,
    PROMPT_LEN,
    run_firmware,
    selftest_prompt,
)
from colibri_tools.image.image_reader import read_image

MAGIC_WORDS = "0x434f4c49 0x4252491a"  # "COLIBRI\x1a" as two big-endian words


def _host_reference(host_run, model, tmp_path) -> tuple[np.ndarray, list[int]]:
    """Last-position logits (as uint32 bits) and greedy tokens from colibri-run."""
    ids = ",".join(map(str, selftest_prompt(model.config("VOCAB_SIZE"))))
    logits = tmp_path / "host.f32"
    done = subprocess.run([str(host_run), str(model.image), "--ids", ids, "--gen",
                           str(GEN_TOKENS), "--all-logits", str(logits)],
                          capture_output=True, text=True, timeout=120, check=True)
    rows = np.fromfile(logits, dtype="<u4").reshape(PROMPT_LEN, -1)
    return rows[-1], [int(t) for t in done.stdout.split()]


def test_selftest_passes_on_qemu_virt_a72(selftest_run):
    run = selftest_run
    assert run.returncode == 0, run.output
    assert run.values("selftest") == ["board qemu_virt_a72", "PASS"]
    assert run.value("port").startswith("aarch64 EL1 (entered at EL1), MMU and caches on")
    assert run.value("weights").startswith("0x90000000 size 268435456 magic " + MAGIC_WORDS)
    assert run.value("init").startswith("status 0 ")
    assert run.value("verify").startswith("status 0 ")
    assert run.value("thread").startswith("status 0 ")
    assert run.value("isr").startswith("status 0 ")
    assert run.value("isr_logits") == "match"
    assert run.value("uart_rx") == "none"  # nothing on stdin: the 20 ms read timed out


def test_init_checks_the_compiled_in_fingerprint(selftest_run, tiny_model):
    fingerprint = read_image(tiny_model.image).fingerprint
    assert int(selftest_run.field("init", "fingerprint"), 16) == fingerprint
    assert fingerprint == tiny_model.config("FINGERPRINT")


def test_logits_and_tokens_equal_the_x86_64_build_bit_for_bit(selftest_run, host_run,
                                                               tiny_model, tmp_path):
    host_bits, host_tokens = _host_reference(host_run, tiny_model, tmp_path)
    board_bits = np.array([int(w, 16) for w in selftest_run.value("logits").split()],
                          dtype=np.uint32)
    assert board_bits.shape == host_bits.shape
    differ = np.flatnonzero(board_bits != host_bits)
    assert differ.size == 0, f"{differ.size} logits differ, first at index {differ[:5]}"
    assert [int(t) for t in selftest_run.value("generate").split()] == host_tokens


def test_ticks_count_guest_instructions_exactly(selftest_run, selftest_firmware, tiny_model):
    """[ticks] unit: PMCCNTR_EL0 under -icount shift=0 is the instruction count,
    so it is plausible in size and identical from one boot to the next."""
    run = selftest_run
    loop_ticks = int(run.value("ticks").split()[0])
    assert 3_000 <= loop_ticks <= 50_000, "1000 iterations of a volatile add loop"
    prompt_ticks = int(run.field("thread", "ticks"))
    decode = [int(t) for t in run.value("decode_ticks").split()]
    assert len(decode) == GEN_TOKENS - 1
    assert all(t > 1_000 for t in decode)
    assert prompt_ticks > sum(decode) / len(decode) * PROMPT_LEN * 0.5
    again = run_firmware(selftest_firmware, tiny_model.image)
    assert again.value("thread") == run.value("thread")
    assert again.value("decode_ticks") == run.value("decode_ticks")


def test_interrupt_stack_use_is_measured(selftest_run):
    used = int(selftest_run.field("isr", "stack_used"))
    assert 800 < used < 32 * 1024, "at least the 800-byte register frame, below the stack size"


def test_entry_at_el2_drops_to_el1(selftest_firmware, qemu_system, tiny_model):
    run = run_firmware(selftest_firmware, tiny_model.image, machine_options=",virtualization=on")
    assert run.returncode == 0, run.output
    assert run.value("port").startswith("aarch64 EL1 (entered at EL2)")
    assert run.value("isr_logits") == "match"


def test_entry_at_el3_is_refused(selftest_firmware, qemu_system):
    run = run_firmware(selftest_firmware, None, machine_options=",secure=on")
    assert run.returncode == EXIT_BAD_EL, run.output


def test_missing_image_is_reported(selftest_firmware, qemu_system):
    run = run_firmware(selftest_firmware, None)
    assert run.returncode == 1, run.output
    assert run.value("weights").endswith("magic 0x00000000 0x00000000")
    assert run.values("selftest")[-1] == "FAIL no model image at the weight address"


def test_flipped_weight_byte_is_found_by_colibri_verify(selftest_firmware, qemu_system, tiny_model,
                                                        tmp_path):
    image = read_image(tiny_model.image)
    index = len(image.tensors) // 2            # a tensor in the middle of the image
    tensor = image.tensors[index]
    data = bytearray(tiny_model.image.read_bytes())
    data[tensor.offset + tensor.size // 2] ^= 0x01
    corrupted = tmp_path / "corrupted.bin"
    corrupted.write_bytes(data)
    run = run_firmware(selftest_firmware, corrupted)
    assert run.returncode == 1, run.output
    assert run.value("init").startswith("status 0 "), "only tensor data changed"
    assert run.value("verify").startswith("status 5 "), "COLIBRI_E_CHECKSUM"
    assert int(run.field("verify", "tensor")) == index
    assert run.values("selftest")[-1] == "FAIL colibri_verify"


def test_weight_region_is_mapped_read_only(selftest_firmware, qemu_system, tiny_model, a72_board):
    """Sending 'w' makes the self-test write to the weights: the MMU must fault,
    and the port's fault handler must say where, then exit with status 3."""
    run = run_firmware(selftest_firmware, tiny_model.image, stdin=b"w")
    assert run.returncode == EXIT_FAULT, run.output
    assert run.value("uart_rx") == str(ord("w"))
    fault = [line for line in run.output.splitlines() if line.startswith("colibri: fault:")]
    expected = "colibri: fault: synchronous exception from EL1 thread (SP_EL0): data abort"
    assert fault == [expected], run.output
    assert f"FAR_EL1 0x{a72_board.weights.origin:016x}" in run.output


@pytest.mark.parametrize("memory", ["1G"])
def test_too_little_ram_leaves_the_weights_unloaded(selftest_firmware, qemu_system, tiny_model,
                                                    memory):
    """Why the board file says -m 2G: with less RAM QEMU loads nothing at
    0x90000000 and says nothing; the first read of the weights is then an
    external abort, which the port reports instead of hanging."""
    board = selftest_firmware.board
    small_board = dataclasses.replace(board, emulate=dict(board.emulate, memory=memory))
    run = run_firmware(dataclasses.replace(selftest_firmware, board=small_board),
                       tiny_model.image)
    assert run.returncode == EXIT_FAULT, run.output
    assert "data abort" in run.output
    assert f"FAR_EL1 0x{board.weights.origin:016x}" in run.output
