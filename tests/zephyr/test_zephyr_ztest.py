"""The ztest suite (tests/zephyr/colibri_core) on native_sim and on QEMU's
MPS3 AN547: the image at the devicetree weights address, colibri_init /
verify, logits of every position bit-identical to the Linux build
(colibri-run), greedy tokens, colibri_forward in a k_timer expiry."""
from __future__ import annotations

import re

from zephyr_helpers import AN547, NATIVE_SIM, qemu_run, run_until

APP = "tests/zephyr/colibri_core"
END = r"PROJECT EXECUTION (SUCCESSFUL|FAILED)"


def _check(output: str) -> None:
    assert "PROJECT EXECUTION SUCCESSFUL" in output, output[-4000:]
    assert re.search(r"SUITE PASS - 100\.00% \[colibri\]: pass = (\d+), fail = 0", output)
    assert "logits: 0 of " in output, "logits differ from the Linux build"


def test_ztest_native_sim(zephyr_build):
    build = zephyr_build(APP, NATIVE_SIM)
    _check(run_until([str(build.exe)], END, timeout=60))


def test_ztest_an547_in_qemu(zephyr_build, need_qemu):
    build = zephyr_build(APP, AN547)
    output = qemu_run(build, END, timeout=120)
    _check(output)
    used = int(re.search(r"interrupt stack used: (\d+) of", output).group(1))
    assert 0 < used < 4096
