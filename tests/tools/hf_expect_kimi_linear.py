"""Golden values of hf_expect.py for Kimi-Linear and Ling's hybrid (bailing_hybrid:
one-matrix gates f_proj and g_proj, the bounded forget gate, MLA with interleaved RoPE
and a head gate), read off the Hugging Face modules
and config: KDA layers (attn_kind 7: q, k, v stacked as v, k, q with their taps, the
forget and output gates' two factors, A = -exp(A_log), beta, the per-head norm) and
MLA layers without RoPE (attn_kind 2); roles and arch ids as docs/format.md's literal
numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hf_expect_common import GLOBAL, f32, fused_experts, global_tensors


def kimi_linear_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The record over `record`: MLA without RoPE (its RoPE key dimensions kept),
    DeepSeek-V3's router and shared experts, the extension's KDA sizes."""
    config, layers = model.config, model.model.layers
    kda = next(layer.self_attn for layer in layers if layer.block_type == "linear_attention")
    mla = next(layer.self_attn for layer in layers if layer.block_type == "full_attention")
    moe = [layer.mlp for layer in layers if hasattr(layer.mlp, "gate")]
    dense = [layer.mlp for layer in layers if not hasattr(layer.mlp, "gate")]
    gate = moe[0].gate
    ling = config.model_type == "bailing_hybrid"
    rank = 0 if ling else kda.g_a_proj.out_features
    bound = float(np.float32(config.kda_lower_bound)) if ling and config.kda_safe_gate else 0.0
    return record | {
        "arch": 31 if ling else 30, "n_layers": len(layers), "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_attention_heads, "head_dim": mla.qk_head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": dense[0].gate_proj.out_features if dense else 0,
        "expert_intermediate": moe[0].experts.intermediate_dim,
        "n_experts": moe[0].experts.num_experts,
        "shared_intermediate": moe[0].shared_experts.gate_proj.out_features,
        "rms_eps": f32(layers[0].input_layernorm.variance_epsilon),
        "rope_theta": f32(config.rope_parameters["rope_theta"]) if ling else 1e4,
        "attn_bias": 2048 if ling else 0, "qk_norm": 0,
        "tie_embeddings": int(bool(config.tie_word_embeddings)),
        "router_score": 1, "top_k": gate.top_k, "router_norm_topk": int(gate.norm_topk_prob),
        "routed_scaling": f32(gate.routed_scaling_factor), "n_group": gate.num_group,
        "topk_group": gate.topk_group, "shared_gate": 0, "mla": 1,
        "q_lora_rank": mla.q_lora_rank or 0, "kv_lora_rank": mla.kv_lora_rank,
        "v_head_dim": mla.v_head_dim, "lora_eps": f32(mla.kv_a_layernorm.variance_epsilon),
        "rope_dim": mla.qk_rope_head_dim, "conv_kernel": kda.conv_kernel_size,
        "ssm_heads": kda.num_heads, "ssm_head_dim": kda.head_dim, "ssm_state": kda.head_dim,
        "ssm_groups": kda.num_heads, "kda_rank": rank, "kda_bound": bound,
        "attn_kinds": [7 if layer.block_type == "linear_attention" else (0 if ling else 2)
                       for layer in layers],
        "ffn_kinds": [1 if hasattr(layer.mlp, "gate") else 0 for layer in layers]}


def _gates(sd: dict, a: str, f: str, index: int) -> dict:
    """The forget and output gates: two factors each (Kimi) or one matrix (Ling)."""
    if f + "f_proj.weight" in sd:
        return {(92, index, GLOBAL): sd[f + "f_proj.weight"], (94, index, GLOBAL): sd[a + "g_proj.weight"]}
    return {(92, index, GLOBAL): sd[f + "f_a_proj.weight"], (93, index, GLOBAL): sd[f + "f_b_proj.weight"],
            (94, index, GLOBAL): sd[a + "g_a_proj.weight"], (95, index, GLOBAL): sd[a + "g_b_proj.weight"]}


