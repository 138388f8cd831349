"""A short libFuzzer run of the device side (tests/serial/fuzz_serial_runner.c),
seeded with one valid frame of every request and the line commands: any
crash, leak or undefined behaviour fails the test. Longer runs by hand:
COLIBRI_FUZZ_MODEL=model.bin build/fuzz/fuzz_serial_runner -max_total_time=600"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from colibri_tools.protocol import (
    ForwardRequest,
    GenerateRequest,
    LogitsRequest,
    Msg,
    encode_frame,
)
from serial_helpers import REPO, make

SEEDS = [encode_frame(Msg.HELLO, 1),
         encode_frame(Msg.FORWARD, 2, ForwardRequest((1, 2, 3), True, 5, True).pack()),
         encode_frame(Msg.GENERATE, 3, GenerateRequest((4, 5), 6).pack()),
         encode_frame(Msg.GET_LOGITS, 4, LogitsRequest(0, 50).pack()),
         encode_frame(Msg.VERIFY, 5), encode_frame(Msg.RESET, 6),
         b"gen 1 2 3 / 4\r\ninfo\nverify\nreset\nhelp\n"]


def test_fuzz_the_runner_briefly(tiny, tmp_path, record_property):
    if shutil.which("clang") is None:
        pytest.skip("clang (libFuzzer) not installed")
    make("build/fuzz/fuzz_serial_runner")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, seed in enumerate(SEEDS):
        (corpus / f"seed{i}").write_bytes(seed)
        (corpus / f"fixed{i}").write_bytes(b"\x01" + seed)  # odd first byte: CRCs get fixed
    env = dict(os.environ, COLIBRI_FUZZ_MODEL=str(tiny["image"]))
    done = subprocess.run([str(REPO / "build" / "fuzz" / "fuzz_serial_runner"),
                           "-max_total_time=10", "-max_len=9000", "-rss_limit_mb=1024",
                           str(corpus)], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    runs = int(re.search(r"Done (\d+) runs", done.stderr).group(1))
    record_property("fuzz_serial_runs", runs)
    assert runs >= 5_000, f"only {runs} executions in 10 s"
