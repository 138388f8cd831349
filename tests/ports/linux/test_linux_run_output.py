"""What colibri-run prints and writes for a valid image: one line of ids on
stdout, float32 LE logits in --all-logits, --stats on stderr only."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from linux_helpers import assert_no_sanitizer_report, run
from linux_tiny_image import MAX_CONTEXT, VOCAB

PROMPT = [1, 2, 3, 4, 5]


def _ids(done) -> list[int]:
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("\n") and done.stdout.count("\n") == 1, repr(done.stdout)
    return [int(t) for t in done.stdout.split()]


def test_gen_zero_prints_an_empty_line(colibri_run, tiny_image):
    done = run(colibri_run, tiny_image, "--ids", "1,2,3")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "\n"
    assert done.stderr == ""


@pytest.mark.parametrize("gen", [1, 2, 7])
def test_gen_prints_one_line_of_ids(colibri_run, tiny_image, gen):
    done = run(colibri_run, tiny_image, "--ids", ",".join(map(str, PROMPT)), "--gen", gen)
    ids = _ids(done)
    assert len(ids) == gen
    assert all(0 <= i < VOCAB for i in ids)
    assert re.fullmatch(r"\d+( \d+)*\n", done.stdout)  # single spaces, no trailing space
    assert done.stderr == ""


def test_output_is_deterministic(colibri_run, tiny_image, tmp_path):
    outs = []
    for k in range(2):
        path = tmp_path / f"logits{k}.bin"
        done = run(colibri_run, tiny_image, "--ids", "3,1,4,1,5", "--gen", "6",
                   "--all-logits", path)
        outs.append((done.stdout, path.read_bytes()))
    assert outs[0] == outs[1]


def test_longer_generation_extends_shorter(colibri_run, tiny_image):
    short = _ids(run(colibri_run, tiny_image, "--ids", "9,8,7", "--gen", "3"))
    long = _ids(run(colibri_run, tiny_image, "--ids", "9,8,7", "--gen", "8"))
    assert long[:3] == short


def test_all_logits_file(colibri_run, tiny_image, tmp_path):
    path = tmp_path / "logits.bin"
    done = run(colibri_run, tiny_image, "--ids", ",".join(map(str, PROMPT)), "--gen", "1",
               "--all-logits", path)
    first = _ids(done)[0]
    raw = path.read_bytes()
    assert len(raw) == len(PROMPT) * VOCAB * 4
    logits = np.frombuffer(raw, dtype="<f4").reshape(len(PROMPT), VOCAB)
    assert np.isfinite(logits).all()
    assert int(np.argmax(logits[-1])) == first  # greedy uses the last row
    assert not np.array_equal(logits[0], logits[1])  # one row per position


def test_all_logits_rows_match_shorter_prompts(colibri_run, tiny_image, tmp_path):
    """Row i of --all-logits is the logits after ids[0..i]: it equals the last
    row of a run on that prefix alone (causality; same build, same numbers)."""
    full = tmp_path / "full.bin"
    run(colibri_run, tiny_image, "--ids", ",".join(map(str, PROMPT)), "--all-logits", full)
    rows = np.fromfile(full, dtype="<f4").reshape(len(PROMPT), VOCAB)
    for n in (1, 3):
        part = tmp_path / f"part{n}.bin"
        done = run(colibri_run, tiny_image, "--ids", ",".join(map(str, PROMPT[:n])),
                   "--all-logits", part)
        assert done.returncode == 0, done.stderr
        prefix = np.fromfile(part, dtype="<f4").reshape(n, VOCAB)
        np.testing.assert_allclose(prefix[-1], rows[n - 1], rtol=1e-5, atol=1e-5)


def test_greedy_decode_matches_teacher_forcing(colibri_run, tiny_image, tmp_path):
    """Feeding prompt + generated ids back as one prompt gives rows whose
    argmax is the next generated id (the KV cache path agrees with the
    batched path)."""
    gen = _ids(run(colibri_run, tiny_image, "--ids", ",".join(map(str, PROMPT)), "--gen", "6"))
    seq = PROMPT + gen[:-1]
    path = tmp_path / "tf.bin"
    done = run(colibri_run, tiny_image, "--ids", ",".join(map(str, seq)), "--all-logits", path)
    assert done.returncode == 0, done.stderr
    rows = np.fromfile(path, dtype="<f4").reshape(len(seq), VOCAB)
    assert [int(np.argmax(r)) for r in rows[len(PROMPT) - 1:]] == gen


def test_full_context_is_usable(colibri_run, tiny_image):
    # prompt + gen - 1 == max_context exactly
    ids = _ids(run(colibri_run, tiny_image, "--ids", "1,2", "--gen", MAX_CONTEXT - 1))
    assert len(ids) == MAX_CONTEXT - 1


def test_all_logits_unwritable(colibri_run, tiny_image, tmp_path):
    done = run(colibri_run, tiny_image, "--ids", "1", "--all-logits", tmp_path / "no" / "x.bin")
    assert done.returncode == 1
    assert "cannot write the logits: No such file or directory" in done.stderr


def test_stats(any_run, tiny_image):
    plain = run(any_run, tiny_image, "--ids", "1,2,3", "--gen", "4")
    done = run(any_run, tiny_image, "--ids", "1,2,3", "--gen", "4", "--stats", "--verify")
    assert done.returncode == 0, done.stderr
    assert done.stdout == plain.stdout  # stats never touch stdout
    err = done.stderr
    for key in ("model: arch=mixtral", f"vocab={VOCAB}", "layers=2", "experts=4", "top_k=2",
                f"max_context={MAX_CONTEXT}", "fingerprint=0x",
                f"image: bytes={tiny_image.stat().st_size}", "mlock=no",
                f"memory: context={MAX_CONTEXT} state_bytes=", "scratch_bytes=",
                "prompt: tokens=3 ns=", "decode: steps=3 ns=", "per_token_ns_mean=",
                "tokens_per_s=", "generate: tokens=4"):
        assert key in err, (key, err)
    # state bytes follow docs/core.md (state and scratch layout): 2 * layers * ctx * kv_heads * head_dim * 4
    state = int(re.search(r"state_bytes=(\d+)", err).group(1))
    assert state == 2 * 2 * MAX_CONTEXT * 2 * 8 * 4
    assert_no_sanitizer_report(done)


def test_stats_context_option(colibri_run, tiny_image):
    done = run(colibri_run, tiny_image, "--ids", "1", "--context", "5", "--stats")
    assert "memory: context=5 " in done.stderr


def test_kernel_table_chosen_by_the_port_or_by_name(any_run, tiny_image):
    """The port's CPU probe picks a table (--stats names it); --kernels asks for
    one by name and gives the same tokens; an unknown name is a usage error
    that lists the tables this build has."""
    ids = ",".join(map(str, PROMPT))
    chosen = run(any_run, tiny_image, "--ids", ids, "--gen", 4, "--stats")
    line = re.search(r"^colibri-run: kernels: (\S+) threads=(\d+) batch=(\d+)$", chosen.stderr, re.M)
    name = line.group(1)
    assert int(line.group(2)) == min(os.cpu_count(), 64) and int(line.group(3)) == 32
    named = run(any_run, tiny_image, "--ids", ids, "--gen", 4, "--kernels", "reference")
    assert _ids(named) == _ids(chosen) and name
    refused = run(any_run, tiny_image, "--ids", ids, "--kernels", "no-such-table")
    assert refused.returncode == 2 and refused.stdout == ""
    listed = re.search(r"no kernel table 'no-such-table' runs here \(this build has: (.*)\)",
                       refused.stderr).group(1).split(", ")
    assert listed[-1] == "reference" and name in listed
    assert_no_sanitizer_report(refused)


def test_threads_and_batch_change_no_bit(any_run, tiny_image, tmp_path):
    """Every thread count and chunk size gives the same logits, byte for byte."""
    ids = ",".join(map(str, PROMPT))
    outputs = set()
    for threads, batch in ((1, 1), (2, 3), (3, 32), (4, 256)):
        path = tmp_path / f"logits_{threads}_{batch}.bin"
        done = run(any_run, tiny_image, "--ids", ids, "--all-logits", path, "--threads", threads,
                   "--batch", batch, "--gen", 3)
        assert done.returncode == 0, done.stderr
        outputs.add((path.read_bytes(), done.stdout))
    assert len(outputs) == 1


@pytest.mark.parametrize("option, value", [("--threads", "0"), ("--threads", "65"),
                                           ("--batch", "0"), ("--batch", "257"),
                                           ("--threads", "two")])
def test_threads_and_batch_bounds(colibri_run, tiny_image, option, value):
    done = run(colibri_run, tiny_image, "--ids", "1", option, value)
    assert done.returncode == 2 and option in done.stderr


def test_all_logits_into_the_model_file_is_refused(any_run, tiny_image, tmp_path):
    """--all-logits naming the model itself (or a link to it) would truncate the
    mapped image: refused before anything runs, and the model is intact."""
    model = tmp_path / "model.bin"
    model.write_bytes(tiny_image.read_bytes())
    link = tmp_path / "link.bin"
    link.symlink_to(model)
    for target in (model, link):
        done = run(any_run, model, "--ids", "1,2", "--all-logits", target)
        assert done.returncode == 2 and done.stdout == ""
        assert "is the model file: writing it would destroy the model" in done.stderr
        assert_no_sanitizer_report(done)
    assert model.read_bytes() == tiny_image.read_bytes()


def test_all_nan_logits_are_an_error(any_run, tiny_image, tmp_path):
    """A NaN in the final norm's weights makes every logit NaN: colibri-run
    says so and prints no token id (issue 13, item 6)."""
    from colibri_tools.image.image_reader import read_image
    from colibri_tools.image.image_spec import Role

    data = bytearray(tiny_image.read_bytes())
    norm = read_image(bytes(data)).find(Role.OUTPUT_NORM)
    data[norm.offset:norm.offset + 4] = b"\x00\x00\xc0\x7f"  # a quiet NaN
    path = tmp_path / "nan.bin"
    path.write_bytes(bytes(data))
    done = run(any_run, path, "--ids", "1,2,3", "--gen", 3)
    assert done.returncode == 1 and done.stdout == ""
    assert "every logit of generated token 1 is NaN" in done.stderr
    assert_no_sanitizer_report(done)
