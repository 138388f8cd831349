"""What every model family derives the same way from its config.json (families.py
and families_recent.py hold the per-family mapping): the attention shape, the
routing fields, the dense width, RoPE, plain or YaRN, as the record's RoPE fields,
and what several families share: DeepSeek-V3's router, Multi-head Latent
Attention, layer_types and mlp_layer_types."""

from __future__ import annotations

import math

from ..image.image_layout import MIN_ROPE_THETA
from ..image.image_spec import ATTN_FULL, ATTN_SLIDING, MLA_LATENT, ROPE_YARN, ROUTER_SIGMOID, FfnKind
from .hf_config import HFConfig, float32_number

MAX_CONTEXT_CAP = 1 << 24
ALL_BIASES = 0b1111
QKV_BIASES = 0b0111


def check_common(c: HFConfig) -> None:
    c.reject_if("hidden_act", lambda v: (v or "silu") != "silu", "only SiLU (SwiGLU) is supported")


def _reject_partial_rope(c: HFConfig) -> None:
    c.reject_if("partial_rotary_factor", lambda v: v not in (None, 1, 1.0),
                "RoPE over part of the head is not supported")


def _is_plain_rope(params: object) -> bool:
    if not isinstance(params, dict):
        return False
    kind = params.get("rope_type", params.get("type", "default"))
    return kind == "default" and params.get("partial_rotary_factor") in (None, 1, 1.0)


def rope_parameters(c: HFConfig) -> dict:
    params = c.raw("rope_parameters")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise c.unsupported("rope_parameters", params, "must be an object")
    nested = [v for v in params.values() if isinstance(v, dict)]
    if nested:  # per-layer-type parameters: accept only if they are all the same
        if len(nested) != len(params) or any(v != nested[0] for v in nested):
            raise c.unsupported("rope_parameters", params, "differs between layer types")
        params = nested[0]
    return params


def rope_theta(c: HFConfig, default: float) -> float:
    """RoPE base from rope_parameters.rope_theta (or legacy rope_theta); plain RoPE only."""
    _reject_partial_rope(c)
    scaling = c.raw("rope_scaling")
    if scaling not in (None, {}) and not _is_plain_rope(scaling):
        raise c.unsupported("rope_scaling", scaling, "RoPE scaling is not supported")
    params = rope_parameters(c)
    kind = params.get("rope_type", params.get("type", "default"))
    if kind != "default":
        raise c.unsupported("rope_parameters.rope_type", kind, "only default RoPE is supported")
    if params.get("partial_rotary_factor") not in (None, 1, 1.0):
        raise c.unsupported("rope_parameters.partial_rotary_factor",
                            params["partial_rotary_factor"], "partial RoPE is not supported")
    theta = params.get("rope_theta", c.get("rope_theta", default))
    if not float32_number(theta) or not theta >= MIN_ROPE_THETA:
        raise c.unsupported("rope_parameters.rope_theta", theta,
                            "must be a number >= 1 that a float32 holds")
    return float(theta)


def _theta(c: HFConfig, params: dict, default: float) -> float:
    theta = params.get("rope_theta", c.get("rope_theta", default))
    if not float32_number(theta) or not theta >= MIN_ROPE_THETA:
        raise c.unsupported("rope_parameters.rope_theta", theta,
                            "must be a number >= 1 that a float32 holds")
    return float(theta)


def _yarn(c: HFConfig, params: dict, dim: int, theta: float, max_context: int) -> dict:
    """YaRN as transformers' _compute_yarn_parameters: the ramp between the correction
    dimensions of beta_fast and beta_slow (floored / ceiled unless truncate is false),
    the cos/sin factor (attention_factor, or mscale / mscale_all_dim, or
    0.1 ln(factor) + 1)."""
    def number(key: str, default: float | None) -> float:
        value = params.get(key)
        value = default if value is None else value
        if not float32_number(value) or value <= 0:
            raise c.unsupported(f"rope_parameters.{key}", value, "must be a number > 0")
        return float(value)

    original = params.get("original_max_position_embeddings")
    if not isinstance(original, int) or isinstance(original, bool) or original < 1:
        raise c.unsupported("rope_parameters.original_max_position_embeddings", original,
                            "YaRN needs a positive integer")
    factor = params.get("factor")
    factor = max_context / original if factor is None else number("factor", None)

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = params.get("attention_factor")
    if attention is None:
        m, m_all = params.get("mscale"), params.get("mscale_all_dim")
        attention = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
    else:
        attention = number("attention_factor", None)
    beta_fast, beta_slow = params.get("beta_fast") or 32, params.get("beta_slow") or 1

    def correction(rotations: float) -> float:
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction(number("beta_fast", beta_fast)), correction(number("beta_slow", beta_slow))
    truncate = params.get("truncate", True)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    if not 0 < high - low:
        raise c.unsupported("rope_parameters.beta_fast", beta_fast,
                            "YaRN's ramp must run upward (beta_fast > beta_slow)")
    return {"rope_kind": ROPE_YARN, "rope_factor": factor, "rope_ramp_low": float(low),
            "rope_ramp_width": float(high - low), "rope_attn_factor": float(attention)}


