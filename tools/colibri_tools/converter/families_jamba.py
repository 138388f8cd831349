"""Jamba (model_type jamba, AI21): from its config.json to the image's model
record (format 1.14); its tensors: tensor_map_mamba2.py.

- Layer i attends (full attention without RoPE, attn_kind 2) when i %
  attn_layer_period == attn_layer_offset; the others are Mamba (v1) layers
  (attn_kind 8: the extension's ssm_heads = mamba_expand * hidden_size channels,
  a head each, ssm_state = mamba_d_state, one group, ssm_dt_rank =
  mamba_dt_rank ("auto": ceil(hidden_size / 16)), conv_kernel = mamba_d_conv;
  the norms of dt, B and C are Jamba's).
- Layer i is MoE when i % expert_layer_period == expert_layer_offset (and
  num_experts > 1): a softmax over the experts, top-k, not renormalised; the
  others a SwiGLU MLP of intermediate_size.
- Refused: biases on the Mamba projections (mamba_proj_bias), an activation other
  than SiLU.
"""

from __future__ import annotations

import math

from ..image.image_spec import ATTN_FULL_NOPE, ATTN_MAMBA1, ROUTER_SOFTMAX, Arch, FfnKind
from .family_fields import attention_fields, rope_theta
from .hf_config import HFConfig


def _period(c: HFConfig, period_key: str, offset_key: str, period: int, offset: int
            ) -> tuple[int, int]:
    p = c.integer(period_key, period, minimum=1)
    o = c.integer(offset_key, offset)
    if o >= p:
        raise c.unsupported(offset_key, o, f"must be below {period_key} ({p})")
    return p, o


def jamba_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    period, offset = _period(c, "attn_layer_period", "attn_layer_offset", 8, 4)
    return [ATTN_FULL_NOPE if i % period == offset else ATTN_MAMBA1 for i in range(n_layers)]


def _jamba(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    c.reject_if("mamba_proj_bias", lambda v: v is True,
                "biases on the Mamba input and output projections are not supported")
    c.reject_if("hidden_act", lambda v: v not in (None, "silu"), "only silu is supported")
    fields = attention_fields(c, None)
    n_layers, hidden = fields["n_layers"], fields["hidden_size"]
    attn = jamba_attn_kinds(c, n_layers)  # refused before any tensor
    period, offset = _period(c, "expert_layer_period", "expert_layer_offset", 2, 1)
    n_experts = c.integer("num_experts", 16, minimum=1)
    kinds = [FfnKind.MOE if n_experts > 1 and i % period == offset else FfnKind.DENSE
             for i in range(n_layers)]
    width = c.integer("intermediate_size", minimum=1)
    moe = FfnKind.MOE in kinds
    fields |= {"dense_intermediate": width if FfnKind.DENSE in kinds else 0,
               "expert_intermediate": width if moe else 0, "n_experts": n_experts if moe else 0,
               "top_k": c.integer("num_experts_per_tok", 2, minimum=1) if moe else 0,
               "router_score": ROUTER_SOFTMAX, "router_norm_topk": 0,
               "rope_theta": rope_theta(c, 1e4), "rms_eps": c.number("rms_norm_eps", 1e-6)}
    if ATTN_MAMBA1 in attn:
        rank = c.raw("mamba_dt_rank")
        rank = math.ceil(hidden / 16) if rank in (None, "auto") else \
            c.integer("mamba_dt_rank", minimum=1)
        fields |= {"ssm_heads": c.integer("mamba_expand", 2, minimum=1) * hidden,
                   "ssm_head_dim": 1, "ssm_groups": 1, "ssm_dt_rank": rank,
                   "ssm_state": c.integer("mamba_d_state", 16, minimum=1),
                   "conv_kernel": c.integer("mamba_d_conv", 4, minimum=2)}
    return Arch.JAMBA, fields, kinds


FAMILIES = {"jamba": _jamba}
ATTN_KINDS = {"jamba": jamba_attn_kinds}
