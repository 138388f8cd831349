"""Golden values of hf_expect.py for LongCat-Flash: each decoder layer is two image
layers (a shortcut layer, then a dense one), read off the Hugging Face modules and
config; roles and arch ids as docs/format.md's literal numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hf_expect_common import f32

GLOBAL = 0xFFFF


def longcat_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    """LongCat-Flash's record over `record` (the fields every family shares):
    MLA with a q LoRA (RoPE over qk_rope_head_dim), the biased softmax router
    (router_score 4) over the routed and the zero-computation experts, not
    renormalised, times routed_scaling_factor; shortcut and dense layers."""
    config, layers = model.config, model.model.layers
    attn, moe = layers[0].self_attn[0], layers[0].mlp
    router = moe.router
    return record | {
        "arch": 24, "n_layers": 2 * len(layers), "n_heads": attn.num_heads,
        "n_kv_heads": attn.num_heads, "head_dim": attn.qk_head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": layers[0].mlps[0].gate_proj.out_features,
        "expert_intermediate": moe.experts.intermediate_size,
        "n_experts": moe.experts.num_routed_experts, "zero_experts": moe.experts.zero_expert_num,
        "shared_intermediate": 0,
        "rms_eps": f32(layers[0].input_layernorm[0].variance_epsilon),
        "rope_theta": f32(config.rope_parameters["rope_theta"]),
        "attn_bias": 0, "qk_norm": 0,  # classifier.bias, if any: forward never adds it
        "tie_embeddings": int(bool(config.tie_word_embeddings)), "router_score": 4,
        "top_k": router.top_k, "router_norm_topk": 0,
        "routed_scaling": f32(router.routed_scaling_factor), "shared_gate": 0,
        "mla": 1, "q_lora_rank": attn.q_lora_rank, "kv_lora_rank": attn.kv_lora_rank,
        "v_head_dim": attn.v_head_dim, "lora_eps": f32(attn.kv_a_layernorm.variance_epsilon),
        "rope_dim": attn.qk_rope_head_dim, "attn_kinds": [0] * (2 * len(layers)),
        "ffn_kinds": [2, 0] * len(layers)}


def _halves(rows: np.ndarray, d: int) -> np.ndarray:
    """RoPE rows on pairs (2i, 2i + 1) as the image's pairs (i, i + d/2)."""
    return rows.reshape(d // 2, 2, -1).transpose(1, 0, 2).reshape(rows.shape)


def _attention(sd: dict, p: str, attn: Any, hidden: int, layer: int) -> dict:
    """One MLA: the LoRA scales sqrt(hidden / rank) in q_b and the latent's norm,
    each q head's RoPE rows and the RoPE key's as halves."""
    d, hd = attn.qk_rope_head_dim, attn.qk_head_dim
    q_b = sd[p + "q_b_proj.weight"] * np.float32(math.sqrt(hidden / attn.q_lora_rank))
    for h in range(attn.num_heads):
        q_b[h * hd + hd - d:(h + 1) * hd] = _halves(q_b[h * hd + hd - d:(h + 1) * hd], d)
    kv_a = sd[p + "kv_a_proj_with_mqa.weight"].copy()
    kv_a[attn.kv_lora_rank:] = _halves(kv_a[attn.kv_lora_rank:], d)
    kv_norm = sd[p + "kv_a_layernorm.weight"] * np.float32(math.sqrt(hidden / attn.kv_lora_rank))
    return {(64, layer, GLOBAL): sd[p + "q_a_proj.weight"],
            (65, layer, GLOBAL): sd[p + "q_a_layernorm.weight"], (66, layer, GLOBAL): q_b,
            (67, layer, GLOBAL): kv_a, (68, layer, GLOBAL): kv_norm,
            (69, layer, GLOBAL): sd[p + "kv_b_proj.weight"],
            (20, layer, GLOBAL): sd[p + "o_proj.weight"]}


def _moe(sd: dict, p: str, experts: Any, layer: int) -> dict:
    """The MoE of shortcut layer `layer`: its router over all the experts, the
    selection bias, and the routed experts only."""
    out = {(40, layer, GLOBAL): sd[p + "router.classifier.weight"],
           (45, layer, GLOBAL): sd[p + "router.e_score_correction_bias"]}
    gate_up, down = sd[p + "experts.gate_up_proj"], sd[p + "experts.down_proj"]
    inter = experts.intermediate_size
    for e in range(experts.num_routed_experts):
        out |= {(48, layer, e): gate_up[e, :inter], (49, layer, e): gate_up[e, inter:],
                (50, layer, e): down[e]}
    return out


def longcat_tensors(sd: dict, model: Any) -> dict:
    """LongCat-Flash's image tensors, decoder layer i's halves j as image layer 2i + j."""
    out = {(1, GLOBAL, GLOBAL): sd["model.embed_tokens.weight"],
           (2, GLOBAL, GLOBAL): sd["model.norm.weight"]}
    if not model.config.tie_word_embeddings:
        out[(3, GLOBAL, GLOBAL)] = sd["lm_head.weight"]
    hidden = model.config.hidden_size
    for i, block in enumerate(model.model.layers):
        p = f"model.layers.{i}."
        for j in (0, 1):
            layer = 2 * i + j
            out |= _attention(sd, f"{p}self_attn.{j}.", block.self_attn[j], hidden, layer)
            out |= {(16, layer, GLOBAL): sd[f"{p}input_layernorm.{j}.weight"],
                    (27, layer, GLOBAL): sd[f"{p}post_attention_layernorm.{j}.weight"]}
            out |= {(role, layer, GLOBAL): sd[f"{p}mlps.{j}.{n}_proj.weight"]
                    for role, n in ((32, "gate"), (33, "up"), (34, "down"))}
        out |= _moe(sd, p + "mlp.", block.mlp.experts, 2 * i)
    return out