def rope_fields(c: HFConfig, head_dim: int, default_theta: float, partial: bool = False,
                rope_dim: int | None = None) -> dict:
    """rope_theta and the format 1.5 RoPE fields: RoPE over rope_dim (or
    partial_rotary_factor of the head, for a family that has it), default or YaRN.
    Plain RoPE over the whole head gives the 1.0 record (RoPE fields 0)."""
    scaling = c.raw("rope_scaling")
    params = rope_parameters(c)
    if scaling not in (None, {}) and not params:
        if not isinstance(scaling, dict):
            raise c.unsupported("rope_scaling", scaling, "must be an object")
        params = scaling
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ("default", "yarn"):
        raise c.unsupported("rope_parameters.rope_type", kind, "only default and yarn RoPE are "
                            "supported")
    theta = _theta(c, params, default_theta)
    factor = params.get("partial_rotary_factor", c.raw("partial_rotary_factor"))
    if rope_dim is None:
        if not partial and factor not in (None, 1, 1.0):
            raise c.unsupported("partial_rotary_factor", factor, "partial RoPE is not supported "
                                "for this family")
        share = 1.0 if factor is None else factor
        if not float32_number(share) or not 0 < share <= 1:
            raise c.unsupported("partial_rotary_factor", factor, "must be a number in (0, 1]")
        rope_dim = int(head_dim * share)
    if rope_dim < 2 or rope_dim % 2:
        raise c.unsupported("partial_rotary_factor", factor,
                            f"RoPE must turn an even number >= 2 of dimensions (here {rope_dim})")
    fields = {"rope_theta": theta}
    if kind == "yarn":
        max_context = c.integer("max_position_embeddings", minimum=1)
        fields |= _yarn(c, params, rope_dim, theta, max_context)
    if kind == "yarn" or rope_dim != head_dim:
        fields["rope_dim"] = rope_dim
    return fields


def attention_fields(c: HFConfig, head_dim_key: str | None) -> dict:
    hidden = c.integer("hidden_size", minimum=1)
    heads = c.integer("num_attention_heads", minimum=1)
    kv_heads = c.integer("num_key_value_heads", heads, minimum=1)
    head_dim = c.integer(head_dim_key, 0) if head_dim_key else 0
    return {"vocab_size": c.integer("vocab_size", minimum=1), "hidden_size": hidden,
            "n_layers": c.integer("num_hidden_layers", minimum=1), "n_heads": heads,
            "n_kv_heads": kv_heads, "head_dim": head_dim or hidden // heads,
            "max_context": min(c.integer("max_position_embeddings", minimum=1), MAX_CONTEXT_CAP),
            "tie_embeddings": int(c.flag("tie_word_embeddings", False))}


def qwen_ffn_kinds(c: HFConfig, n_layers: int, n_experts: int) -> list[int]:
    """Qwen's dense and MoE layers: MoE every decoder_sparse_step-th layer, but
    not those in mlp_only_layers."""
    mlp_only = c.int_list("mlp_only_layers")
    step = c.integer("decoder_sparse_step", 1, minimum=1)
    return [FfnKind.MOE if (i not in mlp_only and n_experts > 0 and (i + 1) % step == 0)
            else FfnKind.DENSE for i in range(n_layers)]


def granite_scales(c: HFConfig) -> dict:
    """Granite's multipliers, as the record's format 1.1 scales."""
    return {"embedding_scale": c.number("embedding_multiplier", 1.0),
            "residual_scale": c.number("residual_multiplier", 1.0),
            "attention_scale": c.number("attention_multiplier", 1.0),
            "logits_divisor": c.number("logits_scaling", 1.0)}


def expert_count(c: HFConfig, keys: tuple[str, ...]) -> int:
    """The routed experts of a family whose MoE layers always have some, from
    the first of `keys` the config has; zero is refused as such, naming the key."""
    key, n = c.first_integer(keys)
    if n == 0:
        raise c.unsupported(key, n, "zero experts: a mixture-of-experts layer routes each token "
                            "to experts, it needs at least one")
    return n


def routing_fields(c: HFConfig, kinds: list[int], n_experts: int, width: int, norm: bool) -> dict:
    if FfnKind.MOE not in kinds:
        return {"n_experts": 0, "expert_intermediate": 0, "top_k": 0, "router_norm_topk": 0}
    return {"n_experts": n_experts, "expert_intermediate": width,
            "top_k": c.integer("num_experts_per_tok", minimum=1), "router_norm_topk": int(norm)}


