"""colibri-bench --formats (bench_lowbit.py): formats are paired by their
nominal bits, fidelity prompts are windows of the held-out text, sizes count
the routed experts, and a trained checkpoint's tokenizer reaches the GGUF in
the byte-level form llama.cpp's BPE tokenizer matches."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name, bits", [("qk3", 3), ("Q3_K_M", 3), ("IQ3_XXS", 3), ("int4", 4),
                                        ("Q4_0", 4), ("qk6", 6), ("F32", 32), ("f32", 32),
                                        ("bpw3.0", 3)])
def test_nominal_bits_read_from_the_name(name, bits):
    from colibri_tools.bench.bench_lowbit import nominal_bits

    assert nominal_bits(name) == bits


def test_ratios_pair_formats_of_the_same_bits_and_threads():
    from colibri_tools.bench.bench_lowbit import pair_ratios

    def row(engine, weights, threads, prompt, decode):
        return {"engine": engine, "weights": weights, "threads": threads,
                "prompt_tok_s": prompt, "decode_tok_s": decode}

    speeds = [row("colibri", "qk3", 1, 300.0, 60.0), row("colibri", "qk3", 2, 500.0, 90.0),
              row("colibri", "qk4", 1, 280.0, 50.0),
              row("llama.cpp", "Q3_K_M", 1, 200.0, 40.0), row("llama.cpp", "IQ3_XXS", 1, 100.0, 30.0),
              row("llama.cpp", "Q3_K_M", 2, 250.0, 100.0), row("llama.cpp", "Q4_0", 1, 400.0, 25.0)]
    got = {(r["colibri"], r["llama.cpp"], r["threads"]): (r["prompt"], r["decode"])
           for r in pair_ratios(speeds)}
    assert got == {("qk3", "Q3_K_M", 1): (1.5, 1.5), ("qk3", "IQ3_XXS", 1): (3.0, 2.0),
                   ("qk3", "Q3_K_M", 2): (2.0, 0.9), ("qk4", "Q4_0", 1): (0.7, 2.0)}


def test_paired_kl_is_over_prompt_differences():
    from colibri_tools.bench.bench_lowbit import kl_pairs, paired_kl

    got = paired_kl([0.3, 0.1, 0.5], [0.2, 0.2, 0.2])  # differences 0.1, -0.1, 0.3
    assert got["kl_diff"] == pytest.approx(0.1) and got["lower_on"] == 1 and got["prompts"] == 3
    assert got["kl_diff_se"] == pytest.approx(0.2 / np.sqrt(3))  # s.d. of (0.1, -0.1, 0.3): 0.2
    rows = [{"engine": "colibri", "weights": "qk3", "kl_prompt_means": [0.3, 0.1]},
            {"engine": "llama.cpp", "weights": "Q3_K_M", "kl_prompt_means": [0.2, 0.2]},
            {"engine": "llama.cpp", "weights": "Q4_0", "kl_prompt_means": [0.0, 0.0]}]
    pairs = kl_pairs(rows)
    assert [(p["colibri"], p["llama.cpp"]) for p in pairs] == [("qk3", "Q3_K_M")]
    assert pairs[0]["kl_diff"] == pytest.approx(0.0) and pairs[0]["lower_on"] == 1


def test_text_prompts_are_even_windows_of_the_text():
    from colibri_tools.bench.bench_lowbit import text_prompts

    ids = list(range(100))
    windows = text_prompts(ids, 4, 10)
    assert [w[0] for w in windows] == [0, 30, 60, 90] and all(len(w) == 10 for w in windows)
    assert windows[-1][-1] == 99
    assert text_prompts(ids, 1, 100) == [ids]
    with pytest.raises(ValueError, match="101"):
        text_prompts(ids, 2, 101)


def test_gguf_sizes_count_the_expert_matrices(tmp_path):
    import gguf
    from colibri_tools.bench.bench_llama import gguf_sizes
    from colibri_tools.bench.bench_lowbit import bits_per_weight

    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("token_embd.weight", np.zeros((8, 32), np.float32))
    w.add_tensor("blk.0.ffn_up_exps.weight", np.zeros((4, 16, 32), np.float32))
    w.add_tensor("blk.0.ffn_gate_inp.weight", np.zeros((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    sizes = gguf_sizes(path)
    assert sizes["expert_weights"] == 4 * 16 * 32 and sizes["expert_bytes"] == 4 * 4 * 16 * 32
    assert sizes["bytes"] == path.stat().st_size > 4 * (8 + 64 + 4) * 32
    assert bits_per_weight(sizes["expert_bytes"], sizes["expert_weights"]) == 32


def _unbyte(text: str) -> str:
    """GPT-2's byte-level alphabet back to text (the inverse table, built here
    from the printable ranges, independent of byte_level's code)."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return bytes(chars[c] for c in text).decode("utf-8")


