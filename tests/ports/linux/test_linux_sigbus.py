"""The documented Linux limit: a model file truncated by another process
while colibri-run has it mapped raises SIGBUS on the next read of a lost
page. colibri-run catches it and exits 1 with a message instead of dumping
core (docs/linux.md)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from colibri_tools.image.image_spec import ModelRecord
from linux_helpers import assert_no_sanitizer_report
from linux_tiny_image import write_tiny_image


@pytest.fixture(scope="module")
def slow_image(tmp_path_factory):
    """An image whose 4096-token decode runs for seconds (a long-context MoE)."""
    record = ModelRecord(vocab_size=256, hidden_size=128, n_layers=2, n_heads=4, n_kv_heads=2,
                         head_dim=32, max_context=4096, dense_intermediate=0,
                         expert_intermediate=256, n_experts=8, shared_intermediate=0,
                         rms_eps=1e-5, rope_theta=10000.0, top_k=2, router_norm_topk=1)
    return write_tiny_image(tmp_path_factory.mktemp("slow") / "model.bin", record=record)


def _tamper_while_decoding(run, image, tmp_path, tamper, what):
    """Start a long decode on a copy of image, call tamper(path) once it is
    decoding, and return (returncode, stdout, stderr)."""
    path = tmp_path / "victim.bin"
    path.write_bytes(image.read_bytes())
    proc = subprocess.Popen([str(run), str(path), "--ids", "1", "--gen", "4096",
                             "--context", "4096"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # well past start-up: decoding
        if proc.poll() is not None:
            pytest.skip(f"colibri-run finished before the file could be {what}")
        tamper(path)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def test_truncated_while_mapped(any_run, slow_image, tmp_path):
    code, out, err = _tamper_while_decoding(any_run, slow_image, tmp_path,
                                            lambda path: os.truncate(path, 4096), "truncated")
    if "its header says the image is" in err:
        pytest.skip("the file was truncated before colibri-run mapped it")  # a slow start
    assert code == 1, (code, err)
    assert out == ""
    assert "SIGBUS while reading the mapped model file" in err
    assert "truncated by another process" in err
    assert_no_sanitizer_report(subprocess.CompletedProcess([], 1, out, err))


def test_rewritten_in_place_while_mapped(any_run, slow_image, tmp_path):
    """A write into the mapped file (dd conv=notrunc does this) changes the
    bytes under the run; colibri-run notices the file's new modification time
    and prints no tokens (issue 13, item 4)."""
    def write_one_weight(path):
        with open(path, "r+b") as f:
            f.seek(path.stat().st_size // 2)
            f.write(b"\x00\x00\x80\x3f")  # 1.0 into some weight: no error of its own

    code, out, err = _tamper_while_decoding(any_run, slow_image, tmp_path, write_one_weight,
                                            "rewritten")
    assert code == 1, (code, err)
    assert out == ""
    assert "the model file was written while it was in use" in err
