"""Golden values of hf_expect.py for Nemotron-H, read off the Hugging Face modules
and config: one image layer per block (Mamba2: attn_kind 5, ffn_kind 3; attention
without RoPE: 2 and 3; MoE: 9 and 1; MLP: 9 and 0), relu^2 MLPs and experts without
gates (activation 2), the Mamba2 time steps' floor; roles and arch ids as
docs/format.md's literal numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hf_expect_common import GLOBAL, f32, global_tensors

KINDS = {"linear_attention": (5, 3), "full_attention": (2, 3), "moe": (9, 1), "mlp": (9, 0)}


def nemotron_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    config, layers = model.config, model.model.layers
    types = [layer.block_type for layer in layers]
    mamba = next((layer.mixer for layer in layers if layer.block_type == "linear_attention"), None)
    attn = next(layer.mixer for layer in layers if layer.block_type == "full_attention")
    moe = next((layer.mixer for layer in layers if layer.block_type == "moe"), None)
    mlp = next((layer.mixer for layer in layers if layer.block_type == "mlp"), None)
    return record | {
        "arch": 33, "n_layers": len(layers), "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_key_value_heads, "head_dim": attn.head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": mlp.intermediate_size if mlp else 0,
        "expert_intermediate": moe.experts.intermediate_dim if moe else 0,
        "n_experts": moe.experts.num_experts if moe else 0,
        "shared_intermediate": moe.shared_experts.intermediate_size if moe else 0,
        "rms_eps": f32(layers[0].norm.variance_epsilon), "rope_theta": 1e4, "attn_bias": 0,
        "qk_norm": 0, "tie_embeddings": int(bool(config.tie_word_embeddings)),
        "router_score": 1 if moe else 0, "top_k": moe.gate.top_k if moe else 0,
        "router_norm_topk": int(moe.gate.norm_topk_prob) if moe else 0,
        "routed_scaling": f32(moe.gate.routed_scaling_factor) if moe else 1.0,
        "n_group": moe.gate.num_group if moe else 1, "topk_group": moe.gate.topk_group if moe else 1,
        "shared_gate": 0, "activation": 2,
        "conv_kernel": mamba.conv_kernel_size if mamba else 0,
        "ssm_heads": mamba.num_heads if mamba else 0, "ssm_head_dim": mamba.head_dim if mamba else 0,
        "ssm_state": mamba.ssm_state_size if mamba else 0,
        "ssm_groups": mamba.n_groups if mamba else 0,
        "ssm_dt_min": f32(mamba.time_step_limit[0]) if mamba else 0.0,
        "attn_kinds": [KINDS[t][0] for t in types], "ffn_kinds": [KINDS[t][1] for t in types]}


def _mamba(sd: dict, p: str, mixer: Any, index: int) -> dict:
    inner, channels = mixer.intermediate_size, mixer.conv_dim
    in_proj = sd[f"{p}mixer.in_proj.weight"]
    return {(81, index, GLOBAL): in_proj[:inner],
            (82, index, GLOBAL): in_proj[inner:inner + channels],
            (83, index, GLOBAL): in_proj[inner + channels:],
            (84, index, GLOBAL): sd[f"{p}mixer.conv1d.weight"][:, 0, :],
            (85, index, GLOBAL): sd[f"{p}mixer.conv1d.bias"],
            (86, index, GLOBAL): sd[f"{p}mixer.dt_bias"],
            (87, index, GLOBAL): -np.exp(sd[f"{p}mixer.A_log"].astype(np.float32)),
            (88, index, GLOBAL): sd[f"{p}mixer.D"], (89, index, GLOBAL): sd[f"{p}mixer.norm.weight"],
            (90, index, GLOBAL): sd[f"{p}mixer.out_proj.weight"]}


def _moe(sd: dict, p: str, index: int) -> dict:
    m = f"{p}mixer."
    out = {(40, index, GLOBAL): sd[m + "gate.weight"],
           (45, index, GLOBAL): sd[m + "gate.e_score_correction_bias"],
           (42, index, GLOBAL): sd[m + "shared_experts.up_proj.weight"],
           (43, index, GLOBAL): sd[m + "shared_experts.down_proj.weight"]}
    up, down = sd[m + "experts.up_proj"], sd[m + "experts.down_proj"]
    for e in range(up.shape[0]):
        out |= {(49, index, e): up[e], (50, index, e): down[e]}
    return out


def nemotron_tensors(sd: dict, model: Any) -> dict:
    """Nemotron-H's image tensors: a block's norm is its layer's ATTN_NORM or FFN_NORM."""
    out = global_tensors(sd, model, embed="model.embeddings.weight", norm="model.norm_f.weight")
    for i, layer in enumerate(model.model.layers):
        p, kind = f"model.layers.{i}.", layer.block_type
        norm = 16 if kind in ("linear_attention", "full_attention") else 27
        out[(norm, i, GLOBAL)] = sd[f"{p}norm.weight"]
        if kind == "linear_attention":
            out |= _mamba(sd, p, layer.mixer, i)
        elif kind == "full_attention":
            out |= {(role, i, GLOBAL): sd[f"{p}mixer.{n}_proj.weight"]
                    for role, n in ((17, "q"), (18, "k"), (19, "v"), (20, "o"))}
        elif kind == "moe":
            out |= _moe(sd, p, i)
        else:
            out |= {(33, i, GLOBAL): sd[f"{p}mixer.up_proj.weight"],
                    (34, i, GLOBAL): sd[f"{p}mixer.down_proj.weight"]}
    return out
