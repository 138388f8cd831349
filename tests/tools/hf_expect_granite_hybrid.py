"""Golden values of hf_expect.py for Granite-4.0-H (granitemoehybrid), read off
the Hugging Face modules and config: Mamba2 layers (attn_kind 5: in_proj split
into z, x/B/C and dt; the taps and bias; dt_bias; A = -exp(A_log); D; the gated
norm; out_proj) and attention layers (attn_kind 0 with RoPE, 2 without); roles
and arch ids as docs/format.md's literal numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hf_expect_common import GLOBAL, f32, fused_experts, global_tensors


def granite_hybrid_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The record over `record`: Granite's scales and shared MLP, and the
    extension's Mamba2 sizes from the first mamba module."""
    config, layers = model.config, model.model.layers
    mamba = next((layer.mamba for layer in layers if layer.mamba is not None), None)
    attn = next(layer.self_attn for layer in layers if layer.self_attn is not None)
    moe = layers[0].block_sparse_moe
    rope = model.model.rotary_emb is not None
    return record | {
        "arch": 27, "n_layers": len(layers), "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_key_value_heads, "head_dim": attn.head_dim,
        "max_context": config.max_position_embeddings, "dense_intermediate": 0,
        "expert_intermediate": moe.experts.intermediate_dim, "n_experts": moe.experts.num_experts,
        "shared_intermediate": layers[0].shared_mlp.hidden_size,
        "rms_eps": f32(layers[0].input_layernorm.variance_epsilon),
        "rope_theta": f32(config.rope_parameters["rope_theta"]), "attn_bias": 0, "qk_norm": 0,
        "tie_embeddings": int(bool(config.tie_word_embeddings)), "router_score": 2,
        "top_k": moe.router.top_k, "router_norm_topk": 0, "shared_gate": 0,
        "embedding_scale": f32(config.embedding_multiplier),
        "residual_scale": f32(config.residual_multiplier),
        "attention_scale": f32(attn.scaling), "logits_divisor": f32(config.logits_scaling),
        "conv_kernel": mamba.conv_kernel_size if mamba else 0,
        "ssm_heads": mamba.num_heads if mamba else 0,
        "ssm_head_dim": mamba.head_dim if mamba else 0,
        "ssm_state": mamba.ssm_state_size if mamba else 0,
        "ssm_groups": mamba.n_groups if mamba else 0,
        "attn_kinds": [5 if layer.mamba is not None else (0 if rope else 2) for layer in layers],
        "ffn_kinds": [1] * len(layers)}


def _mamba(sd: dict, p: str, mixer: Any, index: int) -> dict:
    inner, channels = mixer.intermediate_size, mixer.conv_dim
    in_proj = sd[f"{p}mamba.in_proj.weight"]
    bias = sd.get(f"{p}mamba.conv1d.bias", np.zeros(channels, np.float32))
    return {(81, index, GLOBAL): in_proj[:inner],
            (82, index, GLOBAL): in_proj[inner:inner + channels],
            (83, index, GLOBAL): in_proj[inner + channels:],
            (84, index, GLOBAL): sd[f"{p}mamba.conv1d.weight"][:, 0, :],
            (85, index, GLOBAL): bias, (86, index, GLOBAL): sd[f"{p}mamba.dt_bias"],
            (87, index, GLOBAL): -np.exp(sd[f"{p}mamba.A_log"].astype(np.float32)),
            (88, index, GLOBAL): sd[f"{p}mamba.D"], (89, index, GLOBAL): sd[f"{p}mamba.norm.weight"],
            (90, index, GLOBAL): sd[f"{p}mamba.out_proj.weight"]}


def granite_hybrid_tensors(sd: dict, model: Any) -> dict:
    """Granite-4.0-H's image tensors."""
    out = global_tensors(sd, model)
    for i, layer in enumerate(model.model.layers):
        p = f"model.layers.{i}."
        out |= {(16, i, GLOBAL): sd[f"{p}input_layernorm.weight"],
                (27, i, GLOBAL): sd[f"{p}post_attention_layernorm.weight"]}
        if layer.mamba is not None:
            out |= _mamba(sd, p, layer.mamba, i)
        else:
            out |= {(role, i, GLOBAL): sd[f"{p}self_attn.{n}_proj.weight"]
                    for role, n in ((17, "q"), (18, "k"), (19, "v"), (20, "o"))}
        b = p + "block_sparse_moe."
        fused = sd[p + "shared_mlp.input_linear.weight"]
        width = fused.shape[0] // 2
        out |= {(40, i, GLOBAL): sd[b + "router.weight"], (41, i, GLOBAL): fused[:width],
                (42, i, GLOBAL): fused[width:],
                (43, i, GLOBAL): sd[p + "shared_mlp.output_linear.weight"]}
        gate_up, down = sd[b + "experts.gate_up_proj"], sd[b + "experts.down_proj"]
        out |= fused_experts(gate_up, down, i)
    return out
