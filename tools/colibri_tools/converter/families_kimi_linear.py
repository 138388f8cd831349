"""Kimi-Linear (model_type kimi_linear) and Ling's hybrids (bailing_hybrid): from
the config.json to the image's model record (format 1.14); their tensors:
tensor_map_kda.py.

- layer_types (or the checkpoint's linear_attn_config: kda_layers and
  full_attn_layers, 1-indexed): "linear_attention" layers are KDA layers
  (attn_kind 7: the delta rule with a decay per key channel; the extension's
  ssm_heads = ssm_groups = linear_num_heads of ssm_head_dim = ssm_state =
  linear_head_dim, conv_kernel = linear_conv_kernel_dim, kda_rank =
  linear_head_dim: the forget and output gates are two factors each);
  "full_attention" layers are DeepSeek-V2's Multi-head Latent Attention
  without RoPE (attn_kind 2: the RoPE key is kept, never turned).
- mlp_layer_types (or first_k_dense_replace): dense layers, then DeepSeek-V3's
  sigmoid router with its correction bias, groups, renormalisation and routed
  scaling, and the shared experts.
- Its checkpoints spell some fields otherwise (num_experts, num_experts_per_token,
  num_shared_experts, num_expert_group, moe_renormalize, model_max_length): both
  spellings are read.
- bailing_hybrid (Ling 2.5 / Ring hybrids): the same KDA layers with one-matrix
  gates (kda_rank 0) and, with kda_safe_gate, the bounded forget gate
  (kda_bound = kda_lower_bound); MLA with interleaved RoPE (DeepSeek-V3's) and
  a sigmoid gate per head (attn_bias bit 11); layer_types by layer_group_size
  (every group's last layer MLA).
"""

from __future__ import annotations

from ..image.image_spec import ATTN_FULL, ATTN_FULL_NOPE, ATTN_KDA, BIAS_HEAD_GATE, Arch, FfnKind
from .family_fields import attention_fields, mla_fields, sigmoid_router
from .hf_config import HFConfig

# transformers' attribute names -> the names Kimi's checkpoints write.
_ALIASES = {"max_position_embeddings": "model_max_length", "norm_topk_prob": "moe_renormalize",
            "n_group": "num_expert_group", "num_local_experts": "num_experts",
            "num_experts_per_tok": "num_experts_per_token", "n_shared_experts": "num_shared_experts"}


def _canonical(c: HFConfig) -> HFConfig:
    """The config with transformers' names filled in from the checkpoint's."""
    values = dict(c.values)
    for name, written in _ALIASES.items():  # either spelling fills the other
        if values.get(name) is None and values.get(written) is not None:
            values[name] = values[written]
        elif values.get(written) is None and values.get(name) is not None:
            values[written] = values[name]
    linear = values.get("linear_attn_config")
    if isinstance(linear, dict):
        for name, key in (("linear_head_dim", "head_dim"), ("linear_num_heads", "num_heads"),
                          ("linear_conv_kernel_dim", "short_conv_kernel_size")):
            values.setdefault(name, linear.get(key))
    return HFConfig(values, c.path)


def _layer_types(c: HFConfig, n_layers: int) -> list:
    types = c.raw("layer_types")
    linear = c.raw("linear_attn_config")
    if types is None and isinstance(linear, dict) and \
            "full_attn_layers" in linear and "kda_layers" in linear:
        types = [None] * n_layers
        for key, kind in (("full_attn_layers", "full_attention"), ("kda_layers", "linear_attention")):
            for layer in linear[key]:
                if not isinstance(layer, int) or not 1 <= layer <= n_layers:
                    raise c.unsupported(f"linear_attn_config.{key}", linear[key],
                                        f"must list layers 1 .. {n_layers}")
                types[layer - 1] = kind
    if types is None:  # transformers' default: full attention on every fourth layer but the first
        types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n_layers)]
    return types


