"""Configs and checkpoints the converter must refuse, with a message naming the
config field (or tensor), a non-zero exit, and no file left in OUT_DIR."""

from __future__ import annotations

import json

import pytest
from colibri_tools import convert
from colibri_tools.converter.convert import main
from colibri_tools.errors import CheckpointError, UnsupportedModelError
from hf_models import edit_config

ROPE_LINEAR = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}

UNSUPPORTED = [
    ("qwen2_moe", {"rope_parameters": ROPE_LINEAR}, "rope_parameters.rope_type"),
    ("qwen3_moe", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}},
     "rope_parameters.rope_type"),
    ("mixtral", {"rope_parameters": ..., "rope_theta": 1e6,
                 "rope_scaling": {"type": "dynamic", "factor": 2.0}}, "rope_scaling"),
    ("olmoe", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                   "partial_rotary_factor": 0.5}},
     "rope_parameters.partial_rotary_factor"),
    ("mixtral", {"sliding_window": 0}, "sliding_window"),
    ("qwen2_moe", {"use_sliding_window": True, "sliding_window": 16}, "use_sliding_window"),
    ("qwen3_moe", {"use_sliding_window": True, "sliding_window": 16}, "use_sliding_window"),
    ("qwen2_moe", {"layer_types": ["full_attention", "sliding_attention", "full_attention"]},
     "layer_types"),
    ("olmoe", {"model_type": "llama"}, "model_type"),
    ("mixtral", {"model_type": "falcon_h1"}, "model_type"),
    ("glm4_moe", {"topk_method": "greedy"}, "topk_method"),
    ("deepseek_v2", {"topk_method": "noaux_tc"}, "topk_method"),
    ("deepseek_v3", {"topk_method": "greedy"}, "topk_method"),
    ("deepseek_v3", {"attention_bias": True}, "attention_bias"),
    ("deepseek_v3", {"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                             "weight_block_size": [128, 128]}},
     "quantization_config"),
    ("deepseek_v3", {"qk_rope_head_dim": 3}, "qk_rope_head_dim"),
    ("deepseek_v2", {"topk_group": 4}, "topk_group"),
    ("deepseek_v2", {"n_group": 4}, "n_group"),
    ("deepseek_v2", {"rope_parameters": ROPE_LINEAR}, "rope_parameters.rope_type"),
    ("deepseek_v3", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                                         "rope_theta": 1e4}},
     "rope_parameters.original_max_position_embeddings"),
    ("dots1", {"scoring_func": "softmax"}, "scoring_func"),
    ("glm4_moe", {"n_group": 3}, "n_group"),
    ("dots1", {"topk_group": 4}, "topk_group"),
    ("glm4_moe", {"topk_group": 1}, "topk_group"),  # 2 experts kept, top_k 3
    ("glm4_moe", {"rope_parameters": ROPE_LINEAR}, "rope_parameters.rope_type"),
    ("glm4_moe", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                      "partial_rotary_factor": 0.25}}, "partial_rotary_factor"),
    ("dots1", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                   "partial_rotary_factor": 0.5}}, "partial_rotary_factor"),
    ("dots1", {"layer_types": ["full_attention", "full_attention", "sliding_attention"]},
     "layer_types"),
    ("dots1", {"layer_types": ..., "sliding_window": 16, "max_window_layers": 1}, "layer_types"),
    ("glm4_moe", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
     "rope_parameters.original_max_position_embeddings"),
    ("mixtral", {"hidden_act": "gelu"}, "hidden_act"),
    ("qwen3_moe", {"hidden_act": "relu"}, "hidden_act"),
    ("olmoe", {"clip_qkv": 8.0}, "clip_qkv"),
    ("flex_olmo", {"clip_qkv": 8.0}, "clip_qkv"),
    ("minimax_m2", {"rotary_dim": 12}, "rotary_dim"),
    ("minimax_m2", {"scoring_func": "softmax"}, "scoring_func"),
    ("minimax_m2", {"qk_norm_type": "per_head"}, "qk_norm_type"),
    ("glm4_moe_lite", {"mlp_layer_types": ["dense", "moe", "sparse"]}, "mlp_layer_types"),
    ("hunyuan_v1_moe", {"moe_topk": [2, 3]}, "moe_topk"),
    ("hunyuan_v1_moe", {"num_experts": [5, 4]}, "num_experts"),
    ("hunyuan_v1_moe", {"rope_parameters": ROPE_LINEAR}, "rope_parameters.rope_type"),
    ("hunyuan_v1_moe", {"rope_parameters": {"rope_type": "dynamic", "alpha": 0.5,
                                            "factor": 1.0, "rope_theta": 1e4}},
     "rope_parameters.alpha"),
    ("dbrx", {"ffn_config": {"ffn_hidden_size": 12, "moe_num_experts": 6, "moe_top_k": 2,
                             "moe_normalize_expert_weights": 2.0}},
     "ffn_config.moe_normalize_expert_weights"),
    ("dbrx", {"ffn_config": {"ffn_hidden_size": 12, "moe_num_experts": 6, "moe_top_k": 2,
                             "ffn_act_fn": {"name": "gelu"}}}, "ffn_config.ffn_act_fn"),
    ("dbrx", {"attn_config": {"kv_n_heads": 2, "clip_qkv": -1.0}}, "attn_config.clip_qkv"),
    ("dbrx", {"ffn_config": {"ffn_hidden_size": 12, "moe_num_experts": 6, "moe_top_k": 7}},
     "ffn_config.moe_top_k"),
    ("dbrx", {"attn_config": {"kv_n_heads": 3}}, "attn_config.kv_n_heads"),
    ("afmoe", {"layer_types": ["full_attention", "sliding"]}, "layer_types"),
    ("llama4_text", {"layer_types": ["chunked_attention", "chunked_attention",
                                     "chunked_attention", "full_attention"]}, "layer_types"),
    ("llama4_text", {"no_rope_layers": [1, 2, 1, 0]}, "no_rope_layers"),
    ("jetmoe", {"rms_norm_eps": 1e-5}, "rms_norm_eps"),
    ("mimo_v2_flash", {"v_head_dim": 20}, "v_head_dim"),
    ("mimo_v2_flash", {"num_key_value_heads": 4}, "num_key_value_heads"),
    ("mimo_v2_flash", {"attention_value_scale": "big"}, "attention_value_scale"),
    ("mimo_v2_flash", {"rope_parameters": {
        "full_attention": {"rope_type": "yarn", "rope_theta": 5e4, "factor": 2.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e3}}},
     "rope_parameters.full_attention"),
    ("mimo_v2_flash", {"rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 5e4, "partial_rotary_factor": 1.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e3,
                              "partial_rotary_factor": 0.5}}}, "rope_parameters"),
    ("mimo_v2_flash", {"layer_types": ["full_attention", "chunked"]}, "layer_types"),
    ("longcat_flash", {"head_dim": 6}, "head_dim"),
    ("longcat_flash", {"qk_head_dim": 12}, "qk_head_dim"),
    ("longcat_flash", {"q_lora_rank": None}, "q_lora_rank"),
    ("longcat_flash", {"num_key_value_heads": 2}, "num_key_value_heads"),
    ("longcat_flash", {"zero_expert_num": 4096}, "zero_expert_num"),
    ("longcat_flash", {"moe_topk": 10}, "moe_topk"),
    ("lfm2_moe", {"conv_bias": True}, "conv_bias"),
    ("lfm2_moe", {"layer_types": None}, "layer_types"),
    ("lfm2_moe", {"layer_types": ["conv", "sliding_attention", "conv", "conv", "conv"]},
     "layer_types"),
    ("lfm2_moe", {"conv_L_cache": 1}, "conv_L_cache"),
    ("lfm2_moe", {"conv_L_cache": 65}, "conv_L_cache"),
    ("lfm2_moe", {"num_experts": 0}, "num_experts"),
    ("granitemoehybrid", {"mamba_proj_bias": True}, "mamba_proj_bias"),
    ("granitemoehybrid", {"time_step_limit": [0.0, 0.1]}, "time_step_limit"),
    ("granitemoehybrid", {"hidden_act": "gelu"}, "hidden_act"),
    ("granitemoehybrid", {"position_embedding_type": "alibi"}, "position_embedding_type"),
    ("granitemoehybrid", {"layer_types": ["mamba", "sliding_attention", "mamba", "mamba",
                                          "attention"]}, "layer_types"),
    ("granitemoehybrid", {"mamba_d_head": 12}, "mamba_d_head"),
    ("granitemoehybrid", {"mamba_n_groups": 3}, "mamba_n_groups"),
    ("granitemoehybrid", {"mamba_d_state": 2048}, "mamba_d_state"),
    ("granitemoehybrid", {"mamba_d_conv": 65}, "mamba_d_conv"),
    ("granitemoehybrid", {"num_local_experts": 0}, "num_local_experts"),
    ("qwen3_next", {"attention_bias": True}, "attention_bias"),
    ("qwen3_next", {"hidden_act": "gelu"}, "hidden_act"),
    ("qwen3_next", {"layer_types": ["linear_attention", "sliding_attention", "full_attention",
                                    "linear_attention", "full_attention"]}, "layer_types"),
    ("qwen3_next", {"linear_num_value_heads": 3}, "linear_num_value_heads"),
    ("qwen3_next", {"linear_key_head_dim": 2048}, "linear_key_head_dim"),
    ("qwen3_next", {"linear_conv_kernel_dim": 1}, "linear_conv_kernel_dim"),
    ("qwen3_5_moe", {"num_experts": 0}, "num_experts"),
    ("qwen3_5_moe", {"layer_types": ["linear_attention"] * 3}, "layer_types"),
    ("qwen3_5_moe", {"linear_num_value_heads": 1025}, "linear_num_value_heads"),
    ("kimi_linear", {"moe_router_activation_func": "softmax"}, "moe_router_activation_func"),
    ("kimi_linear", {"layer_types": ["linear_attention", "sliding_attention",
                                     "linear_attention", "full_attention"]}, "layer_types"),
    ("kimi_linear", {"mlp_layer_types": ["dense", "moe", "sparse", "sparse"]}, "mlp_layer_types"),
    ("kimi_linear", {"layer_types": None, "linear_attn_config": {
        "full_attn_layers": [2, 9], "kda_layers": [1, 3]}}, "linear_attn_config.full_attn_layers"),
    ("kimi_linear", {"hidden_act": "gelu"}, "hidden_act"),
    ("bailing_hybrid", {"kda_lower_bound": 1.0}, "kda_lower_bound"),
    ("bailing_hybrid", {"layer_types": ["linear_attention"] * 3 + ["sliding_attention"]},
     "layer_types"),
    ("bailing_hybrid", {"num_experts": 0}, "num_experts"),
    ("jamba", {"mamba_proj_bias": True}, "mamba_proj_bias"),
    ("jamba", {"hidden_act": "gelu"}, "hidden_act"),
    ("jamba", {"attn_layer_offset": 4}, "attn_layer_offset"),
    ("jamba", {"mamba_dt_rank": 60}, "mamba_dt_rank"),
    ("jamba", {"mamba_d_conv": 1}, "mamba_d_conv"),
    ("nemotron_h", {"mlp_hidden_act": "silu"}, "mlp_hidden_act"),
    ("nemotron_h", {"moe_latent_size": 8}, "moe_latent_size"),
    ("nemotron_h", {"mlp_bias": True}, "mlp_bias"),
    ("nemotron_h", {"layers_block_type": ["linear_attention", "sliding_attention"]},
     "layers_block_type"),
    ("nemotron_h", {"n_routed_experts": 0}, "n_routed_experts"),
    ("nemotron_h", {"time_step_min": 2.0}, "time_step_min"),
    ("jetmoe", {"activation_function": "gelu"}, "activation_function"),
    ("llama4_text", {"moe_layers": [1, 4]}, "moe_layers"),
    ("llama4_text", {"floor_scale": 0.5}, "floor_scale"),
    ("llama4_text", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0,
                                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                         "original_max_position_embeddings": 16}},
     "rope_parameters.rope_type"),
    ("olmoe", {"head_dim": 11}, "head_dim"),
    ("mixtral", {"head_dim": 9}, "head_dim"),
    ("qwen3_moe", {"num_experts_per_tok": 5}, "num_experts_per_tok"),
    ("qwen2_moe", {"num_key_value_heads": 4}, "num_key_value_heads"),
    ("phimoe", {"num_experts_per_tok": 3}, "num_experts_per_tok"),
    ("phimoe", {"router_jitter_noise": 2.0}, "router_jitter_noise"),
    ("phimoe", {"sliding_window": -3}, "sliding_window"),
    ("phimoe", {"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4,
                                    "short_mscale": 1.2, "long_mscale": 1.2}},
     "rope_parameters.rope_type"),
    ("ernie4_5_moe", {"use_bias": True}, "use_bias"),
    ("ernie4_5_moe", {"moe_norm_min": 3.0}, "moe_norm_min"),
    ("ernie4_5_moe", {"moe_layer_end_index": -2}, "moe_layer_end_index"),
    ("ernie4_5_moe", {"moe_k": 9}, "moe_k"),
    ("ernie4_5_moe", {"hidden_act": "gelu"}, "hidden_act"),
    ("gpt_oss", {"layer_types": ["sliding_attention", "chunked_attention", "full_attention"]},
     "layer_types"),
    ("gpt_oss", {"layer_types": ["full_attention"]}, "layer_types"),
    ("gpt_oss", {"quantization_config": {"quant_method": "mxfp4"}}, "quantization_config"),
    ("gpt_oss", {"swiglu_limit": -1.0}, "swiglu_limit"),
    ("gpt_oss", {"swiglu_alpha": 0.0}, "swiglu_alpha"),
    ("gpt_oss", {"sliding_window": 0}, "sliding_window"),
]


