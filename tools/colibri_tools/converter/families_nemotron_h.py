"""Nemotron-H (model_type nemotron_h, NVIDIA: Nemotron-H, Nemotron-3-Nano): from
its config.json to the image's model record (format 1.14); its tensors:
tensor_map_nemotron.py.

Each of its blocks is one image layer with one part: layers_block_type (or the
older hybrid_override_pattern, M / * / E / -) names them:

- "linear_attention" (M): a Mamba2 mixer (attn_kind 5) and no FFN (ffn_kind 3),
  its time steps floored at time_step_min (ssm_dt_min) as transformers'
  mixer clamps them;
- "full_attention" (*): attention without RoPE (attn_kind 2), no FFN;
- "moe" (E): no operator (attn_kind 9) and a MoE: DeepSeek-V3's sigmoid router
  with its correction bias, groups, renormalisation and routed scaling, and a
  shared expert;
- "mlp" (-): no operator and a dense MLP.

Its MLPs and experts have no gate: relu(up x)^2 (activation 2). Refused: an
activation other than relu2 (mlp_hidden_act) or silu (mamba_hidden_act), biases
(mlp_bias, use_bias, attention_bias), the latent MoE projection (moe_latent_size).
"""

from __future__ import annotations

from ..image.image_spec import (
    ACT_RELU2,
    ATTN_FULL_NOPE,
    ATTN_MAMBA2,
    ATTN_NONE,
    ROUTER_SIGMOID,
    Arch,
    FfnKind,
)
from .family_fields import attention_fields, expert_count
from .hf_config import HFConfig

# block type -> (attn_kind, ffn_kind)
BLOCKS = {"linear_attention": (ATTN_MAMBA2, FfnKind.NONE),
          "full_attention": (ATTN_FULL_NOPE, FfnKind.NONE),
          "moe": (ATTN_NONE, FfnKind.MOE), "mlp": (ATTN_NONE, FfnKind.DENSE)}
PATTERN = {"M": "linear_attention", "*": "full_attention", "E": "moe", "-": "mlp"}


def block_types(c: HFConfig) -> list[str]:
    types = c.raw("layers_block_type")
    pattern = c.raw("hybrid_override_pattern")
    if types is None and isinstance(pattern, str) and all(ch in PATTERN for ch in pattern):
        types = [PATTERN[ch] for ch in pattern]
    if not isinstance(types, list) or not types or any(t not in BLOCKS for t in types):
        raise c.unsupported("layers_block_type", types,
                            f"must list blocks of {' / '.join(BLOCKS)}")
    return types


def nemotron_h_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    return [BLOCKS[t][0] for t in block_types(c)]


def _mamba_fields(c: HFConfig) -> dict:
    heads = c.integer("mamba_num_heads", 128, minimum=1)
    return {"ssm_heads": heads, "ssm_head_dim": c.integer("mamba_head_dim", 64, minimum=1),
            "ssm_state": c.integer("ssm_state_size", 128, minimum=1),
            "ssm_groups": c.integer("n_groups", 8, minimum=1),
            "conv_kernel": c.integer("conv_kernel", 4, minimum=2),
            "ssm_dt_min": c.number("time_step_min", 0.001)}


def _moe_fields(c: HFConfig, kinds: list[int]) -> dict:
    if FfnKind.MOE not in kinds:
        return {}
    c.reject_if("moe_latent_size", lambda v: v is not None,
                "the latent MoE projection is not supported")
    return {"n_experts": expert_count(c, ("n_routed_experts",)),
            "expert_intermediate": c.integer("moe_intermediate_size", minimum=1),
            "top_k": c.integer("num_experts_per_tok", minimum=1),
            "router_score": ROUTER_SIGMOID, "router_norm_topk": int(c.flag("norm_topk_prob", True)),
            "n_group": c.integer("n_group", 1, minimum=1),
            "topk_group": c.integer("topk_group", 1, minimum=1),
            "routed_scaling": c.number("routed_scaling_factor", 1.0),
            "shared_intermediate": c.integer("moe_shared_expert_intermediate_size", 0)}


def _nemotron_h(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    for key in ("mlp_bias", "use_bias", "attention_bias", "mamba_proj_bias"):
        c.reject_if(key, lambda v: v is True, "biases are not supported")
    c.reject_if("mlp_hidden_act", lambda v: v not in (None, "relu2"), "only relu2 is supported")
    c.reject_if("mamba_hidden_act", lambda v: v not in (None, "silu"), "only silu is supported")
    types = block_types(c)  # refused before any tensor
    values = dict(c.values, num_hidden_layers=len(types))
    fields = attention_fields(HFConfig(values, c.path), "head_dim")
    kinds = [BLOCKS[t][1] for t in types]
    fields |= {"activation": ACT_RELU2, "rms_eps": c.number("layer_norm_epsilon", 1e-5),
               "rope_theta": 1e4,
               "dense_intermediate": c.integer("intermediate_size", minimum=1)
               if FfnKind.DENSE in kinds else 0, **_moe_fields(c, kinds)}
    if "linear_attention" in types:
        fields |= _mamba_fields(c)
    return Arch.NEMOTRON_H, fields, kinds


FAMILIES = {"nemotron_h": _nemotron_h}
ATTN_KINDS = {"nemotron_h": nemotron_h_attn_kinds}
