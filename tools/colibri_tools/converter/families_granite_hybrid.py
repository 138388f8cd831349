"""Granite-4.0-H (model_type granitemoehybrid): from its config.json to the
image's model record (format 1.14); its Mamba2 tensors: tensor_map_mamba2.py.

- layer_types: "linear_attention" (or "mamba", the name of Granite's own
  configs) layers, whose operator is a Mamba2 mixer (attn_kind 5, ATTN_MAMBA2,
  with the record extension's ssm_* sizes and conv_kernel = mamba_d_conv), and
  "full_attention" (or "attention") layers: GQA scaled by attention_multiplier,
  with RoPE when position_embedding_type is "rope", else none (attn_kind 2).
- Every layer's FFN is GraniteMoeShared's: top-k of the router logits then a
  softmax over the k, plus the shared MLP; Granite's four multipliers.
- Refused: biases on the Mamba projections (mamba_proj_bias), a time-step
  clamp other than (0, inf) (time_step_limit: transformers applies it to a
  prompt but not to a decoded token), an activation other than SiLU, and a
  model without experts.
"""

from __future__ import annotations

import math

from ..image.image_spec import ATTN_FULL, ATTN_FULL_NOPE, ATTN_MAMBA2, ROUTER_TOPK_SOFTMAX, Arch, FfnKind
from .family_fields import attention_fields, expert_count, granite_scales, rope_theta
from .hf_config import HFConfig

MAMBA_TYPES = ("linear_attention", "mamba")
ATTENTION_TYPES = ("full_attention", "attention")


def _attention_kind(c: HFConfig) -> int:
    position = c.raw("position_embedding_type")
    if position not in (None, "nope", "rope"):
        raise c.unsupported("position_embedding_type", position, "must be rope, nope or null")
    return ATTN_FULL if position == "rope" else ATTN_FULL_NOPE


def granite_hybrid_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    types = c.raw("layer_types")
    if types is None:  # transformers' default: every layer Mamba2
        types = [MAMBA_TYPES[0]] * n_layers
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in MAMBA_TYPES + ATTENTION_TYPES for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of "
                            f"{' / '.join(MAMBA_TYPES + ATTENTION_TYPES)}")
    attention = _attention_kind(c)
    return [ATTN_MAMBA2 if t in MAMBA_TYPES else attention for t in types]


def _infinite(value: object) -> bool:
    """+inf as json.load gives it, or as transformers writes it ({"__float__": "Infinity"})."""
    if isinstance(value, dict):
        return value.get("__float__") == "Infinity"
    return isinstance(value, (int, float)) and math.isinf(value) and value > 0


def _time_step_limit_default(value: object) -> bool:
    return value is None or (isinstance(value, list) and len(value) == 2 and
                             value[0] in (0, 0.0) and _infinite(value[1]))


def _ssm_fields(c: HFConfig, hidden: int) -> dict:
    """The extension's Mamba2 sizes: heads of head_dim (mamba_d_head, "auto":
    mamba_expand * hidden_size / heads), d_state, groups; conv_kernel."""
    heads = c.integer("mamba_n_heads", 128, minimum=1)
    inner = c.integer("mamba_expand", 2, minimum=1) * hidden
    head_dim = c.raw("mamba_d_head")
    head_dim = inner // heads if head_dim in (None, "auto") else c.integer("mamba_d_head", minimum=1)
    if head_dim * heads != inner:
        raise c.unsupported("mamba_d_head", head_dim, f"times mamba_n_heads ({heads}) must be "
                            f"mamba_expand * hidden_size ({inner})")
    return {"ssm_heads": heads, "ssm_head_dim": head_dim,
            "ssm_state": c.integer("mamba_d_state", 256, minimum=1),
            "ssm_groups": c.integer("mamba_n_groups", 1, minimum=1),
            "conv_kernel": c.integer("mamba_d_conv", 4, minimum=2)}


def _granitemoehybrid(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    c.reject_if("attention_bias", bool, "attention biases are not supported for granitemoehybrid")
    c.reject_if("mamba_proj_bias", lambda v: v is True,
                "biases on the Mamba2 input and output projections are not supported")
    c.reject_if("time_step_limit", lambda v: not _time_step_limit_default(v),
                "only (0, inf) is supported: transformers clamps a prompt's time steps but "
                "not a decoded token's")
    c.reject_if("hidden_act", lambda v: v not in (None, "silu"), "only silu is supported")
    fields = attention_fields(c, "head_dim")
    n_layers = fields["n_layers"]
    mamba = ATTN_MAMBA2 in granite_hybrid_attn_kinds(c, n_layers)  # refused before any tensor
    kinds = [FfnKind.MOE] * n_layers
    fields |= {"n_experts": expert_count(c, ("num_local_experts",)),
               "expert_intermediate": c.integer("intermediate_size", minimum=1),
               "top_k": c.integer("num_experts_per_tok", minimum=1),
               "router_score": ROUTER_TOPK_SOFTMAX, "router_norm_topk": 0,
               "shared_intermediate": c.integer("shared_intermediate_size", 1024, minimum=1),
               "rope_theta": rope_theta(c, 1e4), "rms_eps": c.number("rms_norm_eps", 1e-6),
               **granite_scales(c)}
    if mamba:
        fields |= _ssm_fields(c, fields["hidden_size"])
    return Arch.GRANITEMOE_HYBRID, fields, kinds


FAMILIES = {"granitemoehybrid": _granitemoehybrid}
ATTN_KINDS = {"granitemoehybrid": granite_hybrid_attn_kinds}
