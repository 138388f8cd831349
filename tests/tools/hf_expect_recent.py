"""Golden values of hf_expect.py for the families whose modules differ most from
the Llama layout: DBRX (transformer.blocks, fused Wqkv and experts, nested config)
and AFMoE (four norms a layer, the gated attention output). Read off the Hugging
Face modules and config; roles and arch ids as docs/format.md's literal numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hf_expect_common import f32

GLOBAL = 0xFFFF


def afmoe_fields(model: Any, family: str) -> dict[str, Any]:
    """AFMoE: norms before and after each sublayer (norm_kind 3) and the sigmoid gate
    on the attention output (attn_bias bit 8), both format 1.11; its sigmoid router
    (router_score 1) renormalised, times route_scale; RoPE only on sliding layers
    (the full ones attn_kind 2); muP's embedding scale."""
    if family != "afmoe":
        return {}
    config = model.config
    layers = model.model.layers
    kinds = [1 if layer.self_attn.is_local_attention else 2 for layer in layers]
    out = {"norm_kind": 3, "attn_bias": 0x100, "router_score": 1, "router_norm_topk": 1,
           "routed_scaling": f32(config.route_scale), "attn_kinds": kinds,
           "sliding_window": config.sliding_window if 1 in kinds else 0, "shared_gate": 0}
    if config.mup_enabled:
        out |= {"embedding_scale": f32(config.hidden_size ** 0.5), "residual_scale": 1.0,
                "attention_scale": f32(layers[0].self_attn.scaling), "logits_divisor": 1.0}
    return out


def afmoe_tensors(sd: dict, p: str, layer: int) -> dict:
    """AFMoE's tensors the generic Llama names miss or name otherwise: the FFN's
    norm before it (27), the two norms after (71, 72), the attention gate (70),
    and the router's expert_bias (45)."""
    out = {(27, layer, GLOBAL): sd[p + "pre_mlp_layernorm.weight"],
           (71, layer, GLOBAL): sd[p + "post_attention_layernorm.weight"],
           (72, layer, GLOBAL): sd[p + "post_mlp_layernorm.weight"],
           (70, layer, GLOBAL): sd[p + "self_attn.gate_proj.weight"]}
    if p + "mlp.expert_bias" in sd:
        out[(45, layer, GLOBAL)] = sd[p + "mlp.expert_bias"]
    return out


def dbrx_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    """DBRX: LayerNorm (norm_kind 1, its eps), q/k/v clamped to clip_qkv (format
    1.11), a softmax router, its k weights renormalised when
    moe_normalize_expert_weights is set."""
    config, blocks = model.config, model.transformer.blocks
    attn, ffn = blocks[0].norm_attn_norm.attn, blocks[0].ffn
    return record | {
        "arch": 20, "vocab_size": config.vocab_size, "hidden_size": config.d_model,
        "n_layers": len(blocks), "n_heads": attn.num_heads, "n_kv_heads": attn.num_key_value_heads,
        "head_dim": attn.head_dim, "max_context": config.max_seq_len, "dense_intermediate": 0,
        "expert_intermediate": ffn.experts.ffn_hidden_size, "n_experts": ffn.experts.num_experts,
        "shared_intermediate": 0, "rms_eps": f32(blocks[0].norm_attn_norm.norm_1.eps),
        "rope_theta": f32(config.rope_parameters["rope_theta"]), "attn_bias": 0, "qk_norm": 0,
        "tie_embeddings": 0, "router_score": 0, "top_k": ffn.top_k,
        "router_norm_topk": int(ffn.moe_normalize_expert_weights is not None),
        "shared_gate": 0, "norm_kind": 1, "qkv_clip": f32(attn.clip_qkv or 0.0),
        "attn_kinds": [0] * len(blocks), "ffn_kinds": [1] * len(blocks)}


