"""Golden values of hf_expect.py for Jamba, read off the Hugging Face modules and
config: Mamba1 layers (attn_kind 8: in_proj's x then z, the taps and bias, x_proj,
the norms of dt, B and C, dt_proj and its bias, A = -exp(A_log), D, out_proj) and
attention layers without RoPE (attn_kind 2); roles and arch ids as docs/format.md's
literal numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hf_expect_common import GLOBAL, f32, fused_experts, global_tensors


def _mixer(layer: Any) -> Any:
    return getattr(layer, "mamba", None)


def jamba_record(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    config, layers = model.config, model.model.layers
    mamba = next(_mixer(layer) for layer in layers if _mixer(layer) is not None)
    attn = next(layer.self_attn for layer in layers if _mixer(layer) is None)
    moe = [layer.feed_forward for layer in layers if hasattr(layer.feed_forward, "router")]
    dense = [layer.feed_forward for layer in layers if not hasattr(layer.feed_forward, "router")]
    return record | {
        "arch": 32, "n_layers": len(layers), "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_key_value_heads, "head_dim": attn.head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": dense[0].gate_proj.out_features if dense else 0,
        "expert_intermediate": moe[0].experts.intermediate_dim if moe else 0,
        "n_experts": moe[0].experts.num_experts if moe else 0, "shared_intermediate": 0,
        "rms_eps": f32(layers[0].input_layernorm.variance_epsilon), "rope_theta": 1e4,
        "attn_bias": 0, "qk_norm": 0, "tie_embeddings": int(bool(config.tie_word_embeddings)),
        "router_score": 0, "top_k": moe[0].router.top_k if moe else 0, "router_norm_topk": 0,
        "shared_gate": 0, "conv_kernel": mamba.conv_kernel_size,
        "ssm_heads": mamba.intermediate_size, "ssm_head_dim": 1,
        "ssm_state": mamba.ssm_state_size, "ssm_groups": 1, "ssm_dt_rank": mamba.time_step_rank,
        "attn_kinds": [8 if _mixer(layer) is not None else 2 for layer in layers],
        "ffn_kinds": [1 if hasattr(layer.feed_forward, "router") else 0 for layer in layers]}


def _mamba(sd: dict, p: str, inner: int, index: int) -> dict:
    m = f"{p}mamba."
    in_proj = sd[m + "in_proj.weight"]
    return {(81, index, GLOBAL): in_proj[inner:], (82, index, GLOBAL): in_proj[:inner],
            (84, index, GLOBAL): sd[m + "conv1d.weight"][:, 0, :],
            (85, index, GLOBAL): sd[m + "conv1d.bias"], (97, index, GLOBAL): sd[m + "x_proj.weight"],
            (98, index, GLOBAL): sd[m + "dt_layernorm.weight"],
            (99, index, GLOBAL): sd[m + "b_layernorm.weight"],
            (100, index, GLOBAL): sd[m + "c_layernorm.weight"],
            (101, index, GLOBAL): sd[m + "dt_proj.weight"], (86, index, GLOBAL): sd[m + "dt_proj.bias"],
            (102, index, GLOBAL): -np.exp(sd[m + "A_log"].astype(np.float32)),
            (88, index, GLOBAL): sd[m + "D"], (90, index, GLOBAL): sd[m + "out_proj.weight"]}


def jamba_tensors(sd: dict, model: Any) -> dict:
    """Jamba's image tensors; the final norm is model.final_layernorm."""
    out = global_tensors(sd, model, norm="model.final_layernorm.weight")
    for i, layer in enumerate(model.model.layers):
        p = f"model.layers.{i}."
        out |= {(16, i, GLOBAL): sd[f"{p}input_layernorm.weight"],
                (27, i, GLOBAL): sd[f"{p}pre_ff_layernorm.weight"]}
        if _mixer(layer) is not None:
            out |= _mamba(sd, p, layer.mamba.intermediate_size, i)
        else:
            out |= {(role, i, GLOBAL): sd[f"{p}self_attn.{n}_proj.weight"]
                    for role, n in ((17, "q"), (18, "k"), (19, "v"), (20, "o"))}
        f = f"{p}feed_forward."
        if not hasattr(layer.feed_forward, "router"):
            out |= {(role, i, GLOBAL): sd[f"{f}{n}_proj.weight"]
                    for role, n in ((32, "gate"), (33, "up"), (34, "down"))}
            continue
        out[(40, i, GLOBAL)] = sd[f + "router.weight"]
        gate_up, down = sd[f + "experts.gate_up_proj"], sd[f + "experts.down_proj"]
        out |= fused_experts(gate_up, down, i)
    return out