def _assert_empty(out) -> None:
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("family,changes,field", UNSUPPORTED,
                         ids=[f"{f}-{field}" for f, _, field in UNSUPPORTED])
def test_unsupported_config_names_the_field(family, changes, field, hf_checkpoint,
                                            copy_checkpoint, tmp_path, capsys):
    hf_dir = copy_checkpoint(hf_checkpoint(family))
    edit_config(hf_dir, **changes)
    out = tmp_path / "out"
    with pytest.raises(UnsupportedModelError) as info:
        convert(hf_dir, out, progress=False)
    assert info.value.field == field and field in str(info.value)
    assert main([str(hf_dir), "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert "unsupported" in err and field in err and "config.json" in err
    _assert_empty(out)


def test_existing_output_is_left_untouched(hf_checkpoint, copy_checkpoint, tmp_path):
    hf_dir = copy_checkpoint(hf_checkpoint("mixtral"))
    edit_config(hf_dir, hidden_act="gelu")
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.bin").write_bytes(b"older image")
    assert main([str(hf_dir), "-o", str(out), "--quiet"]) != 0
    assert [p.name for p in out.iterdir()] == ["model.bin"]
    assert (out / "model.bin").read_bytes() == b"older image"


@pytest.mark.parametrize("family,changes,needle", [
    ("qwen2_moe", {"qkv_bias": False}, "not used"),          # biases the config does not announce
    ("qwen3_moe", {"attention_bias": True}, "q_proj.bias. not found"),  # announced, missing
    ("mixtral", {"intermediate_size": 24}, "has shape"),
    ("olmoe", {"hidden_size": ...}, "hidden_size"),
    ("olmoe", {"num_hidden_layers": "2"}, "not an integer"),
])
def test_config_and_weights_disagree(family, changes, needle, hf_checkpoint, copy_checkpoint,
                                     tmp_path):
    hf_dir = copy_checkpoint(hf_checkpoint(family))
    edit_config(hf_dir, **changes)
    with pytest.raises(CheckpointError, match=needle):
        convert(hf_dir, tmp_path / "out", progress=False)
    _assert_empty(tmp_path / "out")


def test_missing_weights_and_config(tmp_path, hf_checkpoint, copy_checkpoint):
    with pytest.raises(CheckpointError, match="not a directory"):
        convert(tmp_path / "nothing", tmp_path / "out", progress=False)
    hf_dir = copy_checkpoint(hf_checkpoint("olmoe"))
    (hf_dir / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        convert(hf_dir, tmp_path / "out", progress=False)
    (hf_dir / "config.json").unlink()
    with pytest.raises(CheckpointError, match="config.json"):
        convert(hf_dir, tmp_path / "out", progress=False)
    _assert_empty(tmp_path / "out")


@pytest.mark.parametrize("shard,needle", [
    ("../../etc/passwd", "plain file name"),
    ("model-00009-of-00009.safetensors", "missing"),
    ("model-00002-of-00003.safetensors", "not there|not listed"),
])
def test_bad_shard_index(shard, needle, hf_checkpoint, copy_checkpoint, tmp_path):
    hf_dir = copy_checkpoint(hf_checkpoint("qwen3_moe", shards=3))
    index_path = hf_dir / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    name = next(n for n, s in index["weight_map"].items() if s.startswith("model-00001-"))
    index["weight_map"][name] = shard
    index_path.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=needle):
        convert(hf_dir, tmp_path / "out", progress=False)


@pytest.mark.parametrize("family,changes,needle", [
    ("mixtral", {"model_type": ["mixtral"]}, "model_type"),
    ("mixtral", {"rms_norm_eps": 1e39}, "float32"),
    ("mixtral", {"rms_norm_eps": 10 ** 400}, "float32"),
    ("qwen2_moe", {"rope_theta": 1e-40, "rope_parameters": ...}, "rope_theta"),
    ("mixtral", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e39}}, "rope_theta"),
    ("olmoe", {"rope_parameters": {"rope_type": "default", "rope_theta": 0.5}}, "rope_theta"),
])
def test_hostile_values_are_refused_not_raised(family, changes, needle, hf_checkpoint,
                                               copy_checkpoint, tmp_path, capsys):
    """Wrong types and values beyond float32 are refusals naming the field,
    never a TypeError or OverflowError (issue 13, item 5)."""
    hf_dir = copy_checkpoint(hf_checkpoint(family))
    edit_config(hf_dir, **changes)
    with pytest.raises((CheckpointError, UnsupportedModelError), match=needle):
        convert(hf_dir, tmp_path / "out", progress=False)
    assert main([str(hf_dir), "-o", str(tmp_path / "out"), "--quiet"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    _assert_empty(tmp_path / "out")


ZERO = "zero experts"


@pytest.mark.parametrize("family,changes,field,needle", [
    ("mixtral", {"rms_norm_eps": 1e-50}, "rms_norm_eps", "float32 holds 1e-50 as 0.0"),
    ("deepseek_v3", {"rms_norm_eps": 1e-46}, "rms_norm_eps", "float32 holds 1e-46 as 0.0"),
    ("mixtral", {"num_local_experts": 0}, "num_local_experts", ZERO),
    ("olmoe", {"num_experts": 0}, "num_experts", ZERO),
    ("phimoe", {"num_local_experts": 0}, "num_local_experts", ZERO),
    ("gpt_oss", {"num_local_experts": 0}, "num_local_experts", ZERO),
    ("ernie4_5_moe", {"moe_num_experts": 0}, "moe_num_experts", ZERO),
    ("glm4_moe", {"n_routed_experts": 0}, "n_routed_experts", ZERO),
    ("deepseek_v2", {"n_routed_experts": 0}, "n_routed_experts", ZERO),
])
def test_the_config_value_is_named_not_what_it_became(family, changes, field, needle,
                                                      hf_checkpoint, copy_checkpoint, tmp_path,
                                                      capsys):
    """An rms eps that float32 rounds to 0 names rms_norm_eps and its value,
    not the temporary image that the record check refused; zero experts are
    "zero experts" under the family's key, not a top_k limit (issue 25)."""
    hf_dir = copy_checkpoint(hf_checkpoint(family))
    edit_config(hf_dir, **changes)
    with pytest.raises(UnsupportedModelError) as info:
        convert(hf_dir, tmp_path / "out", progress=False)
    value = changes[field]
    assert info.value.field == field and info.value.value == value
    assert f"{field} = {value!r}" in str(info.value) and needle in str(info.value)
    assert main([str(hf_dir), "-o", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "config.json" in err and needle in err and ".tmp" not in err
    _assert_empty(tmp_path / "out")


def _config_of(hf_dir) -> dict:
    return json.loads((hf_dir / "config.json").read_text())


def test_deeply_nested_json_is_refused(hf_checkpoint, copy_checkpoint, tmp_path):
    """config.json, the shard index and a safetensors header nested 100,000
    deep: each a CheckpointError naming its file, not a RecursionError."""
    deep = "[" * 100_000 + "]" * 100_000
    hf_dir = copy_checkpoint(hf_checkpoint("mixtral"))
    (hf_dir / "config.json").write_text('{"a": ' + deep + "}")
    with pytest.raises(CheckpointError, match="nested too deeply"):
        convert(hf_dir, tmp_path / "out", progress=False)
    (hf_dir / "config.json").write_text(json.dumps(_config_of(hf_checkpoint("mixtral"))))
    body = ('{"a": ' + deep + "}").encode()
    tensors = hf_dir / "model.safetensors"
    tensors.write_bytes(len(body).to_bytes(8, "little") + body)
    with pytest.raises(CheckpointError, match="nested too deeply"):
        convert(hf_dir, tmp_path / "out2", progress=False)
