"""Golden values of hf_expect.py for MiMo-V2-Flash, read off the Hugging Face modules
and config (roles and arch ids as docs/format.md's literal numbers): the image has
the sliding layers' KV head count, each full layer's K and V heads twice, values
scaled and padded to head_dim, -inf sinks on the full layers, and every layer's
RoPE inverse frequencies (the rotary embedding's own buffers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hf_expect_common import f32

GLOBAL = 0xFFFF


def mimo_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    """MiMo-V2-Flash's record over `record` (the fields every family shares)."""
    config, layers = model.config, model.model.layers
    attns = [layer.self_attn for layer in layers]
    kv = max(a.k_proj.out_features // a.head_dim for a in attns)
    moe = next(layer.mlp for layer in layers if hasattr(layer.mlp, "experts"))
    dense = next(layer.mlp for layer in layers if not hasattr(layer.mlp, "experts"))
    sliding = [a.sliding_window is not None for a in attns]
    first_type = sorted(set(config.layer_types))[0]
    biases = [attns[0].q_proj.bias, attns[0].k_proj.bias, attns[0].v_proj.bias]
    rotary = getattr(model.model.rotary_emb, f"{first_type}_inv_freq")
    return record | {
        "arch": 25, "n_layers": len(layers), "n_heads": config.num_attention_heads,
        "n_kv_heads": kv, "head_dim": attns[0].head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": dense.gate_proj.out_features,
        "expert_intermediate": moe.experts.intermediate_dim, "n_experts": moe.experts.num_experts,
        "shared_intermediate": 0, "rms_eps": f32(config.rms_norm_eps),
        "rope_theta": f32(config.rope_parameters[first_type]["rope_theta"]),
        "attn_bias": sum(1 << i for i, b in enumerate(biases) if b is not None)
        | (0x20 if any(sliding) else 0), "qk_norm": 0,
        "tie_embeddings": int(bool(config.tie_word_embeddings)), "router_score": 1,
        "top_k": moe.gate.top_k, "router_norm_topk": int(moe.gate.norm_topk_prob),
        "routed_scaling": f32(moe.gate.routed_scaling_factor), "n_group": moe.gate.num_group,
        "topk_group": moe.gate.topk_group, "shared_gate": 0, "rope_dim": 2 * rotary.shape[0],
        "layer_rope": 1, "sliding_window": config.sliding_window if any(sliding) else 0,
        "attn_kinds": [int(s) for s in sliding],
        "ffn_kinds": [int(hasattr(layer.mlp, "experts")) for layer in layers]}


def _heads(rows: np.ndarray, heads: int, width: int, head_dim: int, copies: int) -> np.ndarray:
    """[heads * width, ...] -> each head padded with zeros to head_dim, stored `copies`
    times in a row."""
    out = []
    for h in range(heads):
        padded = np.zeros((head_dim, *rows.shape[1:]), np.float32)
        padded[:width] = rows[h * width:(h + 1) * width]
        out += [padded] * copies
    return np.concatenate(out)


def _attention(sd: dict, p: str, attn: Any, kv: int, model: Any, layer: int) -> dict:
    hd, vd = attn.head_dim, attn.v_head_dim
    own = attn.k_proj.out_features // hd
    scale = np.float32(attn.v_scale)
    out = {(16, layer, GLOBAL): sd[p + "input_layernorm.weight"],
           (17, layer, GLOBAL): sd[p + "self_attn.q_proj.weight"],
           (18, layer, GLOBAL): _heads(sd[p + "self_attn.k_proj.weight"], own, hd, hd, kv // own),
           (19, layer, GLOBAL): _heads(sd[p + "self_attn.v_proj.weight"] * scale, own, vd, hd,
                                       kv // own),
           (27, layer, GLOBAL): sd[p + "post_attention_layernorm.weight"]}
    o = sd[p + "self_attn.o_proj.weight"]
    out[(20, layer, GLOBAL)] = _heads(o.T, attn.config.num_attention_heads, vd, hd, 1).T
    if p + "self_attn.q_proj.bias" in sd:
        out[(21, layer, GLOBAL)] = sd[p + "self_attn.q_proj.bias"]
        out[(22, layer, GLOBAL)] = _heads(sd[p + "self_attn.k_proj.bias"], own, hd, hd, kv // own)
        out[(23, layer, GLOBAL)] = _heads(sd[p + "self_attn.v_proj.bias"] * scale, own, vd, hd,
                                          kv // own)
    sinks = sd.get(p + "self_attn.sinks")
    if any(a.sliding_window is not None for a in (m.self_attn for m in model.model.layers)):
        out[(30, layer, GLOBAL)] = sinks if sinks is not None else \
            np.full(attn.config.num_attention_heads, -np.inf, np.float32)
    kind = attn.config.layer_types[layer]
    out[(75, layer, GLOBAL)] = getattr(model.model.rotary_emb, f"{kind}_inv_freq").numpy()
    return out


def mimo_tensors(sd: dict, model: Any, ffn_tensors: Any) -> dict:
    """MiMo-V2-Flash's image tensors; `ffn_tensors(sd, prefix, layer)` gives a layer's
    FFN ones (DeepSeek-V3's names, hf_expect.py)."""
    out = {(1, GLOBAL, GLOBAL): sd["model.embed_tokens.weight"],
           (2, GLOBAL, GLOBAL): sd["model.norm.weight"]}
    if not model.config.tie_word_embeddings:
        out[(3, GLOBAL, GLOBAL)] = sd["lm_head.weight"]
    attns = [layer.self_attn for layer in model.model.layers]
    kv = max(a.k_proj.out_features // a.head_dim for a in attns)
    for layer, attn in enumerate(attns):
        p = f"model.layers.{layer}."
        out |= _attention(sd, p, attn, kv, model, layer) | ffn_tensors(sd, p, layer)
    return out