def test_tokenizer_reaches_the_gguf_in_byte_level_form(tmp_path):
    from colibri_tools.bench.bench_llama import byte_level, gguf_vocab
    from colibri_tools.training.train_tiny import train_tokenizer

    assert byte_level(" the") == "\u0120the" and byte_level("a\nb") == "a\u010ab"
    text = "It is a truth universally acknowledged, that a single man, caf\u00e9 12.\n" * 20
    tok = train_tokenizer(text, 120)
    tok.save(str(tmp_path / "tokenizer.json"))
    vocab = gguf_vocab(tmp_path / "tokenizer.json")
    original = tok.get_vocab()
    assert len(vocab["tokens"]) == len(original)
    for text_of_token, i in original.items():
        if vocab["types"][i] == 3:  # special: kept as written
            assert vocab["tokens"][i] == text_of_token
        else:
            assert vocab["types"][i] == 1 and _unbyte(vocab["tokens"][i]) == text_of_token
    assert vocab["types"][0] == 3  # <|endoftext|>
    merges = json.loads((tmp_path / "tokenizer.json").read_text())["model"]["merges"]
    assert len(vocab["merges"]) == len(merges) > 0
    for merge in vocab["merges"]:  # each merge's result is a token
        left, right = merge.split(" ")
        assert left + right in vocab["tokens"]


@pytest.mark.parametrize("args, message", [
    (["--formats", "qk3", "--quant", "int4"], "--formats runs its own formats"),
    (["--formats", "qk9"], "a list of"),
    (["--formats", "bpw3.x"], "a list of"),
    (["--llama-types", "Q2_K"], "go with --formats"),
    (["--formats", "qk3", "--llama-types", "Q3_K_M"], "needs --llama-bench"),
    (["--formats", "qk3", "--eval-text", "README.md"], "need --hf"),
    (["--formats", "qk3", "--hf", "docs"], "no config.json"),
    (["--formats", "qk3", "--llama-types", "Q3_K_M,IQ3_XXS", "--llama-bench", "x"],
     "only with an importance matrix"),
])
def test_bad_format_arguments_are_refused(args, message):
    done = subprocess.run([str(REPO / ".venv/bin/colibri-bench"), *args], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and message in done.stderr


def test_formats_run_side_by_side(tmp_path):
    """A tiny model with widths of 256: each format's expert bits are b + 0.5, more bits
    give a lower KL, and (with COLIBRI_LLAMA_BENCH) the K-quants are paired with them."""
    if not (REPO / "build" / "host" / "libcolibri_linux.so").is_file():
        pytest.skip("needs `make host`")
    llama = os.environ.get("COLIBRI_LLAMA_BENCH")
    shape = ["--vocab", "300", "--hidden", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
             "--experts", "4", "--top-k", "2", "--ffn", "256", "--prompt", "12", "--gen", "4",
             "--repeat", "1", "--threads", "1", "--fidelity-prompts", "3", "--fidelity-length", "8"]
    extra = ["--llama-bench", llama, "--llama-types", "Q2_K,Q4_K_M"] if llama else []
    done = subprocess.run([str(REPO / ".venv/bin/colibri-bench"), *shape, "--formats",
                           "qk2,qk4,bpw3.0",
                           *extra, "--json", str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = {(r["engine"], r["weights"]): r for r in report["fidelity"]}
    qk2, qk4 = rows[("colibri", "qk2")], rows[("colibri", "qk4")]
    for row, bits in ((qk2, 2.5), (qk4, 4.5)):
        assert 8 * row["expert_bytes"] / row["expert_weights"] == bits
        assert row["positions"] == 24 and row["calibrated"] is False
    assert 0 < qk4["kl_mean"] < qk2["kl_mean"]
    chosen = rows[("colibri", "bpw3.0")]  # --target-bpw 3.0 over the matrices it may choose for
    assert 2.5 <= 8 * chosen["expert_bytes"] / chosen["expert_weights"] <= 3.5
    assert {(s["engine"], s["weights"]) for s in report["speeds"]} >= {("colibri", "qk2"),
                                                                       ("colibri", "qk4")}
    if llama:
        assert rows[("llama.cpp", "F32")]["kl_max"] < 1e-6
        assert {(r["colibri"], r["llama.cpp"]) for r in report["ratios"]} == {
            ("qk2", "Q2_K"), ("qk4", "Q4_K_M")}
        assert {(r["colibri"], r["llama.cpp"]) for r in report["kl_pairs"]} == {
            ("qk2", "Q2_K"), ("qk4", "Q4_K_M")}
