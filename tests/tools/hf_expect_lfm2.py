"""Golden values of hf_expect.py for LFM2-MoE, read off the Hugging Face modules
and config: conv layers (attn_kind 4: in_proj's thirds B, C, X, the taps, out_proj)
and full attention layers; roles and arch ids as docs/format.md's literal numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hf_expect_common import f32

GLOBAL = 0xFFFF


def lfm2_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    """LFM2-MoE's record over `record`: the extension's conv_kernel (the conv
    module's kernel size) and the router's 1e-6 (router_sum_eps); the sigmoid
    router (router_score 1) over the routed experts."""
    config, layers = model.config, model.model.layers
    moe = [layer.feed_forward for layer in layers if hasattr(layer.feed_forward, "gate")]
    dense = [layer.feed_forward for layer in layers if not hasattr(layer.feed_forward, "gate")]
    conv = [layer.conv for layer in layers if not layer.is_attention_layer]
    attn = next(layer.self_attn for layer in layers if layer.is_attention_layer)
    gate = moe[0].gate if moe else None
    return record | {
        "arch": 26, "n_layers": len(layers), "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_key_value_heads, "head_dim": attn.head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": dense[0].w1.out_features if dense else 0,
        "expert_intermediate": moe[0].experts.intermediate_dim if moe else 0,
        "n_experts": moe[0].experts.num_experts if moe else 0, "shared_intermediate": 0,
        "rms_eps": f32(layers[0].operator_norm.variance_epsilon),
        "rope_theta": f32(config.rope_parameters["rope_theta"]), "attn_bias": 0, "qk_norm": 2,
        "tie_embeddings": int(bool(config.tie_word_embeddings)),
        "router_score": 1 if moe else 0, "top_k": gate.top_k if moe else 0,
        "router_norm_topk": int(gate.norm_topk_prob) if moe else 0,
        "routed_scaling": f32(gate.routed_scaling_factor) if moe else 1.0, "shared_gate": 0,
        "conv_kernel": conv[0].conv_kernel_size if conv else 0,
        "router_sum_eps": f32(1e-6) if moe else 0.0,
        "attn_kinds": [0 if layer.is_attention_layer else 4 for layer in layers],
        "ffn_kinds": [1 if hasattr(layer.feed_forward, "gate") else 0 for layer in layers]}


def _operator(sd: dict, p: str, layer: Any, index: int) -> dict:
    """An attention layer's projections and q/k norms, or a conv layer's five."""
    if layer.is_attention_layer:
        names = {17: "q_proj", 18: "k_proj", 19: "v_proj", 20: "out_proj",
                 25: "q_layernorm", 26: "k_layernorm"}
        return {(role, index, GLOBAL): sd[f"{p}self_attn.{n}.weight"] for role, n in names.items()}
    h = layer.conv.in_proj.in_features
    in_proj = sd[f"{p}conv.in_proj.weight"]
    return {(76, index, GLOBAL): in_proj[:h], (77, index, GLOBAL): in_proj[h:2 * h],
            (78, index, GLOBAL): in_proj[2 * h:],
            (79, index, GLOBAL): sd[f"{p}conv.conv.weight"][:, 0, :],
            (80, index, GLOBAL): sd[f"{p}conv.out_proj.weight"]}


def _ffn(sd: dict, p: str, ffn: Any, index: int) -> dict:
    """A dense layer's w1 / w3 / w2, or the router, its bias and the experts."""
    if not hasattr(ffn, "gate"):
        return {(role, index, GLOBAL): sd[f"{p}feed_forward.{n}.weight"]
                for role, n in ((32, "w1"), (33, "w3"), (34, "w2"))}
    e_count, inter = ffn.experts.num_experts, ffn.experts.intermediate_dim
    bias = sd.get(f"{p}feed_forward.expert_bias", np.zeros(e_count, np.float32))
    out = {(40, index, GLOBAL): sd[f"{p}feed_forward.gate.weight"], (45, index, GLOBAL): bias}
    gate_up, down = sd[f"{p}feed_forward.experts.gate_up_proj"], sd[
        f"{p}feed_forward.experts.down_proj"]
    for e in range(e_count):
        out |= {(48, index, e): gate_up[e, :inter], (49, index, e): gate_up[e, inter:],
                (50, index, e): down[e]}
    return out


def lfm2_tensors(sd: dict, model: Any) -> dict:
    """LFM2-MoE's image tensors; the final norm is model.embedding_norm."""
    out = {(1, GLOBAL, GLOBAL): sd["model.embed_tokens.weight"],
           (2, GLOBAL, GLOBAL): sd["model.embedding_norm.weight"]}
    if not model.config.tie_word_embeddings:
        out[(3, GLOBAL, GLOBAL)] = sd["lm_head.weight"]
    for i, layer in enumerate(model.model.layers):
        p = f"model.layers.{i}."
        out |= {(16, i, GLOBAL): sd[f"{p}operator_norm.weight"],
                (27, i, GLOBAL): sd[f"{p}ffn_norm.weight"]}
        out |= _operator(sd, p, layer, i) | _ffn(sd, p, layer.feed_forward, i)
    return out