def dbrx_tensors(sd: dict, model: Any) -> dict:
    """DBRX's image tensors from its modules' parameters: Wqkv's rows split into q,
    k and v, each expert's rows of w1 (gate), v1 (up) and w2 (transposed: down),
    zero LayerNorm biases."""
    config = model.config
    hidden = config.d_model
    zeros = np.zeros(hidden, dtype=np.float32)
    out = {(1, GLOBAL, GLOBAL): sd["transformer.wte.weight"],
           (2, GLOBAL, GLOBAL): sd["transformer.norm_f.weight"],
           (3, GLOBAL, GLOBAL): sd["lm_head.weight"], (4, GLOBAL, GLOBAL): zeros}
    for layer, block in enumerate(model.transformer.blocks):
        p = f"transformer.blocks.{layer}."
        attn = block.norm_attn_norm.attn
        q, k = attn.num_heads * attn.head_dim, attn.num_key_value_heads * attn.head_dim
        qkv = sd[p + "norm_attn_norm.attn.Wqkv.weight"]
        out |= {(16, layer, GLOBAL): sd[p + "norm_attn_norm.norm_1.weight"],
                (17, layer, GLOBAL): qkv[:q], (18, layer, GLOBAL): qkv[q:q + k],
                (19, layer, GLOBAL): qkv[q + k:],
                (20, layer, GLOBAL): sd[p + "norm_attn_norm.attn.out_proj.weight"],
                (27, layer, GLOBAL): sd[p + "norm_attn_norm.norm_2.weight"],
                (28, layer, GLOBAL): zeros, (29, layer, GLOBAL): zeros,
                (40, layer, GLOBAL): sd[p + "ffn.router.layer.weight"]}
        width = block.ffn.experts.ffn_hidden_size
        for e in range(block.ffn.experts.num_experts):
            rows = slice(e * width, (e + 1) * width)
            out |= {(48, layer, e): sd[p + "ffn.experts.mlp.w1"][rows],
                    (49, layer, e): sd[p + "ffn.experts.mlp.v1"][rows],
                    (50, layer, e): sd[p + "ffn.experts.mlp.w2"][rows].T}
    return out


def llama4_fields(model: Any, family: str) -> dict[str, Any]:
    """Llama 4 (text): router_score 5 (top-k logits, sigmoid weights on the experts'
    input), an ungated shared expert; chunked layers with RoPE (attn_kind 3, the
    window the chunk size), full ones without (2) and their attention temperature;
    qk_norm 4 when use_qk_norm (format 1.11 all)."""
    if family != "llama4_text":
        return {}
    config = model.config
    attns = [layer.self_attn for layer in model.model.layers]
    kinds = [(3 if t == "chunked_attention" else 0) if a.use_rope else 2
             for a, t in zip(attns, config.layer_types)]
    tuned = config.attn_temperature_tuning and 2 in kinds
    return {"router_score": 5, "router_norm_topk": 0, "shared_gate": 0,
            "qk_norm": 4 if config.use_qk_norm else 0, "attn_kinds": kinds,
            "sliding_window": config.attention_chunk_size if 3 in kinds else 0,
            "attn_temp_floor": f32(attns[0].floor_scale) if tuned else 0.0,
            "attn_temp_scale": f32(attns[0].attn_scale) if tuned else 0.0}


def llama4_ffn_tensors(sd: dict, p: str, layer: int) -> dict:
    """Llama 4's feed_forward: a dense MLP, or the router, the shared expert and the
    experts' gate_up_proj [E, H, 2I] (x @ W: the first I columns gate, the last up)
    and down_proj [E, I, H], transposed to [out, in]."""
    b = p + "feed_forward."
    if b + "router.weight" not in sd:
        return {(role, layer, GLOBAL): sd[f"{b}{n}_proj.weight"]
                for role, n in ((32, "gate"), (33, "up"), (34, "down"))}
    out = {(40, layer, GLOBAL): sd[b + "router.weight"]}
    out |= {(role, layer, GLOBAL): sd[f"{b}shared_expert.{n}_proj.weight"]
            for role, n in ((41, "gate"), (42, "up"), (43, "down"))}
    gate_up, down = sd[b + "experts.gate_up_proj"], sd[b + "experts.down_proj"]
    inter = gate_up.shape[2] // 2
    for e in range(gate_up.shape[0]):
        out |= {(48, layer, e): gate_up[e][:, :inter].T, (49, layer, e): gate_up[e][:, inter:].T,
                (50, layer, e): down[e].T}
    return out


