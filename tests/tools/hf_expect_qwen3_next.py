"""Golden values of hf_expect.py for Qwen3-Next and Qwen3.5-MoE's text model (its
gated delta projections apart: in_proj_qkv, _z, _b, _a), read off the Hugging Face modules
and config: gated delta layers (attn_kind 6: in_proj_qkvz and in_proj_ba split per
key head into z, v/k/q, a and b; the taps reordered v, k, q; A = -exp(A_log)) and
gated attention layers (q_proj's query and gate rows per head); the zero-centred
norms stored as 1 + weight; roles and arch ids as docs/format.md's literal numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hf_expect_common import GLOBAL, f32, fused_experts, global_tensors


def qwen3_next_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The record over `record`: Qwen2-MoE's routing with the gated shared expert,
    the attention's output gate (attn_bias 256), per-head q/k norms, RoPE over
    partial_rotary_factor of the head; the extension's gated delta sizes."""
    config, layers = model.config, model.model.layers
    delta = next(layer.linear_attn for layer in layers if layer.block_type == "linear_attention")
    attn = next(layer.self_attn for layer in layers if layer.block_type == "full_attention")
    moe = [layer.mlp for layer in layers if hasattr(layer.mlp, "gate")]
    dense = [layer.mlp for layer in layers if not hasattr(layer.mlp, "gate")]
    rope = model.model.rotary_emb
    return record | {
        "arch": 28 if config.model_type == "qwen3_next" else 29, "n_layers": len(layers),
        "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_key_value_heads, "head_dim": attn.head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": dense[0].gate_proj.out_features if dense else 0,
        "expert_intermediate": moe[0].experts.intermediate_dim,
        "n_experts": moe[0].experts.num_experts,
        "shared_intermediate": moe[0].shared_expert.gate_proj.out_features,
        "rms_eps": f32(layers[0].input_layernorm.eps),
        "rope_theta": f32(rope.config.rope_parameters["rope_theta"]), "attn_bias": 256,
        "qk_norm": 2, "tie_embeddings": int(bool(config.tie_word_embeddings)), "router_score": 0,
        "top_k": moe[0].gate.top_k,
        "router_norm_topk": int(getattr(moe[0].gate, "norm_topk_prob", True)),
        "shared_gate": 1, "rope_dim": 2 * rope.inv_freq.shape[0],
        "conv_kernel": delta.conv_kernel_size, "ssm_heads": delta.num_v_heads,
        "ssm_head_dim": delta.head_v_dim, "ssm_state": delta.head_k_dim,
        "ssm_groups": delta.num_k_heads,
        "attn_kinds": [6 if layer.block_type == "linear_attention" else 0 for layer in layers],
        "ffn_kinds": [1 if hasattr(layer.mlp, "gate") else 0 for layer in layers]}


def _projections(sd: dict, p: str, mixer: Any) -> list[np.ndarray]:
    """q, k, v, z, b, a (rows of every head in order): in_proj_qkvz per key head q, k,
    v, z and in_proj_ba per key head b, a; or Qwen3.5's apart."""
    hk, dk, dv = mixer.num_k_heads, mixer.head_k_dim, mixer.head_v_dim
    per = mixer.num_v_heads // hk
    if f"{p}linear_attn.in_proj_qkv.weight" in sd:
        qkv = sd[f"{p}linear_attn.in_proj_qkv.weight"]
        return [qkv[:hk * dk], qkv[hk * dk:2 * hk * dk], qkv[2 * hk * dk:]] + [
            sd[f"{p}linear_attn.in_proj_{n}.weight"] for n in ("z", "b", "a")]
    qkvz = sd[f"{p}linear_attn.in_proj_qkvz.weight"].reshape(hk, 2 * dk + 2 * per * dv, -1)
    q, k = qkvz[:, :dk], qkvz[:, dk:2 * dk]
    v, z = qkvz[:, 2 * dk:2 * dk + per * dv], qkvz[:, 2 * dk + per * dv:]
    ba = sd[f"{p}linear_attn.in_proj_ba.weight"].reshape(hk, 2 * per, -1)
    return [x.reshape(-1, x.shape[-1]) for x in (q, k, v, z, ba[:, :per], ba[:, per:])]


