"""colibri-bench: the GGUF it writes for llama.cpp holds the same weights in
llama.cpp's layout; the bytes-per-token figure follows the image; a tiny
benchmark runs end to end (with llama.cpp's llama-bench when
COLIBRI_LLAMA_BENCH names one; ../shared/tools/build-llama-bench builds it)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TINY = ["--vocab", "300", "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
        "--experts", "4", "--top-k", "2", "--ffn", "96", "--prompt", "12", "--gen", "6",
        "--repeat", "1", "--threads", "1,2"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from colibri_tools.bench import bench

    args = bench._parser().parse_args(TINY)
    work = tmp_path_factory.mktemp("bench")
    model, image = bench.build_model(args, work)
    return model, image, work


def test_gguf_holds_the_same_weights_in_llama_cpp_layout(tiny_model):
    import gguf
    from colibri_tools.bench.bench_llama import write_gguf

    model, _, work = tiny_model
    reader = gguf.GGUFReader(str(write_gguf(model, work / "model.gguf")))
    tensors = {t.name: np.asarray(t.data) for t in reader.tensors}
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    assert reader.fields["general.architecture"].contents() == "llama"
    assert reader.fields["llama.expert_count"].contents() == 4
    assert reader.fields["llama.expert_used_count"].contents() == 2
    assert reader.fields["tokenizer.ggml.model"].contents() == "none"
    assert len(tensors) == 3 + 2 * 10
    gate_up = sd["model.layers.1.mlp.experts.gate_up_proj"]
    np.testing.assert_array_equal(tensors["blk.1.ffn_gate_exps.weight"], gate_up[:, :96])
    np.testing.assert_array_equal(tensors["blk.1.ffn_up_exps.weight"], gate_up[:, 96:])
    np.testing.assert_array_equal(tensors["output.weight"], sd["lm_head.weight"])
    # q rows regrouped from rotate-half to interleaved pairs, head by head
    q, got = sd["model.layers.0.self_attn.q_proj.weight"], tensors["blk.0.attn_q.weight"]
    head = q[:16]
    want = np.stack([head[:8], head[8:]], axis=1).reshape(16, 64)
    np.testing.assert_array_equal(got[:16], want)


def test_bytes_per_token_follows_the_image(tiny_model):
    from colibri_tools.bench.bench import bytes_per_token

    _, image, _ = tiny_model
    params, per_token, _ = bytes_per_token(image)
    attn = 64 * 64 * 2 + 2 * 32 * 64  # q, o; k, v (kv heads 2 x head 16)
    expert = 3 * 96 * 64
    per_layer = attn + 2 * 64 + 4 * 64 + 2 * expert  # norms, router, top-2 experts
    assert per_token == 4 * (2 * per_layer + 64 + 300 * 64 + 64)  # + final norm, lm_head, a row
    assert params == 300 * 64 * 2 + 64 + 2 * (attn + 2 * 64 + 4 * 64 + 4 * expert)


def _bench(*extra: str, timeout: int = 600) -> subprocess.CompletedProcess:
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True, timeout=600)
    return subprocess.run([str(REPO / ".venv/bin/colibri-bench"), *TINY, *extra],
                          capture_output=True, text=True, timeout=timeout)


def test_benchmark_runs_and_reports_ratios(tmp_path):
    llama = os.environ.get("COLIBRI_LLAMA_BENCH")
    extra = ["--torch", "--json", str(tmp_path / "r.json")]
    if llama:
        extra += ["--llama-bench", llama]
    done = _bench(*extra)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    engines = {(r["engine"], r["threads"]) for r in report["rows"]}
    assert {("colibri", 1), ("colibri", 2), ("torch", 1)} <= engines
    if llama:
        assert {("llama.cpp", 1), ("llama.cpp", 2)} <= engines
    assert report["same_greedy_tokens"] is True  # colibri at 1 and 2 threads, and torch
    for row in report["rows"]:
        assert row["prompt_tok_s"] > 0 and row["decode_tok_s"] > 0
    assert set(report["read_gb_per_s"]) == {"1", "2"}
    assert "read bandwidth:" in done.stdout and "colibri decode" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--hidden", "0"], "every size must be >= 1"),
    (["--prompt", "5000"], "at most 4096"),
    (["-m", "/no/such/model.bin"], "no such file"),
    (["--threads", "0"], "counts 1 .. 64"),
    (["--family", "qwen3_moe", "--llama-bench", "/bin/true"], "mixtral"),
])
def test_bad_arguments_are_refused(args, message):
    done = subprocess.run([str(REPO / ".venv/bin/colibri-bench"), *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr


def test_missing_llama_bench_is_a_clear_error():
    done = _bench("--llama-bench", "/no/such/llama-bench")
    assert done.returncode == 1 and "no such file" in done.stderr
