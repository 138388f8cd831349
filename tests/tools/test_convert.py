"""colibri-convert end to end: every family, both expert layouts, shards, bf16,
pytorch_model.bin, tokenizer copy, options and atomic outputs.

Golden values come from the Hugging Face model (its modules, parameters and
logits) and from an independent numpy forward pass over the written image.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from colibri_tools import convert, read_image
from colibri_tools.converter.convert import main
from colibri_tools.errors import CheckpointError, OptionError
from hf_expect import expected_record, expected_tensors, hf_logits
from hf_models import FAMILIES, edit_config
from numpy_reference import forward

IDS = [3, 17, 42, 5, 88, 61, 0, 29, 73, 12, 50, 8, 91, 33]


def _record_dict(image) -> dict:
    r = image.record
    out = {name: getattr(r, name) for name in r.__dataclass_fields__}
    out["arch"] = image.arch
    out["ffn_kinds"] = [layer.ffn_kind for layer in image.layers]
    out["attn_kinds"] = [layer.attn_kind for layer in image.layers]
    return out


def _assert_tensors(image, expected: dict) -> None:
    got = {t.key: t for t in image.tensors}
    assert set(got) == set(expected), set(got) ^ set(expected)
    for key, array in expected.items():
        if key[0] == 75:  # a RoPE table (1.12): the nearest float32s, transformers' within an ulp
            np.testing.assert_allclose(image.tensor_array(got[key]), array, rtol=2 ** -22)
            continue
        np.testing.assert_array_equal(image.tensor_array(got[key]), array, err_msg=str(key))


@pytest.mark.parametrize("family", FAMILIES)
def test_family_converts_and_matches_hf(family, hf_model, hf_checkpoint, tmp_path):
    model, _ = hf_model(family)
    result = convert(hf_checkpoint(family), tmp_path / "out", progress=False)
    image = read_image(result.image_path, verify_data=True)
    assert _record_dict(image) == expected_record(model, family)
    _assert_tensors(image, expected_tensors(model, family))
    np.testing.assert_allclose(forward(image, IDS), hf_logits(model, IDS), rtol=1e-4, atol=1e-4)
    assert result.fingerprint == image.fingerprint and result.image_size == image.image_size
    assert result.image_path.stat().st_size == image.image_size


@pytest.mark.parametrize("family", FAMILIES)
def test_fused_and_per_expert_layouts_give_identical_images(family, hf_checkpoint, tmp_path):
    a = convert(hf_checkpoint(family, layout="per_expert"), tmp_path / "a", progress=False)
    b = convert(hf_checkpoint(family, layout="fused"), tmp_path / "b", progress=False)
    assert a.image_path.read_bytes() == b.image_path.read_bytes()


@pytest.mark.parametrize("family,layout", [("mixtral", "per_expert"), ("qwen2_moe", "fused")])
def test_one_and_three_shards_give_identical_images(family, layout, hf_checkpoint, tmp_path):
    sharded = hf_checkpoint(family, layout=layout, shards=3)
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == 3
    a = convert(hf_checkpoint(family, layout=layout), tmp_path / "a", progress=False)
    b = convert(sharded, tmp_path / "b", progress=False)
    assert a.image_path.read_bytes() == b.image_path.read_bytes()


@pytest.mark.parametrize("family,layout", [("qwen3_moe", "per_expert"), ("olmoe", "fused")])
def test_bf16_checkpoint_holds_the_bf16_rounded_weights(family, layout, hf_model,
                                                        hf_checkpoint, tmp_path):
    model, _ = hf_model(family)
    result = convert(hf_checkpoint(family, layout=layout, dtype="bfloat16"), tmp_path,
                     progress=False)
    image = read_image(result.image_path, verify_data=True)
    expected = expected_tensors(model, family, torch.bfloat16)
    _assert_tensors(image, expected)
    assert not np.array_equal(expected[(1, 0xFFFF, 0xFFFF)],
                              expected_tensors(model, family)[(1, 0xFFFF, 0xFFFF)])


def test_pytorch_model_bin_gives_the_same_image(hf_checkpoint, tmp_path):
    a = convert(hf_checkpoint("qwen2_moe"), tmp_path / "a", progress=False)
    b = convert(hf_checkpoint("qwen2_moe", weights_format="torch"), tmp_path / "b", progress=False)
    assert a.image_path.read_bytes() == b.image_path.read_bytes()


def test_switch_is_arch_5_without_shared_tensors(hf_checkpoint, tmp_path, caplog):
    with caplog.at_level("INFO", logger="colibri_tools"):
        result = convert(hf_checkpoint("switch"), tmp_path, progress=False)
    image = read_image(result.image_path)
    assert image.arch == 5 and result.dropped_shared_expert
    assert image.record.shared_intermediate == 0 and image.record.shared_gate == 0
    assert not [t for t in image.tensors if 41 <= t.role <= 44]
    assert "dropped" in caplog.text


@pytest.mark.parametrize("overrides", [{"num_experts_per_tok": 2}, {"norm_topk_prob": True}])
def test_zero_shared_expert_is_kept_unless_top1_unnormalised(overrides, hf_checkpoint, tmp_path):
    result = convert(hf_checkpoint("switch", **overrides), tmp_path, progress=False)
    image = read_image(result.image_path)
    assert image.arch == 2 and image.record.shared_intermediate == 12
    assert len([t for t in image.tensors if 41 <= t.role <= 44]) == 4 * 2


def test_nonzero_shared_expert_keeps_arch_2_even_with_top1(hf_model, hf_checkpoint, tmp_path):
    model, _ = hf_model("qwen2_moe", num_experts_per_tok=1)
    result = convert(hf_checkpoint("qwen2_moe", num_experts_per_tok=1), tmp_path, progress=False)
    image = read_image(result.image_path)
    assert image.arch == 2 and image.record.shared_gate == 1
    np.testing.assert_allclose(forward(image, IDS), hf_logits(model, IDS), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family,overrides", [
    ("qwen3_moe", {"tie_word_embeddings": True}),
    ("qwen2_moe", {"norm_topk_prob": True, "qkv_bias": False, "mlp_only_layers": []}),
    ("olmoe", {"norm_topk_prob": True, "attention_bias": False}),
    ("mixtral", {"head_dim": None, "num_attention_heads": 6, "num_key_value_heads": 3,
                 "num_local_experts": 3, "num_experts_per_tok": 1}),
])
def test_variants_match_hf_logits(family, overrides, hf_model, hf_checkpoint, tmp_path):
    model, _ = hf_model(family, **overrides)
    result = convert(hf_checkpoint(family, layout="fused", **overrides), tmp_path, progress=False)
    image = read_image(result.image_path, verify_data=True)
    assert _record_dict(image) == expected_record(model, family)
    np.testing.assert_allclose(forward(image, IDS[:9]), hf_logits(model, IDS[:9]),
                               rtol=1e-4, atol=1e-4)


def test_tokenizer_is_copied(hf_checkpoint, tmp_path):
    src = hf_checkpoint("olmoe")
    result = convert(src, tmp_path, progress=False)
    assert result.tokenizer_path == tmp_path / "model_tokenizer.json"
    assert result.tokenizer_path.read_bytes() == (src / "tokenizer.json").read_bytes()


def test_no_tokenizer_no_copy(hf_checkpoint, tmp_path):
    (tmp_path / "model_tokenizer.json").write_text("{}")  # stale, from another model
    result = convert(hf_checkpoint("olmoe", tokenizer=False), tmp_path, progress=False)
    assert result.tokenizer_path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin", "model_config.h"]


def test_alignment_option_places_expert_blocks(hf_checkpoint, tmp_path):
    small = convert(hf_checkpoint("mixtral"), tmp_path / "a", alignment=64, progress=False)
    big = convert(hf_checkpoint("mixtral"), tmp_path / "b", alignment=65536, progress=False)
    for result, alignment in ((small, 64), (big, 65536)):
        image = read_image(result.image_path)
        assert image.alignment == alignment
        assert all(b.offset % alignment == 0 for b in image.expert_blocks())
    assert small.image_size < big.image_size


@pytest.mark.parametrize("args,message", [
    (["--context", "129"], "--context 129"),
    (["--context", "0"], "--context 0"),
    (["--alignment", "3000"], "--alignment 3000"),
    (["--alignment", "32"], "--alignment 32"),
])
def test_bad_options_fail_without_output(args, message, hf_checkpoint, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(hf_checkpoint("mixtral")), "-o", str(out), "--quiet", *args]) != 0
    assert message in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_context_defaults_to_max_positions_capped(hf_checkpoint, tmp_path):
    assert convert(hf_checkpoint("mixtral"), tmp_path / "a", progress=False).context == 128
    big = hf_checkpoint("olmoe", max_position_embeddings=5000)
    assert convert(big, tmp_path / "b", progress=False).context == 2048
    with pytest.raises(OptionError):
        convert(hf_checkpoint("mixtral"), tmp_path / "c", context=129, progress=False)


def test_cli_prints_summary_and_quiet_prints_nothing(hf_checkpoint, tmp_path, capsys):
    assert main([str(hf_checkpoint("qwen3_moe")), "-o", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "arch 4" in out and "fingerprint 0x" in out
    assert main([str(hf_checkpoint("qwen3_moe")), "-o", str(tmp_path / "b"), "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def _poison_one_expert(hf_dir: Path) -> None:
    """Put a NaN into the last tensor of the file: only found while writing."""
    from safetensors.numpy import load_file, save_file
    path = hf_dir / "model.safetensors"
    tensors = load_file(str(path))
    name = "model.layers.1.block_sparse_moe.experts.4.w2.weight"
    tensors[name] = tensors[name].copy()
    tensors[name][0, 0] = np.nan
    save_file(tensors, str(path))


def test_failure_while_writing_leaves_older_output_untouched(hf_checkpoint, copy_checkpoint,
                                                             tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("model.bin", "model_config.h", "model_tokenizer.json"):
        (out / name).write_text(f"old {name}")
    hf_dir = copy_checkpoint(hf_checkpoint("mixtral"))
    _poison_one_expert(hf_dir)
    with pytest.raises(CheckpointError, match="NaN"):
        convert(hf_dir, out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["model.bin", "model_config.h",
                                                     "model_tokenizer.json"]
    assert (out / "model.bin").read_text() == "old model.bin"


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_signal_mid_write_leaves_no_staged_file(signame, hf_checkpoint, tmp_path, monkeypatch):
    """SIGTERM/SIGHUP while model.bin is being written (as `timeout` or a CI
    cancel would send it): the command exits 128 + signal and leaves nothing
    behind, not even the staged .model.bin.*.tmp."""
    import os
    import signal
    import sys

    convert_module = sys.modules["colibri_tools.converter.convert"]  # (the package re-exports the function)

    real_write = convert_module.write_image

    def write_then_signal(path, **kwargs):
        written = real_write(path, **kwargs)
        assert Path(path).name.endswith(".tmp") and Path(path).exists()
        os.kill(os.getpid(), getattr(signal, signame))
        return written

    monkeypatch.setattr(convert_module, "write_image", write_then_signal)
    out = tmp_path / "out"
    before = signal.getsignal(getattr(signal, signame))
    with pytest.raises(SystemExit) as stopped:
        main([str(hf_checkpoint("mixtral")), "-o", str(out), "--quiet"])
    assert stopped.value.code == 128 + getattr(signal, signame)
    assert not out.exists() or list(out.iterdir()) == []
    assert signal.getsignal(getattr(signal, signame)) is before  # the handler is put back


def test_deepseek_v3_prediction_layers_are_left_out(hf_checkpoint, copy_checkpoint, tmp_path):
    """DeepSeek-V3 checkpoints hold num_nextn_predict_layers multi-token-prediction
    layers after the last one, which transformers does not run: the image is the
    one without them; a tensor of a layer past those is still a stray."""
    from safetensors.numpy import load_file, save_file

    hf_dir = copy_checkpoint(hf_checkpoint("deepseek_v3"))
    plain = convert(hf_checkpoint("deepseek_v3"), tmp_path / "plain", progress=False)
    tensors = load_file(str(hf_dir / "model.safetensors"))
    n_layers = json.loads((hf_dir / "config.json").read_text())["num_hidden_layers"]
    extra = {f"model.layers.{n_layers}.eh_proj.weight": np.ones((4, 8), np.float32)}
    save_file(tensors | extra, str(hf_dir / "model.safetensors"))
    edit_config(hf_dir, num_nextn_predict_layers=1)
    with_mtp = convert(hf_dir, tmp_path / "mtp", progress=False)
    assert with_mtp.image_path.read_bytes() == plain.image_path.read_bytes()
    edit_config(hf_dir, num_nextn_predict_layers=0)
    with pytest.raises(CheckpointError, match="not used"):
        convert(hf_dir, tmp_path / "stray", progress=False)


def test_lfm2_reads_its_tie_embedding_key():
    """Lfm2MoeConfig takes `tie_embedding` for tie_word_embeddings: a config with
    only that key, false, keeps its own LM head."""
    from colibri_tools.converter.families import model_spec
    from hf_models import DEFAULT_CONFIGS

    config = {"model_type": "lfm2_moe", **DEFAULT_CONFIGS["lfm2_moe"]}
    del config["tie_word_embeddings"]
    assert model_spec(config | {"tie_embedding": False}, "x").record.tie_embeddings == 0
    assert model_spec(config, "x").record.tie_embeddings == 1
