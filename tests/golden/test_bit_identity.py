"""Whole-model logits are the same bits whatever kernel table, thread count
or prompt chunk size runs them (docs/kernels.md, docs/core.md): every table
this CPU can run and several threads x chunks, on every family, against the
reference table on one thread, one token at a time. Transformers agreement is test_hf_equivalence's job;
this one compares builds of our own with each other, byte for byte."""
from __future__ import annotations

import pytest
from cpu_tables import runnable
from golden_helpers import FAMILIES, run_engine


def _logits(colibri_run, image, ids, path, vocab, *extra: str) -> bytes:
    run_engine(colibri_run, image, ids, logits_path=path, vocab=vocab, extra=extra)
    return path.read_bytes()


def assert_same_bits(colibri_run, image, vocab, tmp_path, runs) -> None:
    """40 ids through each run's colibri-run options: the logits of the
    reference kernels on one thread, one token at a time, byte for byte."""
    ids = [(7 * i + 3) % vocab for i in range(40)]
    want = _logits(colibri_run, image, ids, tmp_path / "ref.bin", vocab, "--kernels", "reference",
                   "--threads", "1", "--batch", "1")
    for options in runs:
        assert _logits(colibri_run, image, ids, tmp_path / "got.bin", vocab, *options) == want, \
            options


@pytest.mark.parametrize("table", runnable())
@pytest.mark.parametrize("family", FAMILIES)
def test_kernel_tables_bit_identical(family, table, converted, colibri_run, tmp_path):
    model, image = converted(family)
    vocab = model.config.vocab_size
    ids = [(7 * i + 3) % vocab for i in range(40)]
    want = _logits(colibri_run, image, ids, tmp_path / "ref.bin", vocab, "--kernels", "reference")
    got = _logits(colibri_run, image, ids, tmp_path / f"{table}.bin", vocab, "--kernels", table)
    assert got == want


@pytest.mark.parametrize("threads, batch", [(1, 7), (2, 1), (2, 32), (3, 7), (4, 40)])
@pytest.mark.parametrize("family", FAMILIES)
def test_threads_and_chunks_bit_identical(family, threads, batch, converted, colibri_run,
                                          tmp_path):
    """Every thread count and prompt chunk size (40 ids: 1, 7, 32 and the
    whole prompt) against one thread, one token at a time, reference kernels."""
    model, image = converted(family)
    vocab = model.config.vocab_size
    ids = [(7 * i + 3) % vocab for i in range(40)]
    want = _logits(colibri_run, image, ids, tmp_path / "one.bin", vocab, "--kernels", "reference",
                   "--threads", "1", "--batch", "1")
    got = _logits(colibri_run, image, ids, tmp_path / "many.bin", vocab, "--threads",
                  str(threads), "--batch", str(batch))
    assert got == want
