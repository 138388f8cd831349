"""Whole-model logits are the same bits whatever kernel table runs them
(docs/kernels.md): every table this CPU can run, on every family, against
the reference table. Transformers agreement is test_hf_equivalence's job;
this one compares builds of our own with each other, byte for byte."""
from __future__ import annotations

import pathlib
import platform

import pytest
from golden_helpers import FAMILIES, run_engine

X86_TABLES = {"avx512": "avx512f", "avx2": "avx2"}


def _cpu_flags() -> set[str]:
    text = pathlib.Path("/proc/cpuinfo").read_text()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "flags:")
    return set(line.split(":", 1)[1].split())


def _tables() -> list:
    if platform.machine() != "x86_64":
        return [pytest.param(t, marks=pytest.mark.skip(reason="x86-64 tables")) for t in X86_TABLES]
    flags = _cpu_flags()
    return [t if flag in flags else
            pytest.param(t, marks=pytest.mark.skip(reason=f"this CPU lacks {flag}"))
            for t, flag in X86_TABLES.items()]


def _logits(colibri_run, image, ids, path, vocab, *extra: str) -> bytes:
    run_engine(colibri_run, image, ids, logits_path=path, vocab=vocab, extra=extra)
    return path.read_bytes()


@pytest.mark.parametrize("table", _tables())
@pytest.mark.parametrize("family", FAMILIES)
def test_kernel_tables_bit_identical(family, table, converted, colibri_run, tmp_path):
    model, image = converted(family)
    vocab = model.config.vocab_size
    ids = [(7 * i + 3) % vocab for i in range(40)]
    want = _logits(colibri_run, image, ids, tmp_path / "ref.bin", vocab, "--kernels", "reference")
    got = _logits(colibri_run, image, ids, tmp_path / f"{table}.bin", vocab, "--kernels", table)
    assert got == want
