"""The C engine against Hugging Face transformers, family by family.

Tiny models with random (rescaled) weights are built from transformers
configs, saved with save_pretrained, converted with colibri-convert and run
with colibri-run. Logits must match transformers' forward within 1e-4 and
greedy decoding must give the same 16 tokens as transformers' generate.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from golden_helpers import FAMILIES, record, run_engine

TOLERANCE = 1e-4


def _ids(model, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, model.config.vocab_size, size=n).tolist()


def _hf_logits(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("length", [1, 7, 40])
def test_logits_match_transformers(family, length, converted, colibri_run, tmp_path):
    model, image = converted(family)
    ids = _ids(model, length, seed=length)
    want = _hf_logits(model, ids)
    _, got = run_engine(colibri_run, image, ids, logits_path=tmp_path / "l.bin",
                        vocab=model.config.vocab_size)
    assert want.std() > 0.3, "logits too flat for the tolerance to mean anything"
    diff = float(np.abs(got - want).max())
    record(family, "max_abs_logit_diff", diff)
    record(family, "max_rel_logit_diff", diff / float(np.abs(want).max()))  # of the largest
    record(family, "logit_std", float(want.std()))
    assert diff <= TOLERANCE, f"{family} n={length}: max |diff| {diff:.3g}"


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_tokens_match_generate(family, converted, colibri_run):
    model, image = converted(family)
    ids = _ids(model, 5, seed=99)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=16, min_new_tokens=16,
                             do_sample=False, pad_token_id=0, eos_token_id=None)
    want = out[0, len(ids):].tolist()
    got, _ = run_engine(colibri_run, image, ids, gen=16)
    assert got == want


@pytest.mark.parametrize("family", ["mixtral", "qwen3_moe"])
def test_two_runs_bit_identical(family, converted, colibri_run, tmp_path):
    model, image = converted(family)
    ids = _ids(model, 12, seed=5)
    vocab = model.config.vocab_size
    run_engine(colibri_run, image, ids, logits_path=tmp_path / "a.bin", vocab=vocab)
    run_engine(colibri_run, image, ids, logits_path=tmp_path / "b.bin", vocab=vocab)
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes()


def _moe_blocks(model):
    """Each layer's MoE block (DBRX: transformer.blocks[l].ffn, Llama 4: feed_forward)."""
    layers = model.model.layers if hasattr(model, "model") else model.transformer.blocks
    blocks = [getattr(layer, "mlp", None) or getattr(layer, "block_sparse_moe", None)
              or getattr(layer, "feed_forward", None) or getattr(layer, "ffn", None)
              or layer.mixer for layer in layers]  # Nemotron-H: a block's mixer
    return [block for block in blocks if hasattr(block, "experts") or hasattr(block, "output_linear")]


def _router(moe):
    """The router module (Granite and DBRX call it `router`, the others `gate`)."""
    return getattr(moe, "gate", None) or moe.router


def _first_choices(output) -> list[int]:
    """Each token's first chosen expert from a router's output: its third element
    (the chosen experts [tokens, k]), or the largest of DBRX's bare logits, of
    Llama 4's scores (its first element) or of JetMoE's logits (its fifth)."""
    if isinstance(output, torch.Tensor):
        return output.argmax(-1).tolist()
    if len(output) in (2, 5):
        return output[0 if len(output) == 2 else 4].argmax(-1).tolist()
    return output[2][:, 0].tolist()


def _down_weights(moe) -> torch.Tensor:
    """The experts' down projections (DBRX's fused w2, JetMoE's output_linear)."""
    if hasattr(moe, "output_linear"):
        return moe.output_linear.weight
    return moe.experts.mlp.w2 if hasattr(moe.experts, "mlp") else moe.experts.down_proj