def jetmoe_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    """JetMoE's record over `record` (the fields every family shares): attention
    experts (attn_bias bit 9) with their output bias (bit 3), the MoE's bias after
    its sum (bit 10), Granite's router (router_score 2), the layers' norm eps
    (transformers' fixed 1e-6)."""
    config, layers = model.config, model.model.layers
    moa = layers[0].self_attention
    return record | {
        "arch": 23, "n_layers": len(layers), "n_heads": moa.num_heads,
        "n_kv_heads": moa.num_key_value_heads, "head_dim": moa.head_dim,
        "max_context": config.max_position_embeddings, "dense_intermediate": 0,
        "expert_intermediate": layers[0].mlp.hidden_size,
        "n_experts": moa.experts.num_experts, "shared_intermediate": 0,
        "rms_eps": f32(layers[0].input_layernorm.variance_epsilon),
        "rope_theta": f32(config.rope_parameters["rope_theta"]),
        "attn_bias": 0x8 | 0x200 | 0x400, "qk_norm": 0,
        "tie_embeddings": int(bool(config.tie_word_embeddings)), "router_score": 2,
        "top_k": moa.experts.top_k, "router_norm_topk": 0, "shared_gate": 0,
        "attn_kinds": [0] * len(layers), "ffn_kinds": [1] * len(layers)}


def jetmoe_tensors(sd: dict, model: Any) -> dict:
    """JetMoE's image tensors: the attention experts' q [E, K, H] and o [E, H, K]
    stacked, kv_proj's k rows then v rows, the routers, the MoE's experts
    (input_linear: gate rows, then up) and the two biases."""
    out = {(1, GLOBAL, GLOBAL): sd["model.embed_tokens.weight"],
           (2, GLOBAL, GLOBAL): sd["model.norm.weight"]}
    if not model.config.tie_word_embeddings:
        out[(3, GLOBAL, GLOBAL)] = sd["lm_head.weight"]
    for layer in range(model.config.num_hidden_layers):
        p, a = f"model.layers.{layer}.", f"model.layers.{layer}.self_attention."
        q, o = sd[a + "experts.input_linear.weight"], sd[a + "experts.output_linear.weight"]
        kv = sd[a + "kv_proj.weight"]
        half = kv.shape[0] // 2
        out |= {(16, layer, GLOBAL): sd[p + "input_layernorm.weight"],
                (17, layer, GLOBAL): q.reshape(-1, q.shape[2]),
                (18, layer, GLOBAL): kv[:half], (19, layer, GLOBAL): kv[half:],
                (73, layer, GLOBAL): sd[a + "experts.router.layer.weight"],
                (20, layer, GLOBAL): o.reshape(-1, o.shape[2]),
                (24, layer, GLOBAL): sd[a + "experts.bias"],
                (27, layer, GLOBAL): sd[p + "post_attention_layernorm.weight"],
                (40, layer, GLOBAL): sd[p + "mlp.router.layer.weight"],
                (74, layer, GLOBAL): sd[p + "mlp.bias"]}
        gate_up, down = sd[p + "mlp.input_linear.weight"], sd[p + "mlp.output_linear.weight"]
        inter = gate_up.shape[1] // 2
        for e in range(gate_up.shape[0]):
            out |= {(48, layer, e): gate_up[e, :inter], (49, layer, e): gate_up[e, inter:],
                    (50, layer, e): down[e]}
    return out