def _delta(sd: dict, p: str, mixer: Any, index: int) -> dict:
    hk, dk = mixer.num_k_heads, mixer.head_k_dim
    flat = _projections(sd, p, mixer)
    taps = sd[f"{p}linear_attn.conv1d.weight"][:, 0, :]
    keys = hk * dk
    return {(81, index, GLOBAL): flat[3], (82, index, GLOBAL): np.concatenate(flat[2::-1]),
            (83, index, GLOBAL): flat[5], (91, index, GLOBAL): flat[4],
            (84, index, GLOBAL): np.concatenate([taps[2 * keys:], taps[keys:2 * keys],
                                                 taps[:keys]]),
            (86, index, GLOBAL): sd[f"{p}linear_attn.dt_bias"],
            (87, index, GLOBAL): -np.exp(sd[f"{p}linear_attn.A_log"].astype(np.float32)),
            (89, index, GLOBAL): sd[f"{p}linear_attn.norm.weight"],
            (90, index, GLOBAL): sd[f"{p}linear_attn.out_proj.weight"]}


def _attention(sd: dict, p: str, attn: Any, index: int) -> dict:
    heads, hd = attn.config.num_attention_heads, attn.head_dim
    q = sd[f"{p}self_attn.q_proj.weight"].reshape(heads, 2 * hd, -1)
    return {(17, index, GLOBAL): q[:, :hd].reshape(heads * hd, -1),
            (70, index, GLOBAL): q[:, hd:].reshape(heads * hd, -1),
            (18, index, GLOBAL): sd[f"{p}self_attn.k_proj.weight"],
            (19, index, GLOBAL): sd[f"{p}self_attn.v_proj.weight"],
            (20, index, GLOBAL): sd[f"{p}self_attn.o_proj.weight"],
            (25, index, GLOBAL): 1.0 + sd[f"{p}self_attn.q_norm.weight"],
            (26, index, GLOBAL): 1.0 + sd[f"{p}self_attn.k_norm.weight"]}


def _ffn(sd: dict, p: str, mlp: Any, index: int) -> dict:
    if not hasattr(mlp, "gate"):
        return {(role, index, GLOBAL): sd[f"{p}mlp.{n}_proj.weight"]
                for role, n in ((32, "gate"), (33, "up"), (34, "down"))}
    out = {(40, index, GLOBAL): sd[f"{p}mlp.gate.weight"],
           (41, index, GLOBAL): sd[f"{p}mlp.shared_expert.gate_proj.weight"],
           (42, index, GLOBAL): sd[f"{p}mlp.shared_expert.up_proj.weight"],
           (43, index, GLOBAL): sd[f"{p}mlp.shared_expert.down_proj.weight"],
           (44, index, GLOBAL): sd[f"{p}mlp.shared_expert_gate.weight"]}
    gate_up, down = sd[f"{p}mlp.experts.gate_up_proj"], sd[f"{p}mlp.experts.down_proj"]
    out |= fused_experts(gate_up, down, index)
    return out


def qwen3_next_tensors(sd: dict, model: Any) -> dict:
    """Qwen3-Next's image tensors."""
    out = global_tensors(sd, model, shift=1.0)
    for i, layer in enumerate(model.model.layers):
        p = f"model.layers.{i}."
        out |= {(16, i, GLOBAL): 1.0 + sd[f"{p}input_layernorm.weight"],
                (27, i, GLOBAL): 1.0 + sd[f"{p}post_attention_layernorm.weight"]}
        if layer.block_type == "linear_attention":
            out |= _delta(sd, p, layer.linear_attn, i)
        else:
            out |= _attention(sd, p, layer.self_attn, i)
        out |= _ffn(sd, p, layer.mlp, i)
    return out