def dense_width(c: HFConfig, kinds: list[int]) -> int:
    return c.integer("intermediate_size", minimum=1) if FfnKind.DENSE in kinds else 0


# transformers' layer_types values and the layer table's attn_kind for each (format 1.6).
LAYER_TYPES = {"full_attention": ATTN_FULL, "sliding_attention": ATTN_SLIDING}


def sigmoid_router(c: HFConfig, kinds: list[int], norm_default: bool,
                   experts_key: str = "n_routed_experts", shared_key: str = "n_shared_experts") -> dict:
    """DeepSeek-V3's router (also GLM-4.5's, dots1's and EXAONE's, whose keys for
    the routed and shared expert counts differ), its experts and shared experts."""
    method = c.get("topk_method", "noaux_tc")
    if method != "noaux_tc":
        raise c.unsupported("topk_method", method, "this family's router is noaux_tc (sigmoid "
                            "scores, correction bias)")
    c.reject_if("scoring_func", lambda v: v not in (None, "sigmoid"), "only sigmoid scores")
    n_experts = expert_count(c, (experts_key,))
    width = c.integer("moe_intermediate_size", minimum=1)
    fields = routing_fields(c, kinds, n_experts, width, c.flag("norm_topk_prob", norm_default))
    if FfnKind.MOE not in kinds:
        return fields | {"dense_intermediate": dense_width(c, kinds)}
    return fields | {
        "router_score": ROUTER_SIGMOID, "n_group": c.integer("n_group", 1, minimum=1),
        "topk_group": c.integer("topk_group", 1, minimum=1),
        "routed_scaling": c.number("routed_scaling_factor", 1.0),
        "shared_intermediate": c.integer(shared_key, 0) * width,
        "dense_intermediate": dense_width(c, kinds)}


def mla_fields(c: HFConfig, fields: dict) -> dict:
    """Multi-head Latent Attention (DeepSeek-V2/V3): head_dim = qk_nope_head_dim +
    qk_rope_head_dim, RoPE on the last qk_rope_head_dim of each q head and on the
    one RoPE key, the LoRA ranks and v_head_dim; the attention scale times
    mscale(factor, mscale_all_dim)^2 under YaRN (transformers' yarn_apply_mscale)."""
    c.reject_if("attention_bias", lambda v: v is True, "MLA with biases is not supported")
    c.reject_if("quantization_config", lambda v: v is not None,
                "quantized (FP8) checkpoints are not supported: dequantize to bf16 or f32")
    nope = c.integer("qk_nope_head_dim", minimum=1)
    rope = c.integer("qk_rope_head_dim", minimum=2)
    c.reject_if("qk_rope_head_dim", lambda v: v % 2, "RoPE turns pairs: must be even")
    head = nope + rope
    q_lora = 0 if c.raw("q_lora_rank") is None else c.integer("q_lora_rank", minimum=1)
    out = {"head_dim": head, "n_kv_heads": fields["n_heads"], "mla": MLA_LATENT,
           "q_lora_rank": q_lora, "kv_lora_rank": c.integer("kv_lora_rank", minimum=1),
           "v_head_dim": c.integer("v_head_dim", minimum=1), "lora_eps": 1e-6,
           **rope_fields(c, head, 1e4, rope_dim=rope)}
    params = rope_parameters(c) or (c.raw("rope_scaling") or {})
    kind = params.get("rope_type", params.get("type", "default"))
    m_all = params.get("mscale_all_dim") or 0
    if kind != "default" and m_all:
        factor = float(params["factor"])
        m = 1.0 if factor <= 1 else 0.1 * m_all * math.log(factor) + 1.0
        out |= {"embedding_scale": 1.0, "residual_scale": 1.0, "logits_divisor": 1.0,
                "attention_scale": head ** -0.5 * m * m}
    return out


def attention_layer_kinds(c: HFConfig, types: object, n_layers: int) -> list[int]:
    """Each layer's attn_kind from transformers' layer_types, refused unless it
    names a known type per layer."""
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in LAYER_TYPES for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of "
                            f"{' / '.join(LAYER_TYPES)}")
    return [LAYER_TYPES[t] for t in types]


def mlp_layer_kinds(c: HFConfig, types: object, n_layers: int) -> list[int]:
    """Each layer's FFN kind from a list of 'dense' / 'sparse' (mlp_layer_types of
    GLM-4.7-Flash and EXAONE MoE), refused unless it names one of them per layer."""
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in ("dense", "sparse") for t in types):
        raise c.unsupported("mlp_layer_types", types, f"must list 'dense' or 'sparse' for each "
                            f"of the {n_layers} layers")
    return [FfnKind.MOE if t == "sparse" else FfnKind.DENSE for t in types]
