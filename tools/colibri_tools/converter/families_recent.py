"""The 2025-26 MoE families (issue 29): from a config.json to the image's model
record, as families.py does for the earlier ones (which lists them all).

Facts follow transformers 5.24 (models/{flex_olmo,hunyuan_v1_moe,glm4_moe_lite,
minimax_m2,exaone_moe}):

- flex_olmo: OLMoE's attention and router (q/k norms of num_heads * head_dim and
  num_kv_heads * head_dim), OLMo-2's norms: post_attention_layernorm on the
  attention's output and post_feedforward_layernorm on the MoE's, each before its
  residual add (norm_kind 2, format 1.10).
- hunyuan_v1_moe: query_layernorm / key_layernorm per head after RoPE (qk_norm 3,
  format 1.10); router mlp.gate.wg, softmax top moe_topk always renormalised;
  shared_mlp (ungated) and experts both of intermediate_size; num_experts / moe_topk
  may be per-layer lists of one value; RoPE default or NTK alpha ("dynamic" with
  alpha: the base times alpha ** (head_dim / (head_dim - 2))).
- glm4_moe_lite (GLM-4.7-Flash): DeepSeek-V3's MLA (RoPE interleaved when
  rope_interleave) and router, its dense and sparse layers from mlp_layer_types;
  multi-token-prediction layers past the last one are skipped.
- minimax_m2: q/k norms over the whole projections, partial RoPE (rotary_dim, as its
  checkpoints write it, or partial_rotary_factor), the sigmoid router with its
  correction bias (mlp.e_score_correction_bias) and no groups.
- exaone_moe: per-head q/k norm before RoPE; layer_types (or sliding_window_pattern)
  give sliding layers, which turn q and k, and global ones, which do not when a
  sliding_window is set (attn_kind 2, format 1.10); DeepSeek-V3's router
  (num_experts, num_shared_experts), dense layers by mlp_layer_types or
  first_k_dense_replace.
"""

from __future__ import annotations

from ..image.image_spec import (
    ATTN_FULL,
    ATTN_FULL_NOPE,
    ATTN_SLIDING,
    NORM_RMS_POST,
    ROUTER_SIGMOID,
    Arch,
    FfnKind,
)
from .family_fields import (
    ALL_BIASES,
    MAX_CONTEXT_CAP,
    attention_fields,
    attention_layer_kinds,
    expert_count,
    mla_fields,
    mlp_layer_kinds,
    rope_fields,
    rope_parameters,
    rope_theta,
    routing_fields,
    sigmoid_router,
)
from .hf_config import HFConfig


