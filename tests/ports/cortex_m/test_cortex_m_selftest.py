"""The Cortex-M self-test (samples/baremetal/board_selftest_m) on QEMU's
mps3-an547 (Cortex-M55) and mps2-an500 (Cortex-M7), against the x86-64 build
of the same core (colibri-run) and the static stack bound from the .su/.ci
files of the build."""
from __future__ import annotations

import pytest
from cm_helpers import (
    N_GEN,
    N_IDS,
    QEMU_BOARDS,
    fields,
    host_reference,
    run_qemu,
    selftest_lines,
    selftest_logits,
)
from cm_stack_bound import handler_bound
from colibri_tools.board import boards
from kernel_slots import KERNEL_CALLERS, kernel_functions

SPIN_ITERATIONS = 20000  # check_ticks() in board_selftest_m/main.c
JOB = "samples/baremetal/board_selftest_m/main.c:forward_in_interrupt"
PORT_TICKS = "ports/baremetal/cortex_m/board.c:port_ticks"


@pytest.fixture(scope="module", params=QEMU_BOARDS)
def selftest(request, need_qemu, cm_firmware, cm_model):
    """(board name, firmware, finished QEMU run) for each QEMU board."""
    firmware = cm_firmware(request.param)
    done = run_qemu(request.param, firmware.elf, cm_model / "model.bin")
    return request.param, firmware, done


def _vocab(cm_model) -> int:
    text = (cm_model / "model_config.h").read_text()
    return int(text.split("COLIBRI_MODEL_VOCAB_SIZE")[1].split()[0].rstrip("u"))


def test_selftest_passes_and_exits_through_semihosting(selftest):
    board, _, done = selftest
    assert "FAULT" not in done.stdout, done.stdout[-2000:]
    assert "SELFTEST PASS" in done.stdout, done.stdout[-2000:] + done.stderr
    assert done.returncode == 0, (board, done.returncode, done.stderr)


def test_image_found_at_the_board_weight_address_and_verified(selftest, cm_model):
    board, _, done = selftest
    lines = selftest_lines(done.stdout)
    image = fields(lines["image"])
    weights = boards.load(board).weights
    assert int(image["addr"], 16) == weights.origin
    assert int(image["region_bytes"]) == weights.length
    assert image["found"] == "yes"
    assert lines["init"] == "init: success"
    verify = fields(lines["verify"])
    assert lines["verify"].startswith("verify: ok") and verify["status"] == "0"
    assert int(verify["image_bytes"]) == (cm_model / "model.bin").stat().st_size


def test_interrupt_forward_equals_thread_forward(selftest):
    _, _, done = selftest
    lines = selftest_lines(done.stdout)
    isr = fields(lines["isr"])
    assert isr["status"] == "success" and isr["equal"] == "yes", lines["isr"]
    preempt = fields(lines["preempt"])
    # the interrupt's forward pass really landed inside the thread's, and
    # both kept their floating-point state (lazy FP stacking)
    assert preempt == {"inside": "yes", "thread_equal": "yes", "isr_equal": "yes"}, preempt


def test_logits_bit_identical_to_x86_64(selftest, cm_model, colibri_run, tmp_path):
    """Strict fp32, no contraction, and newlib's expf/powf/sinf/cosf/sqrtf give
    the same bits as glibc's on these inputs: measured equal on both cores."""
    _, _, done = selftest
    vocab = _vocab(cm_model)
    reference, generated = host_reference(colibri_run, cm_model / "model.bin", vocab, tmp_path)
    firmware = selftest_logits(done.stdout, vocab)
    assert firmware.shape == (N_IDS, vocab)
    differing = int((firmware.view("u4") != reference.view("u4")).sum())
    assert differing == 0, (f"{differing} of {firmware.size} logits differ from x86-64; "
                            f"max |diff| {abs(firmware - reference).max()}")
    gen = [int(x) for x in selftest_lines(done.stdout)["gen"].split()[1:]]
    assert gen == generated[:N_GEN] and len(gen) == N_GEN


def test_ticks_are_cpu_clock_cycles_of_qemu_virtual_time(selftest):
    """Under -icount shift=0 one instruction is 1 ns, so ticks * 1e9 / hz is an
    instruction count: the spin loop (a volatile load, add, store, reload,
    compare, branch) must come out at about 6 instructions per iteration. A
    SysTick on another clock (the 1 MHz reference, the other board's CPU
    clock) would land far outside."""
    board, _, done = selftest
    ticks = fields(selftest_lines(done.stdout)["ticks"])
    hz = boards.load(board).ticks["hz"]
    assert int(ticks["hz"]) == hz
    per_iteration = int(ticks["spin_ticks"]) * 1e9 / hz / SPIN_ITERATIONS
    assert 5.5 < per_iteration < 7.0, per_iteration
    decode = fields(selftest_lines(done.stdout)["decode"])
    thread = fields(selftest_lines(done.stdout)["thread"])
    assert int(decode["tokens"]) == N_GEN
    # a decode step costs less than the 8-token prompt, but not nothing
    assert 0 < int(decode["ticks_per_token"]) < int(thread["prompt_ticks"])


def test_mpu_keeps_the_weights_read_only(selftest):
    """A write to the weight region is a MemManage fault (the MPU region is
    read-only); the self-test survives it through cm_write_faults."""
    _, _, done = selftest
    assert selftest_lines(done.stdout)["mpu"] == "mpu: weights_read_only=yes"


def test_qemu_run_is_deterministic(selftest, cm_model):
    board, firmware, done = selftest
    again = run_qemu(board, firmware.elf, cm_model / "model.bin")
    assert again.stdout == done.stdout


def test_handler_stack_painted_within_static_bound(selftest, record_property):
    """Painted high-water mark of the handler stack (MSP) while colibri_forward
    ran in PendSV, against the sum of -fstack-usage frames along the deepest
    call path (PendSV plus one SysTick preempting it, plus its FP frame)."""
    board, firmware, done = selftest
    isr = fields(selftest_lines(done.stdout)["isr"])
    measured, size = int(isr["stack_bytes"]), int(isr["handler_stack_size"])
    kernels = kernel_functions(boards.load(board).kernels)  # model->kernels.*: its tables
    indirect = {name: kernels for name in KERNEL_CALLERS}
    indirect.update({"PendSV_Handler": [JOB], "colibri_forward": [PORT_TICKS, *kernels]})
    bound = handler_bound(firmware.obj, firmware.elf, "PendSV_Handler", "SysTick_Handler",
                          indirect)  # (no prefetch function in this port)
    assert "colibri_forward" in bound["handler_path"]
    record_property("handler_stack_painted", measured)
    record_property("handler_stack_static_bound", bound["bound"])
    assert 100 < measured <= bound["bound"] <= size, (measured, bound)