def _kda(sd: dict, p: str, index: int) -> dict:
    a, f = f"{p}self_attn.", f"{p}self_attn.forget_gate."
    inner = sd[a + "q_proj.weight"].shape[0]
    taps = sd[a + "conv1d.weight"][:, 0, :]
    return _gates(sd, a, f, index) | {
            (82, index, GLOBAL): np.concatenate([sd[a + f"{x}_proj.weight"] for x in "vkq"]),
            (91, index, GLOBAL): sd[a + "b_proj.weight"],
            (84, index, GLOBAL): np.concatenate([taps[2 * inner:], taps[inner:2 * inner],
                                                 taps[:inner]]),
            (86, index, GLOBAL): sd[f + "dt_bias"],
            (87, index, GLOBAL): -np.exp(sd[f + "A_log"].astype(np.float32).reshape(-1)),
            (89, index, GLOBAL): sd[a + "o_norm.weight"], (90, index, GLOBAL): sd[a + "o_proj.weight"]}


def _interleaved(rows: np.ndarray, start: int, width: int, heads: int, stride: int) -> np.ndarray:
    """Ling's RoPE rows (pairs 2i, 2i + 1) as the image holds them: even rows, then odd."""
    out = rows.copy()
    for h in range(heads):
        base = h * stride + start
        part = rows[base:base + width]
        out[base:base + width] = np.concatenate([part[0::2], part[1::2]])
    return out


def _mla(sd: dict, p: str, attn: Any, index: int) -> dict:
    a = f"{p}self_attn."
    if a + "g_proj.weight" in sd:  # Ling: interleaved RoPE rows, a gate per head
        nope, rope = attn.qk_nope_head_dim, attn.qk_rope_head_dim
        head = nope + rope
        q = _interleaved(sd[a + "q_proj.weight"], nope, rope, attn.num_heads, head)
        kv_a = _interleaved(sd[a + "kv_a_proj_with_mqa.weight"], attn.kv_lora_rank, rope, 1, 0)
        return {(17, index, GLOBAL): q, (67, index, GLOBAL): kv_a,
                (68, index, GLOBAL): sd[a + "kv_a_layernorm.weight"],
                (69, index, GLOBAL): sd[a + "kv_b_proj.weight"],
                (96, index, GLOBAL): sd[a + "g_proj.weight"], (20, index, GLOBAL): sd[a + "o_proj.weight"]}
    out = {(67, index, GLOBAL): sd[a + "kv_a_proj_with_mqa.weight"],
           (68, index, GLOBAL): sd[a + "kv_a_layernorm.weight"],
           (69, index, GLOBAL): sd[a + "kv_b_proj.weight"], (20, index, GLOBAL): sd[a + "o_proj.weight"]}
    if attn.q_lora_rank:
        return out | {(64, index, GLOBAL): sd[a + "q_a_proj.weight"],
                      (65, index, GLOBAL): sd[a + "q_a_layernorm.weight"],
                      (66, index, GLOBAL): sd[a + "q_b_proj.weight"]}
    return out | {(17, index, GLOBAL): sd[a + "q_proj.weight"]}


def _ffn(sd: dict, p: str, mlp: Any, index: int) -> dict:
    if not hasattr(mlp, "gate"):
        return {(role, index, GLOBAL): sd[f"{p}mlp.{n}_proj.weight"]
                for role, n in ((32, "gate"), (33, "up"), (34, "down"))}
    b = f"{p}mlp."
    out = {(40, index, GLOBAL): sd[b + "gate.weight"],
           (45, index, GLOBAL): sd[b + "gate.e_score_correction_bias"],
           (41, index, GLOBAL): sd[b + "shared_experts.gate_proj.weight"],
           (42, index, GLOBAL): sd[b + "shared_experts.up_proj.weight"],
           (43, index, GLOBAL): sd[b + "shared_experts.down_proj.weight"]}
    gate_up, down = sd[b + "experts.gate_up_proj"], sd[b + "experts.down_proj"]
    out |= fused_experts(gate_up, down, index)
    return out


def kimi_linear_tensors(sd: dict, model: Any) -> dict:
    """Kimi-Linear's image tensors."""
    out = global_tensors(sd, model)
    for i, layer in enumerate(model.model.layers):
        p = f"model.layers.{i}."
        out |= {(16, i, GLOBAL): sd[f"{p}input_layernorm.weight"],
                (27, i, GLOBAL): sd[f"{p}post_attention_layernorm.weight"]}
        if layer.block_type == "linear_attention":
            out |= _kda(sd, p, i)
        else:
            out |= _mla(sd, p, layer.self_attn, i)
        out |= _ffn(sd, p, layer.mlp, i)
    return out
