"""colibri-bench --quant and --real: the synthesized real-size images are
valid images of the planned size with the published parameter counts, the
writer checks blocks it is given, the fidelity measure is the textbook KL,
and a tiny quantized benchmark runs end to end (beside llama.cpp's Q8_0 /
Q4_0 when COLIBRI_LLAMA_BENCH names a llama-bench)."""
from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TINY = ["--vocab", "300", "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
        "--experts", "4", "--top-k", "2", "--ffn", "96", "--prompt", "12", "--gen", "6",
        "--repeat", "1", "--threads", "1,2", "--fidelity-prompts", "2", "--fidelity-length", "9"]


@pytest.fixture
def small_shape(monkeypatch):
    """A granite-like config small enough to write here, with widths that are
    not multiples of 32 (padded last blocks)."""
    from colibri_tools.bench import bench_synth

    shape = dict(bench_synth.REAL_SHAPES["granite-3.1-1b-a400m"], hidden_size=96,
                 intermediate_size=40, num_hidden_layers=2, vocab_size=300, num_local_experts=4,
                 num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=2)
    monkeypatch.setitem(bench_synth.REAL_SHAPES, "small", shape)
    return "small"


@pytest.mark.parametrize("quant", ["int8", "int4"])
def test_synthesized_image_is_valid_and_of_the_planned_size(small_shape, quant, tmp_path):
    from colibri_tools.bench import bench_synth
    from colibri_tools.converter.families import model_spec
    from colibri_tools.image.image_reader import read_image
    from colibri_tools.image.image_spec import QUANT_DTYPES
    from colibri_tools.image.quant import first_bad_scale, quantized_values
    from colibri_tools.image.sizes import image_size

    path = tmp_path / "m.bin"
    written = bench_synth.synthesize(small_shape, quant, path)
    image = read_image(path, verify_data=True)  # tables, CRCs, quantized sizes
    spec = model_spec(bench_synth.REAL_SHAPES[small_shape], "small")
    assert written.image_size == path.stat().st_size == image_size(
        spec.record, spec.ffn_kinds, quant=quant, quant_attention=True, quant_embeddings=True,
        row_groups=False)
    raw = path.read_bytes()
    quantized = [t for t in image.tensors if t.dtype in QUANT_DTYPES]
    assert len(quantized) == 1 + 2 * (4 + 3 * 4)  # tied embedding; q k v o, 4 experts x 3
    for t in quantized:
        data = np.frombuffer(raw, np.uint8, t.size, t.offset)
        assert first_bad_scale(t.dtype, data) is None
        scales, levels = quantized_values(t.dtype, data, t.shape)
        assert np.all(scales > 0)
        used = t.shape[1] % 32
        if used:  # weights past cols are 0 in the last block
            assert not levels[:, -1, used:].any()
        assert levels.min() < -100 if t.dtype == 1 else levels.min() == -8  # Q8 / Q4


def test_real_shapes_have_the_published_parameter_counts():
    """OLMoE-1B-7B: 6.9 B parameters, 1.3 B active (its paper); granite-3.1-1b-a400m:
    1.3 B, 400 M active (IBM's model card)."""
    from colibri_tools.bench import bench_synth
    from colibri_tools.converter.families import model_spec
    from colibri_tools.image.image_spec import EXPERT_ROLES
    from colibri_tools.image.layer_shapes import canonical_tensors

    for name, total, active in (("olmoe-1b-7b", 6.92e9, 1.28e9),
                                ("granite-3.1-1b-a400m", 1.33e9, 0.40e9)):
        spec = model_spec(bench_synth.REAL_SHAPES[name], name)
        tensors, _ = canonical_tensors(spec.record, spec.ffn_kinds)
        count = sum(math.prod(t.shape) for t in tensors)
        routed = sum(math.prod(t.shape) for t in tensors if t.role in EXPERT_ROLES)
        r = spec.record
        embed = r.vocab_size * r.hidden_size
        used = count - routed + routed * r.top_k // r.n_experts - (0 if r.tie_embeddings else embed)
        assert abs(count / total - 1) < 0.01, (name, count)
        assert abs(used / active - 1) < 0.1, (name, used)


@pytest.mark.parametrize("damage, status", [("size", "COLIBRI_E_QUANT_SIZE"),
                                            ("scale", "COLIBRI_E_QUANT_SCALE")])
