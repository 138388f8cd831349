"""LFM2-MoE (model_type lfm2_moe, Liquid AI's LFM2-8B-A1B): from its config.json
to the image's model record (format 1.13); its tensors: tensor_map_lfm2.py.

- layer_types: "conv" layers, whose operator is a gated short convolution
  (in_proj's B, C and X thirds, a depthwise causal convolution of B * X over
  conv_L_cache positions, times C, out_proj: attn_kind 4, ATTN_CONV, with the
  record extension's conv_kernel), and "full_attention" layers (GQA with
  per-head q/k RMSNorm before RoPE over the whole head).
- The first num_dense_layers layers have a SwiGLU MLP of intermediate_size,
  the others a MoE: sigmoid router scores, chosen on scores + expert_bias
  (use_expert_bias; without it a bias of zeros chooses alike), the chosen
  scores divided by their sum + 1e-6 (norm_topk_prob; the extension's
  router_sum_eps), times routed_scaling_factor.
- Biases on the convolution and its projections (conv_bias) are refused.
"""

from __future__ import annotations

from ..image.image_spec import ATTN_CONV, ATTN_FULL, ROUTER_SIGMOID, Arch, FfnKind
from .family_fields import attention_fields, expert_count, rope_theta
from .hf_config import HFConfig

LAYER_TYPES = {"conv": ATTN_CONV, "full_attention": ATTN_FULL}
LFM2_DEFAULT_THETA = 1_000_000.0  # Lfm2MoeConfig.default_theta
LFM2_SUM_EPS = 1e-6  # added to the chosen scores' sum before they are divided by it


def lfm2_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    types = c.raw("layer_types")
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in LAYER_TYPES for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of "
                            f"{' / '.join(LAYER_TYPES)} (transformers needs it too)")
    return [LAYER_TYPES[t] for t in types]


def _lfm2_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    c.reject_if("conv_bias", lambda v: v is True,
                "biases on the short convolution and its projections are not supported")
    fields = attention_fields(c, "head_dim")
    n_layers = fields["n_layers"]
    convolutions = ATTN_CONV in lfm2_attn_kinds(c, n_layers)  # refused before any tensor
    dense = c.integer("num_dense_layers", 2)
    kinds = [FfnKind.DENSE if i < dense else FfnKind.MOE for i in range(n_layers)]
    fields |= {"qk_norm": 2, "rms_eps": c.number("norm_eps", 1e-5),
               "rope_theta": rope_theta(c, LFM2_DEFAULT_THETA),
               "tie_embeddings": int(c.flag("tie_word_embeddings", c.flag("tie_embedding", True))),
               "conv_kernel": c.integer("conv_L_cache", 3, minimum=2) if convolutions else 0,
               "dense_intermediate": c.integer("intermediate_size", minimum=1) if dense else 0}
    if FfnKind.MOE not in kinds:
        return Arch.LFM2_MOE, fields, kinds
    norm = c.flag("norm_topk_prob", True)
    fields |= {"n_experts": expert_count(c, ("num_experts",)),
               "expert_intermediate": c.integer("moe_intermediate_size", minimum=1),
               "top_k": c.integer("num_experts_per_tok", minimum=1),
               "router_score": ROUTER_SIGMOID, "router_norm_topk": int(norm),
               "routed_scaling": c.number("routed_scaling_factor", 1.0),
               "router_sum_eps": LFM2_SUM_EPS}
    return Arch.LFM2_MOE, fields, kinds


FAMILIES = {"lfm2_moe": _lfm2_moe}
ATTN_KINDS = {"lfm2_moe": lfm2_attn_kinds}
