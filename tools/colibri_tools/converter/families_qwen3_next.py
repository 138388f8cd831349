"""Qwen3-Next (model_type qwen3_next) and the text model of Qwen3.5-MoE
(qwen3_5_moe_text): from the config.json to the image's model record (format
1.14); their tensors: tensor_map_gated_delta.py.

- layer_types: "linear_attention" layers, whose operator is a gated delta
  rule layer (attn_kind 6, ATTN_GATED_DELTA: the extension's ssm_heads =
  linear_num_value_heads of ssm_head_dim = linear_value_head_dim, ssm_groups
  = linear_num_key_heads of ssm_state = linear_key_head_dim, conv_kernel =
  linear_conv_kernel_dim), and "full_attention" layers: GQA with per-head q/k
  norms before partial RoPE and the output's sigmoid gate (attn_bias bit 8),
  its rows interleaved with the queries' in q_proj.
- Qwen2-MoE's FFN: the softmax router (norm_topk_prob), the shared expert
  with its sigmoid gate, dense layers by decoder_sparse_step / mlp_only_layers.
- Its RMSNorms scale by 1 + weight (zero-centred weights): the converter
  stores 1 + weight, computed in float32 as transformers does.
- Qwen3.5-MoE's text model: the same layers (its gated delta projections
  stored apart), every layer MoE, the router's k weights always renormalised;
  its multimodal RoPE turns text positions as plain RoPE does.
- Refused: attention biases, an activation other than SiLU.
"""

from __future__ import annotations

from ..image.image_spec import ATTN_FULL, ATTN_GATED_DELTA, BIAS_ATTN_GATE, Arch, FfnKind
from .family_fields import attention_fields, qwen_ffn_kinds, rope_fields, routing_fields
from .hf_config import HFConfig

LAYER_TYPES = {"linear_attention": ATTN_GATED_DELTA, "full_attention": ATTN_FULL}


def qwen3_next_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    types = c.raw("layer_types")
    if types is None:  # transformers' default: every fourth layer full attention
        types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                 for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in LAYER_TYPES for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of "
                            f"{' / '.join(LAYER_TYPES)}")
    return [LAYER_TYPES[t] for t in types]


def _delta_fields(c: HFConfig) -> dict:
    value_heads = c.integer("linear_num_value_heads", 32, minimum=1)
    key_heads = c.integer("linear_num_key_heads", 16, minimum=1)
    if value_heads % key_heads:
        raise c.unsupported("linear_num_value_heads", value_heads,
                            f"must be a multiple of linear_num_key_heads ({key_heads})")
    return {"ssm_heads": value_heads, "ssm_groups": key_heads,
            "ssm_head_dim": c.integer("linear_value_head_dim", 128, minimum=1),
            "ssm_state": c.integer("linear_key_head_dim", 128, minimum=1),
            "conv_kernel": c.integer("linear_conv_kernel_dim", 4, minimum=2)}


def _hybrid_fields(c: HFConfig, kinds: list[int], n_experts: int, norm: bool) -> dict:
    """What both families derive alike, for their layer kinds."""
    fields = attention_fields(c, "head_dim")
    moe = FfnKind.MOE in kinds
    fields |= routing_fields(c, kinds, n_experts,
                             c.integer("moe_intermediate_size", minimum=1) if moe else 0, norm)
    shared = c.integer("shared_expert_intermediate_size", 0) if moe else 0
    fields |= {"dense_intermediate": c.integer("intermediate_size", minimum=1)
               if FfnKind.DENSE in kinds else 0,
               "shared_intermediate": shared, "shared_gate": int(shared > 0),
               "attn_bias": BIAS_ATTN_GATE, "qk_norm": 2,
               "rms_eps": c.number("rms_norm_eps", 1e-6),
               **rope_fields(c, fields["head_dim"], 1e4, partial=True)}
    if ATTN_GATED_DELTA in qwen3_next_attn_kinds(c, fields["n_layers"]):
        fields |= _delta_fields(c)
    return fields


def _checked(c: HFConfig) -> int:
    """The layer count, after the refusals both families share (before any tensor)."""
    c.reject_if("attention_bias", lambda v: v is True, "attention biases are not supported")
    c.reject_if("hidden_act", lambda v: v not in (None, "silu"), "only silu is supported")
    n_layers = c.integer("num_hidden_layers", minimum=1)
    qwen3_next_attn_kinds(c, n_layers)
    return n_layers


def _qwen3_next(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    n_layers = _checked(c)
    _, n_experts = c.first_integer(("num_experts",))
    kinds = qwen_ffn_kinds(c, n_layers, n_experts)
    return Arch.QWEN3_NEXT, _hybrid_fields(c, kinds, n_experts, c.flag("norm_topk_prob", True)), kinds


def _qwen3_5_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    kinds = [FfnKind.MOE] * _checked(c)
    n_experts = c.integer("num_experts", 256, minimum=1)
    return Arch.QWEN3_5_MOE, _hybrid_fields(c, kinds, n_experts, True), kinds


FAMILIES = {"qwen3_next": _qwen3_next, "qwen3_5_moe_text": _qwen3_5_moe}
ATTN_KINDS = {"qwen3_next": qwen3_next_attn_kinds, "qwen3_5_moe_text": qwen3_next_attn_kinds}