def test_writer_checks_blocks_it_is_given(small_shape, damage, status, tmp_path, monkeypatch):
    from colibri_tools.bench import bench_synth
    from colibri_tools.errors import ImageFormatError

    real = bench_synth.random_blocks

    def broken(rng, entry):
        blocks = real(rng, entry)
        if damage == "size":
            return blocks[:, :-1]
        blocks[0, 0, :2] = (0x00, 0x7C)  # binary16 +inf
        return blocks

    monkeypatch.setattr(bench_synth, "random_blocks", broken)
    with pytest.raises(ImageFormatError) as err:
        bench_synth.synthesize(small_shape, "int4", tmp_path / "m.bin")
    assert err.value.status == status


def test_kl_and_top1_are_the_textbook_ones():
    from colibri_tools.bench.bench_fidelity import compare, fidelity

    ref = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.2, 0.7]]))
    got = np.log(np.array([[0.25, 0.5, 0.25], [0.1, 0.2, 0.7]])) + 3.0  # shift: same softmax
    kl, same = compare(ref, got)
    want = 0.5 * math.log(2) + 0.25 * math.log(0.5)
    assert kl[0] == pytest.approx(want, rel=1e-12) and kl[1] == pytest.approx(0, abs=1e-15)
    assert same.tolist() == [False, True]
    report = fidelity([ref], [got])
    assert report["top1_agreement"] == 0.5 and report["positions"] == 2
    assert report["kl_max"] == pytest.approx(want)


def test_kl_standard_error_is_over_prompts():
    from colibri_tools.bench.bench_fidelity import fidelity

    ref = np.log(np.array([[0.5, 0.5]]))
    far, near = np.log(np.array([[0.9, 0.1]])), np.log(np.array([[0.6, 0.4]]))
    kl_far = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    kl_near = 0.5 * math.log(0.5 / 0.6) + 0.5 * math.log(0.5 / 0.4)
    report = fidelity([ref, ref], [far, near])
    assert report["kl_prompt_means"] == pytest.approx([kl_far, kl_near])
    # two samples: s.d. |a - b| / sqrt(2), s.e. that / sqrt(2)
    assert report["kl_mean_se"] == pytest.approx(abs(kl_far - kl_near) / 2)
    assert fidelity([ref], [far])["kl_mean_se"] == 0.0


@pytest.mark.parametrize("args, message", [
    (["--real", "olmoe-1b-7b"], "--real needs --quant"),
    (["--real", "olmoe-1b-7b", "--quant", "int4", "--torch"], "runs Colibri alone"),
    (["--quant", "int4", "--fidelity-length", "0"], "--fidelity-length"),
])
def test_bad_quant_arguments_are_refused(args, message):
    done = subprocess.run([str(REPO / ".venv/bin/colibri-bench"), *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.parametrize("quant", ["int8", "int4"])
def test_quantized_benchmark_runs_with_fidelity(quant, tmp_path):
    subprocess.run(["make", "-s", "host"], cwd=REPO, check=True, timeout=600)
    llama = os.environ.get("COLIBRI_LLAMA_BENCH")
    extra = ["--quant", quant, "--json", str(tmp_path / "r.json")]
    if llama:
        extra += ["--llama-bench", llama]
    done = subprocess.run([str(REPO / ".venv/bin/colibri-bench"), *TINY, *extra],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = {(r["engine"], r["weights"]): r for r in report["fidelity"]}
    ours = rows[("colibri", f"{quant} r16")]  # colibri-convert's default layout
    assert ours["positions"] == 18 and 0 < ours["kl_mean"] < 0.1
    assert ours["top1_agreement"] > 0.5
    assert report["same_greedy_tokens"] is True  # 1 and 2 threads: the same bits
    if llama:
        kind = {"int8": "Q8_0", "int4": "Q4_0"}[quant]
        assert rows[("llama.cpp", "F32")]["kl_max"] < 1e-6  # the peer's GGUF is the model
        assert rows[("llama.cpp", kind)]["kl_mean"] > 0
        if quant == "int4":
            assert rows[("llama.cpp", "Q4_0 all")]["kl_mean"] > 0
        assert {("llama.cpp", 1), ("llama.cpp", 2)} <= {(r["engine"], r["threads"])
                                                        for r in report["rows"]}
    assert "fidelity against transformers" in done.stdout
