"""MiMo-V2-Flash (model_type mimo_v2_flash, transformers 5.24): from its config.json
to the image's model record (format 1.12), and the facts its tensor map
(tensor_map_mimo.py) needs.

- layer_types: full and sliding-window layers (the default: layer 0 and every
  sixth full); rope_parameters holds one RoPE per layer type, each over
  int(head_dim * partial_rotary_factor) dimensions with its own theta. The image
  gives every layer its table of inverse frequencies (ROPE_FREQ, header flag
  LAYER_ROPE), computed as transformers computes them; the widths must agree.
- A sliding layer has twice num_key_value_heads KV heads and per-head sinks; the
  image has one KV head count, the sliding layers', and each full layer's K and V
  heads stored twice (head j as heads 2j and 2j + 1: the same keys and values for
  the same query heads), and sinks of -inf (no share) on the full layers.
- Values are v_head_dim wide (<= head_dim), times attention_value_scale: the scale
  is folded into v_proj and each value head padded with zero rows to head_dim, the
  o_proj columns likewise with zeros (exact: the padding adds zero terms).
- DeepSeek-V3's router (sigmoid, correction bias, groups) without shared experts;
  dense layers by mlp_layer_types (default: the first).
"""

from __future__ import annotations

import numpy as np

from ..image.image_spec import ATTN_FULL, ATTN_SLIDING, BIAS_SINKS, Arch
from .family_fields import (
    QKV_BIASES,
    attention_fields,
    attention_layer_kinds,
    mlp_layer_kinds,
    sigmoid_router,
)
from .hf_config import HFConfig

DEFAULT_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 5_000_000.0,
                                   "partial_rotary_factor": 0.334},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0,
                                      "partial_rotary_factor": 0.334}}
LAYER_TYPE = {ATTN_FULL: "full_attention", ATTN_SLIDING: "sliding_attention"}


def mimo_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    """layer_types, or MiMo's rule: layer 0 and each (i + 1) % 6 == 0 full."""
    types = c.raw("layer_types")
    if types is None:
        types = ["full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention"
                 for i in range(n_layers)]
    return attention_layer_kinds(c, types, n_layers)


def value_width(c: HFConfig) -> int:
    """v_head_dim (transformers' default 128)."""
    return c.integer("v_head_dim", 128, minimum=1)


def value_scale(c: HFConfig) -> float:
    """attention_value_scale: 0.707 when absent, 1 when null (transformers')."""
    if "attention_value_scale" not in c.values:
        return 0.707
    scale = c.raw("attention_value_scale")
    if scale is None:
        return 1.0
    if not isinstance(scale, (int, float)) or not 0 < scale < float("inf"):
        raise c.unsupported("attention_value_scale", scale, "must be a finite number > 0")
    return float(scale)


def _rope_of(c: HFConfig, layer_type: str) -> dict:
    params = c.raw("rope_parameters") or DEFAULT_ROPE
    one = params.get(layer_type) if isinstance(params, dict) else None
    theta = one.get("rope_theta") if isinstance(one, dict) else None
    if not isinstance(theta, (int, float)) or isinstance(theta, bool) or \
            not 1 <= theta < float("inf") or one.get("rope_type", "default") != "default":
        raise c.unsupported(f"rope_parameters.{layer_type}", one, "must be default RoPE with a "
                            "finite rope_theta >= 1 for each layer type used")
    return one


def rope_width(c: HFConfig, layer_type: str, head_dim: int) -> int:
    """transformers' dim: int(head_dim * partial_rotary_factor) (its frequencies are
    theta^(-2i / dim) for the ceil(dim / 2) pairs it turns)."""
    factor = _rope_of(c, layer_type).get("partial_rotary_factor", 0.334)
    if not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise c.unsupported(f"rope_parameters.{layer_type}.partial_rotary_factor", factor,
                            "must be a number in (0, 1]")
    return int(head_dim * factor)


def inverse_frequencies(c: HFConfig, layer_type: str, head_dim: int) -> np.ndarray:
    """The inverse frequencies of transformers' MiMo rotary embedding for
    `layer_type`, 1 / theta^(arange(0, dim, 2) / dim), each the float32 nearest the
    exact value (transformers' own float32 pow is within an ulp of it; computed in
    float64 the table is the same on every machine)."""
    dim = rope_width(c, layer_type, head_dim)
    theta = float(np.float32(_rope_of(c, layer_type)["rope_theta"]))
    return (1.0 / np.power(theta, np.arange(0, dim, 2, dtype=np.float64) / dim)).astype(np.float32)


def _rope_fields(c: HFConfig, kinds: list[int], head_dim: int) -> dict:
    types = sorted({LAYER_TYPE[k] for k in kinds})
    pairs = {t: len(inverse_frequencies(c, t, head_dim)) for t in types}
    if len(set(pairs.values())) != 1 or min(pairs.values()) < 1:
        raise c.unsupported("rope_parameters", c.raw("rope_parameters"),
                            f"the layer types must turn the same number of dimensions, >= 2 "
                            f"(here {pairs})")
    return {"rope_dim": 2 * pairs[types[0]], "layer_rope": 1,
            "rope_theta": float(_rope_of(c, types[0])["rope_theta"])}


def _mimo_v2_flash(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """MiMo-V2-Flash: full and sliding layers with their own RoPE, KV heads, sinks;
    narrower values with a scale; DeepSeek-V3's router."""
    fields = attention_fields(c, "head_dim")
    n, head_dim = fields["n_layers"], fields["head_dim"]
    attn = mimo_attn_kinds(c, n)
    sliding = ATTN_SLIDING in attn
    if value_width(c) > head_dim:
        raise c.unsupported("v_head_dim", value_width(c), f"must be <= head_dim ({head_dim}): "
                            "the values are padded to head_dim")
    value_scale(c)
    kv = fields["n_kv_heads"] * (2 if sliding else 1)
    if fields["n_heads"] % kv:
        raise c.unsupported("num_key_value_heads", c.raw("num_key_value_heads"),
                            f"the sliding layers' {kv} KV heads must divide the query heads")
    types = c.raw("mlp_layer_types")
    kinds = mlp_layer_kinds(c, ["dense"] + ["sparse"] * (n - 1) if types is None else types, n)
    c.reject_if("n_shared_experts", lambda v: v not in (None, 0), "MiMo-V2-Flash has none")
    window = c.integer("sliding_window_size", minimum=1) + 1 if c.raw("sliding_window_size") \
        else c.integer("sliding_window", 129, minimum=1)
    fields |= sigmoid_router(c, kinds, True) | _rope_fields(c, attn, head_dim) | {
        "n_kv_heads": kv, "rms_eps": c.number("rms_norm_eps", 1e-5),
        "sliding_window": window if sliding else 0,
        "attn_bias": (QKV_BIASES if c.flag("attention_bias", False) else 0)
        | (BIAS_SINKS if sliding else 0)}
    return Arch.MIMO_V2_FLASH, fields, kinds


FAMILIES = {"mimo_v2_flash": _mimo_v2_flash}
ATTN_KINDS = {"mimo_v2_flash": mimo_attn_kinds}