def _flex_olmo(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """FlexOlmo: OLMoE's attention (RMSNorm over the whole q and k projections) and
    router, with OLMo-2's norms: each sublayer reads the residual stream and its
    output is normed before the add (norm_kind 2, format 1.10)."""
    c.reject_if("clip_qkv", lambda v: v is not None, "clipping q, k and v is not supported")
    fields = attention_fields(c, "head_dim")
    kinds = [FfnKind.MOE] * fields["n_layers"]
    n_experts = expert_count(c, ("num_experts", "num_local_experts"))
    fields |= routing_fields(c, kinds, n_experts, c.integer("intermediate_size", minimum=1),
                             c.flag("norm_topk_prob", False))
    fields |= {"attn_bias": ALL_BIASES if c.flag("attention_bias", False) else 0, "qk_norm": 1,
               "norm_kind": NORM_RMS_POST, "rope_theta": rope_theta(c, 1e4),
               "rms_eps": c.number("rms_norm_eps", 1e-6)}
    return Arch.FLEX_OLMO, fields, kinds


def _same_per_layer(c: HFConfig, key: str, n_layers: int) -> int:
    """An integer, or a per-layer list of one value (Hunyuan's num_experts and
    moe_topk may be lists); lists that differ are refused."""
    value = c.raw(key)
    if isinstance(value, list):
        if len(value) != n_layers or any(v != value[0] for v in value):
            raise c.unsupported(key, value, "per-layer values that differ are not supported")
        c = HFConfig({key: value[0]}, c.path)
    return c.integer(key, minimum=1)


def _hunyuan_rope_theta(c: HFConfig, head_dim: int) -> float:
    """Default RoPE, or Hunyuan's NTK alpha ("dynamic" with an alpha): a fixed
    base of rope_theta * alpha ** (head_dim / (head_dim - 2))."""
    params = rope_parameters(c)
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "dynamic" and params.get("alpha") is not None:
        theta, alpha = params.get("rope_theta", c.raw("rope_theta")), params["alpha"]
        p = HFConfig({"rope_theta": theta, "alpha": alpha}, c.path)
        if p.number("alpha") <= 1.0:
            raise c.unsupported("rope_parameters.alpha", alpha, "must be > 1")
        return p.number("rope_theta") * p.number("alpha") ** (head_dim / (head_dim - 2))
    return rope_theta(c, 1e4)


def _hunyuan_v1_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """Hunyuan-MoE: per-head q/k RMSNorm after RoPE (qk_norm 3, format 1.10),
    a softmax top-k router always renormalised, an ungated shared MLP beside
    the routed experts, both of width intermediate_size; every layer MoE."""
    fields = attention_fields(c, "head_dim")
    n = fields["n_layers"]
    kinds = [FfnKind.MOE] * n
    width = c.integer("intermediate_size", minimum=1)
    n_experts = _same_per_layer(c, "num_experts", n)
    fields |= {"n_experts": n_experts, "expert_intermediate": width,
               "top_k": _same_per_layer(c, "moe_topk", n), "router_norm_topk": 1,
               "shared_intermediate": width, "shared_gate": 0,
               "attn_bias": ALL_BIASES if c.flag("attention_bias", False) else 0, "qk_norm": 3,
               "rope_theta": _hunyuan_rope_theta(c, fields["head_dim"]),
               "rms_eps": c.number("rms_norm_eps", 1e-5)}
    return Arch.HUNYUAN_V1_MOE, fields, kinds


def _glm4_moe_lite(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """GLM-4.7-Flash: DeepSeek-V3's Multi-head Latent Attention and GLM-4.5's
    router (DeepSeek-V3's rule), dense and sparse layers as mlp_layer_types
    lists them (its default: the first dense, the rest sparse)."""
    fields = attention_fields(c, None)
    n = fields["n_layers"]
    types = c.raw("mlp_layer_types")
    kinds = mlp_layer_kinds(c, ["dense"] + ["sparse"] * (n - 1) if types is None else types, n)
    fields |= sigmoid_router(c, kinds, True)
    fields |= {"rms_eps": c.number("rms_norm_eps", 1e-5), **mla_fields(c, fields)}
    return Arch.GLM4_MOE_LITE, fields, kinds


def _minimax_m2(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """MiniMax-M2: RMSNorm over the whole q and k projections (qk_norm 1, its
    qk_norm_type per_layer), partial RoPE over rotary_dim (or
    partial_rotary_factor), DeepSeek-V3's sigmoid router without groups or
    scaling (e_score_correction_bias for the choice, the chosen sigmoid scores
    renormalised), Mixtral's experts on every layer."""
    c.reject_if("scoring_func", lambda v: v not in (None, "sigmoid"), "only sigmoid scores")
    c.reject_if("qk_norm_type", lambda v: v not in (None, "per_layer"),
                "only per_layer (over the whole projection)")
    fields = attention_fields(c, "head_dim")
    kinds = [FfnKind.MOE] * fields["n_layers"]
    n_experts = expert_count(c, ("num_local_experts", "num_experts"))
    fields |= routing_fields(c, kinds, n_experts, c.integer("intermediate_size", minimum=1), True)
    head_dim = fields["head_dim"]
    if c.raw("rotary_dim") is None:
        rope = rope_fields(c, head_dim, 5e6, partial=True)
    else:
        rotary = c.integer("rotary_dim", minimum=2)
        if rotary > head_dim:
            raise c.unsupported("rotary_dim", rotary, f"must be <= head_dim ({head_dim})")
        rope = rope_fields(c, head_dim, 5e6, rope_dim=rotary)
    fields |= {"router_score": ROUTER_SIGMOID, "qk_norm": 1,
               "rms_eps": c.number("rms_norm_eps", 1e-6), **rope}
    return Arch.MINIMAX_M2, fields, kinds


def _exaone_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    """layer_types, or EXAONE's rule: layer i slides unless (i + 1) is a multiple
    of sliding_window_pattern. Sliding layers turn q and k; with a
    sliding_window the full (global) layers do not (NoPE, attn_kind 2)."""
    window = c.raw("sliding_window")
    types = c.raw("layer_types")
    if types is None:
        pattern = c.integer("sliding_window_pattern", 4, minimum=1) if window is not None else 0
        types = ["sliding_attention" if pattern and (i + 1) % pattern else "full_attention"
                 for i in range(n_layers)]
    kinds = attention_layer_kinds(c, types, n_layers)
    if window is None and ATTN_SLIDING in kinds:
        raise c.unsupported("layer_types", types, "sliding layers need a sliding_window")
    return kinds if window is None else [ATTN_FULL_NOPE if k == ATTN_FULL else k for k in kinds]


def _exaone_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """EXAONE MoE: per-head q/k norm, sliding-window layers with RoPE and global
    ones without (attn_kind 2, format 1.10), DeepSeek-V3's sigmoid router with
    groups and scaling, shared experts, dense layers (mlp_layer_types, else the
    first first_k_dense_replace)."""
    fields = attention_fields(c, "head_dim")
    n = fields["n_layers"]
    types = c.raw("mlp_layer_types")
    if types is None:
        dense = c.integer("first_k_dense_replace", 1)
        types = ["dense" if i < dense else "sparse" for i in range(n)]
    kinds = mlp_layer_kinds(c, types, n)
    attn = _exaone_attn_kinds(c, n)
    window = c.integer("sliding_window", minimum=1) if ATTN_SLIDING in attn else 0
    fields |= sigmoid_router(c, kinds, True, experts_key="num_experts",
                             shared_key="num_shared_experts")
    fields |= {"qk_norm": 2,
               "sliding_window": min(window, MAX_CONTEXT_CAP),
               "rms_eps": c.number("rms_norm_eps", 1e-5),
               **rope_fields(c, fields["head_dim"], 1e6)}
    return Arch.EXAONE_MOE, fields, kinds


FAMILIES = {"flex_olmo": _flex_olmo, "hunyuan_v1_moe": _hunyuan_v1_moe,
            "glm4_moe_lite": _glm4_moe_lite, "minimax_m2": _minimax_m2, "exaone_moe": _exaone_moe}
ATTN_KINDS = {"exaone_moe": _exaone_attn_kinds}