@pytest.mark.parametrize("family", FAMILIES)
def test_routed_experts_matter(family, converted):
    """Guards the test models themselves: with the routed experts silenced
    the logits must move far beyond the tolerance, and the routers must not
    send every token to the same expert."""
    model, _ = converted(family)
    ids = _ids(model, 40, seed=7)
    base = _hf_logits(model, ids)
    chosen = set()

    def note_choice(module, args, output):
        chosen.update(_first_choices(output))

    hooks = [_router(moe).register_forward_hook(note_choice) for moe in _moe_blocks(model)]
    _hf_logits(model, ids)
    for hook in hooks:
        hook.remove()
    saved = [_down_weights(moe).detach().clone() for moe in _moe_blocks(model)]
    with torch.no_grad():
        for moe in _moe_blocks(model):
            _down_weights(moe).zero_()
        silenced = _hf_logits(model, ids)
        for moe, weight in zip(_moe_blocks(model), saved):
            _down_weights(moe).copy_(weight)
    assert np.abs(silenced - base).max() > 1000 * TOLERANCE
    assert len(chosen) >= 3


def test_dbrx_clamp_is_reached(converted):
    """Guards the DBRX test model: its q/k/v clamp changes the logits far beyond
    the tolerance, so matching transformers checks the clamp too."""
    model, _ = converted("dbrx")
    ids = _ids(model, 40, seed=3)
    base = _hf_logits(model, ids)
    attns = [block.norm_attn_norm.attn for block in model.transformer.blocks]
    try:
        for attn in attns:
            attn.clip_qkv = 1e9  # transformers 5.24 cannot run None (torch.clamp of two Nones)
        unclamped = _hf_logits(model, ids)
    finally:
        for attn in attns:
            attn.clip_qkv = model.config.attn_config.clip_qkv
    assert np.abs(unclamped - base).max() > 1000 * TOLERANCE


def test_llama4_temperature_is_reached(converted):
    """Guards the Llama 4 test model: its attention temperature (floor 4, so it grows
    over a 40-token prompt) changes the logits far beyond the tolerance."""
    model, _ = converted("llama4_text")
    ids = _ids(model, 40, seed=3)
    base = _hf_logits(model, ids)
    attns = [layer.self_attn for layer in model.model.layers]
    try:
        for attn in attns:
            attn.attn_temperature_tuning = False
        untuned = _hf_logits(model, ids)
    finally:
        for attn in attns:
            attn.attn_temperature_tuning = True
    assert np.abs(untuned - base).max() > 1000 * TOLERANCE


def _stats_counts(stderr: str, topic: str) -> dict[int, list[int]]:
    """colibri-run --stats' per-layer counts of `topic` (experts, attention-experts)."""
    out = {}
    for line in stderr.splitlines():
        if f": {topic}: layer=" in line:
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            out[int(fields["layer"])] = [int(v) for v in fields["counts"].split(",")]
    return out