def kimi_linear_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    kinds = {"linear_attention": ATTN_KDA, "full_attention": ATTN_FULL_NOPE}
    types = _layer_types(c, n_layers)
    if not isinstance(types, list) or len(types) != n_layers or any(t not in kinds for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of {' / '.join(kinds)}")
    return [kinds[t] for t in types]


def _ffn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    types = c.raw("mlp_layer_types")
    if types is None:
        dense = c.integer("first_k_dense_replace", 1)
        return [FfnKind.DENSE if i < dense else FfnKind.MOE for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in ("dense", "sparse") for t in types):
        raise c.unsupported("mlp_layer_types", types, f"must list {n_layers} of dense / sparse")
    return [FfnKind.MOE if t == "sparse" else FfnKind.DENSE for t in types]


def _kimi_linear(config: HFConfig) -> tuple[Arch, dict, list[int]]:
    c = _canonical(config)
    c.reject_if("moe_router_activation_func", lambda v: v not in (None, "sigmoid"),
                "only sigmoid router scores are supported")
    c.reject_if("hidden_act", lambda v: v not in (None, "silu"), "only silu is supported")
    fields = attention_fields(c, None)
    n_layers = fields["n_layers"]
    attn = kimi_linear_attn_kinds(c, n_layers)  # refused before any tensor
    kinds = _ffn_kinds(c, n_layers)
    fields |= mla_fields(c, fields) | sigmoid_router(c, kinds, True, "num_experts",
                                                     "num_shared_experts")
    fields |= {"rms_eps": c.number("rms_norm_eps", 1e-5)}
    if ATTN_KDA in attn:
        heads = c.integer("linear_num_heads", 32, minimum=1)
        head_dim = c.integer("linear_head_dim", 128, minimum=1)
        fields |= {"ssm_heads": heads, "ssm_groups": heads, "ssm_head_dim": head_dim,
                   "ssm_state": head_dim, "kda_rank": head_dim,
                   "conv_kernel": c.integer("linear_conv_kernel_dim", 4, minimum=2)}
    return Arch.KIMI_LINEAR, fields, kinds


def bailing_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    types = c.raw("layer_types")
    if types is None:
        group = c.integer("layer_group_size", 6, minimum=1)
        types = ["full_attention" if (i + 1) % group == 0 else "linear_attention"
                 for i in range(n_layers)]
    kinds = {"linear_attention": ATTN_KDA, "full_attention": ATTN_FULL}
    if not isinstance(types, list) or len(types) != n_layers or any(t not in kinds for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of {' / '.join(kinds)}")
    return [kinds[t] for t in types]


def _bailing_hybrid(config: HFConfig) -> tuple[Arch, dict, list[int]]:
    c = _canonical(config)
    c.reject_if("hidden_act", lambda v: v not in (None, "silu"), "only silu is supported")
    c.reject_if("kda_lower_bound", lambda v: v is not None and not -1024 <= v < 0,
                "must be -1024 .. below 0")
    fields = attention_fields(c, None)
    n_layers = fields["n_layers"]
    attn = bailing_attn_kinds(c, n_layers)  # refused before any tensor
    kinds = _ffn_kinds(c, n_layers)
    fields |= mla_fields(c, fields) | sigmoid_router(c, kinds, True, "num_experts",
                                                     "num_shared_experts")
    fields |= {"rms_eps": c.number("rms_norm_eps", 1e-6), "attn_bias": BIAS_HEAD_GATE}
    if ATTN_KDA in attn:
        heads = c.integer("linear_num_heads", fields["n_heads"], minimum=1)
        head_dim = c.integer("linear_head_dim", c.integer("head_dim", 128), minimum=1)
        safe = c.flag("kda_safe_gate", True)
        fields |= {"ssm_heads": heads, "ssm_groups": heads, "ssm_head_dim": head_dim,
                   "ssm_state": head_dim, "kda_rank": 0,
                   "kda_bound": c.number("kda_lower_bound", -5.0) if safe else 0.0,
                   "conv_kernel": c.integer("linear_conv_kernel_dim",
                                            c.integer("short_conv_kernel_size", 4), minimum=2)}
    return Arch.BAILING_HYBRID, fields, kinds


FAMILIES = {"kimi_linear": _kimi_linear, "bailing_hybrid": _bailing_hybrid}
ATTN_KINDS = {"kimi_linear": lambda c, n: kimi_linear_attn_kinds(_canonical(c), n),
              "bailing_hybrid": lambda c, n: bailing_attn_kinds(_canonical(c), n)}
