"""The Zephyr samples, as twister's Cortex-M run built them (conftest.py,
zephyr_build), run in QEMU (MPS3 AN547, Cortex-M55): hello_moe prints the
Linux build's tokens, isr_forward gets the same bits in a k_timer expiry as
in thread mode, and serial_runner passes colibri-test (golden values from
transformers) with logits bit-identical to the Linux build."""
from __future__ import annotations

import re
import zlib

import numpy as np
import pytest
from zephyr_helpers import (
    AN547,
    GENERATE,
    PROMPT,
    Process,
    free_port,
    qemu_argv,
    qemu_run,
    tokens_line,
)


def test_hello_moe_an547_prints_the_reference_tokens(zephyr_build, need_qemu, reference_tokens):
    build = zephyr_build("samples/zephyr/hello_moe", AN547)
    assert build.weights()["address"] == "0x90000000"
    output = qemu_run(build, r"^(done|error: .*)$", timeout=120)
    assert "colibri: init ok" in output, output[-3000:]
    assert re.search(r"^colibri: init ok: .*, kernels helium$", output, re.M), \
        "the Cortex-M55 build does not run the Helium table (CONFIG_COLIBRI_KERNELS_HELIUM)"
    assert re.search(r"^weights: 0x90000000, \d+ of 268435456 bytes \(devicetree\)", output, re.M)
    assert re.search(r"^prompt: 1 2 3$", output, re.M)
    assert tokens_line(output) == reference_tokens
    assert re.search(r"^timing: prefill 3 ids: [1-9]\d* cycles", output, re.M)


def test_isr_forward_an547_matches_thread_mode(zephyr_build, need_qemu):
    build = zephyr_build("samples/zephyr/isr_forward", AN547)
    output = qemu_run(build, r"^(done|error: .*|MISMATCH.*)$", timeout=120)
    assert re.search(r"^isr: in interrupt 1, status 0, steps 8, interrupt stack used "
                     r"[1-9]\d* of 4096 bytes$", output, re.M), output[-3000:]
    assert tokens_line(output, "tokens (isr)") == tokens_line(output, "tokens (thread)")
    assert "match: logits bit-identical" in output


@pytest.fixture(scope="module")
def suite(zephyr_model):
    """Golden answers from transformers (an independent reference)."""
    from colibri_tools.testing.golden import make_suite

    return make_suite(zephyr_model / "hf", [(PROMPT, GENERATE), ([5, 9, 11, 2, 40], GENERATE)],
                      image=zephyr_model / "model.bin")


def _reference_logits_crc(colibri_run, model_dir, ids, tmp_path) -> int:
    """CRC-32 of the Linux build's last-position logits for ids."""
    import subprocess

    out = tmp_path / "logits.f32"
    subprocess.run([str(colibri_run), str(model_dir / "model.bin"), "--ids",
                    ",".join(map(str, ids)), "--all-logits", str(out)], check=True,
                   capture_output=True, timeout=60)
    logits = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)[-1]
    return zlib.crc32(logits.tobytes())


def test_serial_runner_an547_passes_colibri_test(zephyr_build, need_qemu, suite, zephyr_model,
                                                 colibri_run, tmp_path):
    from colibri_tools.protocol import SerialClient
    from colibri_tools.testing.suite_runner import run_suite

    build = zephyr_build("samples/zephyr/serial_runner", AN547)
    port = free_port()
    argv = qemu_argv(build, serial=f"tcp:127.0.0.1:{port},server=on,wait=on")
    with Process(argv):
        with SerialClient.open(f"socket://127.0.0.1:{port}", timeout=60,
                               connect_timeout=20) as client:
            report = run_suite(client, suite)
            assert report.passed, [c.messages for c in report.cases] + [report.setup_error]
            assert report.info.board == f"{AN547} (Zephyr)"
            client.reset()
            plain = client.forward([7, 8, 9])
            client.reset()
            in_isr = client.forward([7, 8, 9], in_interrupt=True)
    assert in_isr.ran_in_interrupt and in_isr.isr_stack_bytes > 0
    assert in_isr.logits_crc == plain.logits_crc
    assert plain.logits_crc == _reference_logits_crc(colibri_run, zephyr_model, [7, 8, 9],
                                                     tmp_path)
