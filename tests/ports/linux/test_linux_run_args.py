"""colibri-run argument parsing: every bad input is a usage error (exit 2)
with a message saying what is wrong; nothing is printed on stdout."""

from __future__ import annotations

import pytest
from linux_helpers import assert_clean_failure, run
from linux_tiny_image import MAX_CONTEXT, VOCAB

# (arguments after the model path, phrase expected on stderr)
BAD_ARGS = [
    ([], "no prompt given"),
    (["--ids"], "--ids needs a value"),
    (["--ids", ""], "--ids is empty"),
    (["--ids="], "--ids is empty"),
    (["--ids", "1,,2"], "id 2 ('') is empty"),
    (["--ids", "1,2,"], "id 3 ('') is empty"),
    (["--ids", ",1"], "id 1 ('') is empty"),
    (["--ids", "-1"], "is negative"),
    (["--ids", "1,-5"], "id 2 ('-5') is negative"),
    (["--ids", "+1"], "is not a decimal integer"),
    (["--ids", " 1"], "is not a decimal integer"),
    (["--ids", "1 ,2"], "is not a decimal integer"),
    (["--ids", "abc"], "is not a decimal integer"),
    (["--ids", "12abc"], "is not a decimal integer"),
    (["--ids", "0x10"], "is not a decimal integer"),
    (["--ids", "1.0"], "is not a decimal integer"),
    (["--ids", "2147483648"], "is too large"),
    (["--ids", "99999999999999999999999999"], "is too large"),
    (["--ids", "1;2"], "is not a decimal integer"),
    (["--ids", "1", "--gen"], "--gen needs a value"),
    (["--ids", "1", "--gen", "-1"], "--gen '-1' is negative"),
    (["--ids", "1", "--gen", "x"], "--gen 'x' is not a decimal integer"),
    (["--ids", "1", "--gen", ""], "--gen '' is empty"),
    (["--ids", "1", "--gen", "2147483648"], "--gen '2147483648' is too large"),
    (["--ids", "1", "--gen", "3", "--gen", "4"], "--gen given more than once"),
    (["--ids", "1", "--ids", "2"], "--ids given more than once"),
    (["--ids", "1", "--context", "0"], "--context '0' is too small"),
    (["--ids", "1", "--context", "-4"], "is negative"),
    (["--ids", "1", "--context", "99999999999"], "is too large"),
    (["--ids", "1", "--fingerprint", "xyz"], "is not a hexadecimal number"),
    (["--ids", "1", "--fingerprint", "0x"], "is not a hexadecimal number"),
    (["--ids", "1", "--fingerprint", "-0x1"], "is not a hexadecimal number"),
    (["--ids", "1", "--fingerprint", "0x123456789"], "does not fit in 32 bits"),
    (["--ids", "1", "--all-logits", ""], "--all-logits needs a file name"),
    (["--ids", "1", "--mlock=yes"], "--mlock takes no value"),
    (["--ids", "1", "--bogus"], "unknown option '--bogus'"),
    (["--ids", "1", "-x"], "unknown option '-x'"),
    (["--ids", "1", "other.bin"], "more than one model file"),
    (["--ids", "1", "--memory-budget", "0"], "'0' is zero"),
    (["--ids", "1", "--memory-budget", "12X"], "has an unknown unit"),
    (["--ids", "1", "--memory-budget", "1.5G"], "has an unknown unit"),
    (["--ids", "1", "--memory-budget", "-1G"], "is negative"),
    (["--ids", "1", "--memory-budget", "G"], "is empty"),
    (["--ids", "1", "--memory-budget", "99999999999999G"], "is too large"),
    (["--ids", "1", "--memory-budget", "1G", "--expert-slots", "4"], "not both"),
    (["--ids", "1", "--io-threads", "2"], "need --memory-budget or --expert-slots"),
    (["--ids", "1", "--cache-policy", "lru"], "need --memory-budget or --expert-slots"),
    (["--ids", "1", "--expert-slots", "4", "--io-threads", "17"], "is too large"),
    (["--ids", "1", "--expert-slots", "0"], "'0' is too small"),
    (["--ids", "1", "--expert-slots", "4", "--cache-policy", "mru"], "is not quota or lru"),
    (["--ids", "1", "--expert-slots", "4", "--slots"], "without --slots or --preload"),
    (["--ids", "1", "--expert-slots", "4", "--preload"], "without --slots or --preload"),
    (["--ids", "1", "--random-tokens", "x"], "is not a decimal integer"),
]