def test_jetmoe_attention_experts_are_routed_and_reported(converted, colibri_run):
    """JetMoE's attention router sends tokens to at least three attention experts
    (so matching transformers checks which experts' q and o are used), and
    colibri-run --stats and the Python binding's routes count each layer's
    attention-expert and MoE-expert choices as transformers' routers make them
    (the port's attention_route and route)."""
    import subprocess

    model, image = converted("jetmoe")
    ids = _ids(model, 40, seed=7)
    want = {"attention-experts": {}, "experts": {}}

    def note(topic, layer):
        def hook(module, args, output):
            chosen = output[4].topk(module.top_k, dim=-1).indices.flatten()
            want[topic][layer] = np.bincount(chosen.numpy(), minlength=module.num_experts).tolist()
        return hook

    layers = model.model.layers
    hooks = [layer.self_attention.experts.router.register_forward_hook(note("attention-experts", i))
             for i, layer in enumerate(layers)]
    hooks += [layer.mlp.router.register_forward_hook(note("experts", i)) for i, layer in enumerate(layers)]
    _hf_logits(model, ids)
    for hook in hooks:
        hook.remove()
    assert all(sum(1 for c in row if c) >= 3 for row in want["attention-experts"].values())
    done = subprocess.run([str(colibri_run), str(image), "--ids", ",".join(map(str, ids)),
                           "--context", "64", "--stats"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for topic, counts in want.items():
        assert _stats_counts(done.stderr, topic) == counts, topic
    from colibri_tools.runtime.engine import Engine  # the Python binding's routes too

    with Engine(image, threads=2, batch=4, routes=True) as engine:
        engine.forward(ids)
        assert {i: row.tolist() for i, row in enumerate(engine.routes.attention)} == \
            want["attention-experts"]
        assert {i: row.tolist() for i, row in enumerate(engine.routes.counts)} == want["experts"]


def test_longcat_zero_experts_are_routed_and_reported_apart(converted, colibri_run):
    """LongCat-Flash's router picks its zero-computation experts for some choices, so
    the tokens use different numbers of real experts (dynamic compute, which matching
    transformers then checks); colibri-run --stats and the Python binding count each
    shortcut layer's real experts as transformers' router chose them and its zero
    picks apart (`zero=`, engine.routes.zero)."""
    import subprocess

    model, image = converted("longcat_flash")
    ids = _ids(model, 40, seed=7)
    n_experts = model.config.n_routed_experts
    want, zero, real_per_token = {}, {}, set()

    def note(layer):
        def hook(module, args, output):
            chosen = output[2]
            real = chosen < n_experts
            want[layer] = np.bincount(chosen[real].numpy(), minlength=n_experts).tolist()
            zero[layer] = int((~real).sum())
            real_per_token.update(real.sum(dim=-1).tolist())
        return hook

    hooks = [layer.mlp.router.register_forward_hook(note(2 * i))
             for i, layer in enumerate(model.model.layers)]
    _hf_logits(model, ids)
    for hook in hooks:
        hook.remove()
    assert all(zero.values()) and len(real_per_token) >= 2, (zero, real_per_token)
    done = subprocess.run([str(colibri_run), str(image), "--ids", ",".join(map(str, ids)),
                           "--context", "64", "--stats"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _stats_counts(done.stderr, "experts") == want
    lines = [line for line in done.stderr.splitlines() if ": experts: layer=" in line]
    assert {int(line.split("layer=")[1].split()[0]): int(line.split("zero=")[1]) for line in lines} \
        == zero
    from colibri_tools.runtime.engine import Engine

    with Engine(image, threads=2, batch=4, routes=True) as engine:
        engine.forward(ids)
        assert {i: row.tolist() for i, row in enumerate(engine.routes.counts) if row.sum()} == want
        assert {i: int(c) for i, c in enumerate(engine.routes.zero) if c} == zero


def test_longcat_as_transformers_reads_its_config(colibri_run, tmp_path):
    """A LongCat-Flash config without zero_expert_num (transformers' default:
    256 zero experts) and with router_bias (a classifier.bias that
    transformers' router never adds): the image follows transformers, within
    the tolerance, and records the 256."""
    import json

    from colibri_tools import read_image
    from colibri_tools.converter.convert import convert
    from hf_models import build_model, save_checkpoint

    model, _config = build_model("longcat_flash", seed=11, zero_expert_num=256, router_bias=True)
    bias = model.model.layers[0].mlp.router.classifier.bias
    with torch.no_grad():
        bias.copy_(torch.linspace(-3.0, 3.0, bias.numel()))  # it would change the picks
    save_checkpoint(model, tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    del config["zero_expert_num"]
    (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
    convert(tmp_path / "hf", tmp_path / "out", context=64, progress=False)
    image = tmp_path / "out" / "model.bin"
    assert read_image(image).record.zero_experts == 256
    ids = _ids(model, 7, seed=7)
    want = _hf_logits(model, ids)
    _, got = run_engine(colibri_run, image, ids, logits_path=tmp_path / "l.bin",
                        vocab=model.config.vocab_size)
    assert float(np.abs(got - want).max()) <= TOLERANCE


def test_mimo_layer_types_differ_where_it_shows(converted):
    """Guards the MiMo-V2-Flash test model: the sliding layers' own RoPE base, their
    sinks and the value scale each change the logits far beyond the tolerance, so
    matching transformers checks the per-layer RoPE tables (format 1.12), the -inf
    sinks of the full layers against the others' and the scale folded into v_proj."""
    model, _ = converted("mimo_v2_flash")
    ids = _ids(model, 40, seed=3)
    base = _hf_logits(model, ids)
    rotary, attns = model.model.rotary_emb, [layer.self_attn for layer in model.model.layers]
    own = rotary.sliding_attention_inv_freq.clone()
    edits = {
        "rope": (lambda: rotary.sliding_attention_inv_freq.copy_(rotary.full_attention_inv_freq),
                 lambda: rotary.sliding_attention_inv_freq.copy_(own)),
        "sinks": (lambda: [setattr(a, "saved", a.sinks) or setattr(a, "sinks", None)
                           for a in attns if a.sinks is not None],
                  lambda: [setattr(a, "sinks", a.saved) for a in attns if hasattr(a, "saved")]),
        "value scale": (lambda: [setattr(a, "v_scale", 1.0) for a in attns],
                        lambda: [setattr(a, "v_scale", model.config.attention_value_scale)
                                 for a in attns]),
    }
    for name, (change, undo) in edits.items():
        with torch.no_grad():
            change()
            try:
                moved = np.abs(_hf_logits(model, ids) - base).max()
            finally:
                undo()
        assert moved > 1000 * TOLERANCE, name
    np.testing.assert_array_equal(_hf_logits(model, ids), base)


def test_qwen3_5_moe_as_its_checkpoints_ship(colibri_run, tmp_path):
    """Qwen3.5-MoE's checkpoints are multimodal (model_type qwen3_5_moe: the text
    model's config under text_config, its weights under model.language_model., a
    vision tower beside): colibri-convert converts the text model, and its logits
    on text follow transformers' multimodal model within the tolerance, greedy
    tokens included."""
    from colibri_tools.converter.convert import convert
    from hf_models import DEFAULT_CONFIGS, _rescale
    from transformers import Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration

    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32,
                  num_position_embeddings=16, patch_size=2, spatial_merge_size=1,
                  temporal_patch_size=1)
    torch.manual_seed(5)
    model = Qwen3_5MoeForConditionalGeneration(Qwen3_5MoeConfig(
        text_config=DEFAULT_CONFIGS["qwen3_5_moe"], vision_config=vision)).float().eval()
    model.config._experts_implementation = "eager"
    model.config._attn_implementation = "eager"
    model.config.hidden_size = model.config.text_config.hidden_size  # what _rescale reads
    _rescale(model, "qwen3_5_moe", 5)
    model.save_pretrained(tmp_path / "hf")
    convert(tmp_path / "hf", tmp_path / "out", context=64, progress=False)
    image = tmp_path / "out" / "model.bin"
    ids = np.random.default_rng(33).integers(0, model.config.text_config.vocab_size, 33).tolist()
    want = _hf_logits(model, ids)
    _, got = run_engine(colibri_run, image, ids, logits_path=tmp_path / "l.bin",
                        vocab=model.config.text_config.vocab_size)
    assert want.std() > 0.3
    assert float(np.abs(got - want).max()) <= TOLERANCE
    with torch.no_grad():
        greedy = model.generate(torch.tensor([ids[:5]]), max_new_tokens=16, min_new_tokens=16,
                                do_sample=False, pad_token_id=0, eos_token_id=None)
    tokens, _ = run_engine(colibri_run, image, ids[:5], gen=16)
    assert tokens == greedy[0, 5:].tolist()