@pytest.mark.parametrize("args,phrase", BAD_ARGS, ids=[" ".join(a) or "none" for a, _ in BAD_ARGS])
def test_bad_arguments_are_usage_errors(colibri_run, tiny_image, args, phrase):
    done = run(colibri_run, tiny_image, *args)
    assert_clean_failure(done, 2, phrase, "colibri-run: error:", "--help")


def test_no_model_file(colibri_run):
    assert_clean_failure(run(colibri_run, "--ids", "1"), 2, "no model file given")


def test_no_arguments(colibri_run):
    assert_clean_failure(run(colibri_run), 2, "no model file given")


def test_usage_errors_are_found_before_the_file_is_opened(colibri_run, tmp_path):
    done = run(colibri_run, tmp_path / "missing.bin", "--ids", "1,x")
    assert_clean_failure(done, 2, "is not a decimal integer")


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(colibri_run, flag):
    done = run(colibri_run, flag)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: colibri-run MODEL.bin --ids")
    for option in ("--gen", "--all-logits", "--mlock", "--stats", "--context", "--verify",
                   "--fingerprint"):
        assert option in done.stdout
    assert done.stderr == ""


def test_double_dash_ends_options(colibri_run, tiny_image):
    done = run(colibri_run, "--ids", "1", "--", tiny_image)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "\n"


def test_equals_form_and_leading_zeros(colibri_run, tiny_image):
    done = run(colibri_run, tiny_image, "--ids=001,2", "--gen=02", "--context=016")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 2


# ---- checks that need the model: still usage errors (exit 2) ----------------------

def test_ids_bounded_by_context(colibri_run, tiny_image):
    done = run(colibri_run, tiny_image, "--ids", "1,2,3", "--context", "2")
    assert_clean_failure(done, 2, "--ids has 3 ids but the context holds 2 positions",
                         "raise it with --context")


def test_ids_bounded_by_default_context(colibri_run, tiny_image):
    ids = ",".join(["1"] * (MAX_CONTEXT + 1))
    done = run(colibri_run, tiny_image, "--ids", ids)
    assert_clean_failure(done, 2, f"the context holds {MAX_CONTEXT} positions")


def test_gen_bounded_by_context(colibri_run, tiny_image):
    # 3 prompt ids + 8 generated tokens need 3 + 8 - 1 = 10 positions.
    ok = run(colibri_run, tiny_image, "--ids", "1,2,3", "--gen", "8", "--context", "10")
    assert ok.returncode == 0, ok.stderr
    done = run(colibri_run, tiny_image, "--ids", "1,2,3", "--gen", "9", "--context", "10")
    assert_clean_failure(done, 2, "need 11 positions but the context holds 10")


def test_context_above_model_max(colibri_run, tiny_image):
    done = run(colibri_run, tiny_image, "--ids", "1", "--context", str(MAX_CONTEXT + 1))
    assert_clean_failure(done, 2, f"larger than the model's max_context {MAX_CONTEXT}")


def test_id_not_below_vocab(colibri_run, tiny_image):
    done = run(colibri_run, tiny_image, "--ids", f"1,{VOCAB}")
    assert_clean_failure(done, 2, f"id 2 ({VOCAB}) is not below the model's vocab_size {VOCAB}")


def test_fingerprint_mismatch_is_a_model_error(colibri_run, tiny_image):
    actual = int.from_bytes(tiny_image.read_bytes()[24:28], "little")
    wrong = actual ^ 1
    done = run(colibri_run, tiny_image, "--ids", "1", "--fingerprint", f"0x{wrong:08x}")
    assert_clean_failure(done, 1, str(tiny_image), f"the image's fingerprint is 0x{actual:08x}",
                         f"asked for 0x{wrong:08x}")
    good = run(colibri_run, tiny_image, "--ids", "1", "--fingerprint", f"{actual:X}")
    assert good.returncode == 0, good.stderr
