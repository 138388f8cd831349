"""Golden values for converter tests, taken from the Hugging Face model objects
(modules, parameters, config) and from docs/format.md, never from the converter.

Roles and arch ids are spelled as the literal numbers of docs/format.md so a
wrong constant in the tools package cannot hide here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from hf_expect_granite_hybrid import granite_hybrid_record, granite_hybrid_tensors
from hf_expect_jamba import jamba_record, jamba_tensors
from hf_expect_kimi_linear import kimi_linear_record, kimi_linear_tensors
from hf_expect_lfm2 import lfm2_record, lfm2_tensors
from hf_expect_longcat import longcat_record, longcat_tensors
from hf_expect_mimo import mimo_record, mimo_tensors
from hf_expect_nemotron import nemotron_record, nemotron_tensors
from hf_expect_qwen3_next import qwen3_next_record, qwen3_next_tensors
from hf_expect_recent import (
    afmoe_fields,
    afmoe_tensors,
    dbrx_record,
    dbrx_tensors,
    jetmoe_record,
    jetmoe_tensors,
    llama4_ffn_tensors,
    llama4_fields,
)

GLOBAL = 0xFFFF
ARCH = {"mixtral": 1, "qwen2_moe": 2, "olmoe": 3, "qwen3_moe": 4, "switch": 5, "granitemoe": 6,
        "granitemoeshared": 7, "phimoe": 8, "ernie4_5_moe": 9, "glm4_moe": 10, "dots1": 11,
        "gpt_oss": 12, "deepseek_v2": 13, "deepseek_v3": 14, "flex_olmo": 15,
        "hunyuan_v1_moe": 16, "glm4_moe_lite": 17, "minimax_m2": 18, "exaone_moe": 19,
        "afmoe": 21, "llama4_text": 22, "jetmoe": 23, "longcat_flash": 24, "mimo_v2_flash": 25,
        "lfm2_moe": 26, "granitemoehybrid": 27, "qwen3_next": 28, "qwen3_5_moe": 29,
        "kimi_linear": 30, "bailing_hybrid": 31, "jamba": 32, "nemotron_h": 33}
# family -> qk_norm kind (1: whole projection, OLMoE; 2: per head, Qwen3-MoE)
QK_NORM = {"mixtral": 0, "qwen2_moe": 0, "olmoe": 1, "qwen3_moe": 2, "switch": 0, "granitemoe": 0,
           "granitemoeshared": 0, "phimoe": 0, "ernie4_5_moe": 0, "glm4_moe": 2, "dots1": 2,
           "gpt_oss": 0, "deepseek_v2": 0, "deepseek_v3": 0, "flex_olmo": 1, "hunyuan_v1_moe": 3,
           "glm4_moe_lite": 0, "minimax_m2": 1, "exaone_moe": 2, "afmoe": 2, "llama4_text": 0}
# family -> norm_kind (1: LayerNorm with bias; 2: RMSNorm after each sublayer, OLMo-2's)
NORM_KIND = {"phimoe": 1, "flex_olmo": 2}
SIGMOID = ("glm4_moe", "dots1", "deepseek_v3", "glm4_moe_lite", "exaone_moe")  # DeepSeek-V3's
MLA = ("deepseek_v2", "deepseek_v3", "glm4_moe_lite")  # Multi-head Latent Attention
GRANITE = ("granitemoe", "granitemoeshared")


def _block(layer: Any) -> Any:
    """The FFN module of a decoder layer (Granite: block_sparse_moe, Llama 4:
    feed_forward)."""
    return (getattr(layer, "mlp", None) or getattr(layer, "block_sparse_moe", None)
            or layer.feed_forward)


def _router(moe: Any) -> Any:
    return getattr(moe, "gate", None) or moe.router


def _expert_width(experts: Any) -> int:
    return getattr(experts, "intermediate_dim", None) or experts.intermediate_size


def _is_moe(layer: Any) -> bool:
    return hasattr(_block(layer), "experts")


def _shared_width(family: str, layer: Any) -> int:
    if family == "granitemoeshared":
        return layer.shared_mlp.output_linear.in_features
    mlp = _block(layer)
    if hasattr(mlp, "shared_mlp"):  # Hunyuan
        return mlp.shared_mlp.gate_proj.out_features
    if hasattr(mlp, "shared_experts"):
        return mlp.shared_experts.gate_proj.out_features
    if family == "switch" or not hasattr(mlp, "shared_expert"):
        return 0
    return mlp.shared_expert.gate_proj.out_features


def _granite_fields(config: Any, family: str) -> dict[str, Any]:
    """Record fields that Granite sets: router_score 2 (top-k of the logits,
    softmax over the k), unnormalised, and its multipliers as the 1.1 scales."""
    if family not in GRANITE:
        return {}
    return {"router_score": 2, "router_norm_topk": 0,
            **{name: float(np.float32(getattr(config, key))) for name, key in (
                ("embedding_scale", "embedding_multiplier"),
                ("residual_scale", "residual_multiplier"),
                ("attention_scale", "attention_multiplier"),
                ("logits_divisor", "logits_scaling"))}}


def _phimoe_fields(model: Any, family: str) -> dict[str, Any]:
    """PhiMoE: LayerNorm (norm_kind 1), sparsemixer (router_score 3) with its
    epsilon, and the LM head's bias as attn_bias bit 4."""
    if family != "phimoe":
        return {}
    attn = model.model.layers[0].self_attn
    biases = [attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias, attn.o_proj.bias,
              model.lm_head.bias]
    return {"norm_kind": 1, "router_score": 3, "router_norm_topk": 0,
            "router_jitter": float(np.float32(model.config.router_jitter_noise)),
            "attn_bias": sum(1 << i for i, b in enumerate(biases) if b is not None)}


def _ernie_fields(model: Any, family: str) -> dict[str, Any]:
    """ERNIE-4.5: ungated shared experts, router_score 4 with moe_norm_min."""
    if family != "ernie4_5_moe":
        return {}
    moe = next(layer.mlp for layer in model.model.layers if _is_moe(layer))
    return {"shared_intermediate": moe.shared_experts.gate_proj.out_features,
            "shared_gate": 0, "router_score": 4, "router_norm_topk": 1,
            "router_norm_min": float(np.float32(moe.gate.norm_min))}


def _sigmoid_fields(model: Any, family: str) -> dict[str, Any]:
    """DeepSeek-V3's router and GLM's partial RoPE (format 1.5)."""
    if family not in SIGMOID:
        return {}
    config = model.config
    out = {"router_score": 1, "n_group": config.n_group, "topk_group": config.topk_group,
           "routed_scaling": float(np.float32(config.routed_scaling_factor)),
           "router_norm_topk": int(config.norm_topk_prob)}
    rotary = model.model.rotary_emb.inv_freq.shape[0] * 2
    if family not in MLA and rotary != model.model.layers[0].self_attn.head_dim:
        out["rope_dim"] = rotary
    return out


def _minimax_fields(model: Any, family: str) -> dict[str, Any]:
    """MiniMax-M2: the sigmoid router (router_score 1) without groups or scaling,
    always renormalised; partial RoPE (format 1.5) read off the rotary table."""
    if family != "minimax_m2":
        return {}
    rotary = model.model.rotary_emb.inv_freq.shape[0] * 2
    return {"router_score": 1, "router_norm_topk": 1, "rope_dim": rotary}


def _exaone_fields(model: Any, family: str) -> dict[str, Any]:
    """EXAONE MoE: sliding layers (attn_kind 1) by the config's layer_types, the
    global ones without RoPE (attn_kind 2) when there is a window."""
    if family != "exaone_moe":
        return {}
    config = model.config
    full = 0 if config.sliding_window is None else 2
    kinds = [1 if t == "sliding_attention" else full for t in config.layer_types]
    return {"attn_kinds": kinds, "sliding_window": config.sliding_window if 1 in kinds else 0}


def _gpt_oss_fields(model: Any, family: str) -> dict[str, Any]:
    """gpt-oss: router_score 2, sinks / router / expert biases as attn_bias bits 5-7,
    the sliding window and the clamped SwiGLU's limit and alpha."""
    if family != "gpt_oss":
        return {}
    config = model.config
    attn = model.model.layers[0].self_attn
    biases = [attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias, attn.o_proj.bias]
    return {"router_score": 2, "router_norm_topk": 0, "activation": 1,
            "attn_bias": sum(1 << i for i, b in enumerate(biases) if b is not None) | 0xE0,
            "sliding_window": config.sliding_window if "sliding_attention" in config.layer_types
            else 0, "swiglu_limit": float(np.float32(config.swiglu_limit)),
            "swiglu_alpha": float(np.float32(config.swiglu_alpha)),
            "attn_kinds": [int(t == "sliding_attention") for t in config.layer_types]}


def _yarn_ramp(params: dict, dim: int) -> tuple[float, float]:
    """transformers' YaRN correction range (floored / ceiled), as (low, high - low)."""
    def dim_of(rotations: float) -> float:
        return dim * math.log(params["original_max_position_embeddings"] /
                              (rotations * 2 * math.pi)) / (2 * math.log(params["rope_theta"]))
    low = max(math.floor(dim_of(params.get("beta_fast") or 32)), 0)
    high = min(math.ceil(dim_of(params.get("beta_slow") or 1)), dim - 1)
    return float(low), float(high - low if high != low else 0.001)


def _mla_fields(model: Any, family: str) -> dict[str, Any]:
    """DeepSeek-V2/V3: the MLA fields (format 1.6), its RoPE dimensions, YaRN and
    the attention scale under YaRN; V2's softmax router."""
    if family not in MLA:
        return {}
    config, attn = model.config, model.model.layers[0].self_attn
    out = {"mla": 1, "q_lora_rank": attn.q_lora_rank or 0,
           "kv_lora_rank": attn.kv_lora_rank, "v_head_dim": attn.v_head_dim,
           "lora_eps": float(np.float32(attn.kv_a_layernorm.variance_epsilon)),
           "rope_dim": attn.qk_rope_head_dim, "n_kv_heads": config.num_attention_heads}
    params = config.rope_parameters
    if params.get("rope_type") == "yarn":
        low, width = _yarn_ramp(params, attn.qk_rope_head_dim)
        out |= {"rope_kind": 1, "rope_factor": float(np.float32(params["factor"])),
                "rope_ramp_low": low, "rope_ramp_width": float(np.float32(width)),
                "rope_attn_factor": float(np.float32(model.model.rotary_emb.attention_scaling))}
        if params.get("mscale_all_dim"):
            out |= {"embedding_scale": 1.0, "residual_scale": 1.0, "logits_divisor": 1.0,
                    "attention_scale": float(np.float32(attn.scaling))}
    out["shared_gate"] = 0
    if family == "deepseek_v2":
        grouped = config.topk_method == "group_limited_greedy"
        out |= {"router_score": 0, "router_norm_topk": 0,
                "routed_scaling": float(np.float32(config.routed_scaling_factor)),
                "n_group": config.n_group if grouped else 1,
                "topk_group": config.topk_group if grouped else 1}
    return out


# Record fields most families leave at their defaults (docs/format.md 1.1).
DEFAULT_FIELDS = {
    "routed_scaling": 1.0, "n_group": 1, "topk_group": 1, "activation": 0, "norm_kind": 0,
    "embedding_scale": 0.0, "residual_scale": 0.0, "attention_scale": 0.0,
    "logits_divisor": 0.0, "router_jitter": 0.0, "router_norm_min": 0.0, "rope_dim": 0,
    "rope_kind": 0, "rope_factor": 0.0, "rope_ramp_low": 0.0, "rope_ramp_width": 0.0,
    "rope_attn_factor": 0.0, "sliding_window": 0, "swiglu_limit": 0.0, "swiglu_alpha": 0.0,
    "mla": 0, "q_lora_rank": 0, "kv_lora_rank": 0, "v_head_dim": 0, "lora_eps": 0.0,
    "qkv_clip": 0.0, "attn_temp_floor": 0.0, "attn_temp_scale": 0.0, "zero_experts": 0,
    "layer_rope": 0, "kv_int8": 0, "conv_kernel": 0, "router_sum_eps": 0.0, "ssm_heads": 0,
    "ssm_head_dim": 0, "ssm_state": 0, "ssm_groups": 0, "kda_rank": 0, "kda_bound": 0.0,
    "ssm_dt_rank": 0, "ssm_dt_min": 0.0,
}
# Families whose modules differ too much from Llama's for the generic reading.
OWN_RECORDS = {"dbrx": dbrx_record, "jetmoe": jetmoe_record, "longcat_flash": longcat_record,
               "mimo_v2_flash": mimo_record, "lfm2_moe": lfm2_record,
               "granitemoehybrid": granite_hybrid_record, "qwen3_next": qwen3_next_record,
               "qwen3_5_moe": qwen3_next_record, "kimi_linear": kimi_linear_record,
               "bailing_hybrid": kimi_linear_record, "jamba": jamba_record,
               "nemotron_h": nemotron_record}


def expected_record(model: Any, family: str) -> dict[str, Any]:
    """Model record fields (docs/format.md 1.1) read off the HF modules and config."""
    config = model.config
    if family in OWN_RECORDS:
        return OWN_RECORDS[family](model, {"vocab_size": config.vocab_size,
                                           "hidden_size": config.hidden_size, **DEFAULT_FIELDS})
    layers = model.model.layers
    attn = layers[0].self_attn
    moe = [layer for layer in layers if _is_moe(layer)]
    dense = [layer for layer in layers if not _is_moe(layer)]
    biases = [getattr(getattr(attn, name, None), "bias", None)
              for name in ("q_proj", "k_proj", "v_proj", "o_proj")]
    shared = _shared_width(family, moe[0]) if moe else 0
    gate = _router(_block(moe[0])) if moe else None
    return DEFAULT_FIELDS | {
        "arch": ARCH[family], "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
        "n_layers": len(layers), "n_heads": config.num_attention_heads,
        "n_kv_heads": config.num_key_value_heads,
        "head_dim": getattr(attn, "head_dim", None) or attn.qk_head_dim,
        "max_context": config.max_position_embeddings,
        "dense_intermediate": _block(dense[0]).gate_proj.out_features if dense else 0,
        "expert_intermediate": _expert_width(_block(moe[0]).experts) if moe else 0,
        "n_experts": _block(moe[0]).experts.num_experts if moe else 0,
        "shared_intermediate": shared,
        "rms_eps": float(np.float32(config.rms_norm_eps)),
        "rope_theta": float(np.float32(config.rope_parameters["rope_theta"])),
        "attn_bias": sum(1 << i for i, b in enumerate(biases) if b is not None),
        "qk_norm": QK_NORM[family], "tie_embeddings": int(bool(config.tie_word_embeddings)),
        "router_score": 0, "top_k": gate.top_k if moe else 0,
        "router_norm_topk": int(getattr(gate, "norm_topk_prob", True)) if moe else 0,
        "shared_gate": int(shared > 0 and family not in GRANITE and family not in SIGMOID
                           and family not in ("hunyuan_v1_moe", "afmoe")),
        "norm_kind": NORM_KIND.get(family, 0), "attn_kinds": [0] * len(layers),
        "ffn_kinds": [1 if _is_moe(layer) else 0 for layer in layers],
    } | _granite_fields(config, family) | _phimoe_fields(model, family) | \
        _ernie_fields(model, family) | _sigmoid_fields(model, family) | \
        _gpt_oss_fields(model, family) | _mla_fields(model, family) | \
        _minimax_fields(model, family) | _exaone_fields(model, family) | \
        afmoe_fields(model, family) | llama4_fields(model, family)


def _attention_tensors(sd: dict, p: str, layer: int) -> dict:
    names = {16: "input_layernorm.weight", 17: "self_attn.q_proj.weight",
             64: "self_attn.q_a_proj.weight", 65: "self_attn.q_a_layernorm.weight",
             66: "self_attn.q_b_proj.weight", 67: "self_attn.kv_a_proj_with_mqa.weight",
             68: "self_attn.kv_a_layernorm.weight", 69: "self_attn.kv_b_proj.weight",
             18: "self_attn.k_proj.weight", 19: "self_attn.v_proj.weight",
             20: "self_attn.o_proj.weight", 21: "self_attn.q_proj.bias",
             22: "self_attn.k_proj.bias", 23: "self_attn.v_proj.bias",
             24: "self_attn.o_proj.bias", 25: "self_attn.q_norm.weight",
             26: "self_attn.k_norm.weight", 27: "post_attention_layernorm.weight",
             28: "input_layernorm.bias", 29: "post_attention_layernorm.bias",
             30: "self_attn.sinks"}
    return {(role, layer, GLOBAL): sd[p + n] for role, n in names.items() if p + n in sd}


def _gpt_oss_tensors(sd: dict, p: str, layer: int) -> dict:
    """gpt-oss: router bias; gate_up_proj [E, H, 2I] with gate/up alternating columns,
    down_proj [E, I, H]; their biases (gate_up's alternating too)."""
    b = p + "mlp."
    gate_up, bias = sd[b + "experts.gate_up_proj"], sd[b + "experts.gate_up_proj_bias"]
    out = {(39, layer, GLOBAL): sd[b + "router.bias"], (40, layer, GLOBAL): sd[b + "router.weight"],
           (46, layer, GLOBAL): np.concatenate([bias[:, 0::2], bias[:, 1::2]], axis=1),
           (47, layer, GLOBAL): sd[b + "experts.down_proj_bias"]}
    for e in range(gate_up.shape[0]):
        out[(48, layer, e)] = gate_up[e][:, 0::2].T
        out[(49, layer, e)] = gate_up[e][:, 1::2].T
        out[(50, layer, e)] = sd[b + "experts.down_proj"][e].T
    return out


def _ffn_tensors(sd: dict, p: str, layer: int, family: str) -> dict:
    if family in GRANITE:
        return _granite_tensors(sd, p, layer, family)
    if family == "gpt_oss":
        return _gpt_oss_tensors(sd, p, layer)
    if family == "llama4_text":
        return llama4_ffn_tensors(sd, p, layer)
    if p + "mlp.experts.gate_up_proj" not in sd:
        return {(role, layer, GLOBAL): sd[f"{p}mlp.{n}_proj.weight"]
                for role, n in ((32, "gate"), (33, "up"), (34, "down"))}
    router = p + {"phimoe": "mlp.router.weight",
                  "hunyuan_v1_moe": "mlp.gate.wg.weight",
                  "afmoe": "mlp.router.gate.weight"}.get(family, "mlp.gate.weight")
    out = {(40, layer, GLOBAL): sd[router]}
    if family == "minimax_m2":
        out[(45, layer, GLOBAL)] = sd[p + "mlp.e_score_correction_bias"]
    if family == "hunyuan_v1_moe":
        out |= {(role, layer, GLOBAL): sd[f"{p}mlp.shared_mlp.{n}_proj.weight"]
                for role, n in ((41, "gate"), (42, "up"), (43, "down"))}
    if family == "ernie4_5_moe":
        out |= {(role, layer, GLOBAL): sd[f"{p}mlp.shared_experts.{n}_proj.weight"]
                for role, n in ((41, "gate"), (42, "up"), (43, "down"))}
        out[(45, layer, GLOBAL)] = sd[p + "mlp.gate.moe_statics.e_score_correction_bias"][0]
    if family in SIGMOID or family in MLA or family == "afmoe":
        out |= {(role, layer, GLOBAL): sd[f"{p}mlp.shared_experts.{n}_proj.weight"]
                for role, n in ((41, "gate"), (42, "up"), (43, "down"))}
    if family in SIGMOID:
        out[(45, layer, GLOBAL)] = sd[p + "mlp.gate.e_score_correction_bias"]
    if family == "qwen2_moe":
        out |= {(role, layer, GLOBAL): sd[f"{p}mlp.shared_expert.{n}_proj.weight"]
                for role, n in ((41, "gate"), (42, "up"), (43, "down"))}
        out[(44, layer, GLOBAL)] = sd[p + "mlp.shared_expert_gate.weight"]
    return _experts(out, sd[p + "mlp.experts.gate_up_proj"], sd[p + "mlp.experts.down_proj"], layer)


def _mimo_ffn(sd: dict, p: str, layer: int) -> dict:
    """MiMo-V2-Flash's FFN: a dense MLP, or DeepSeek-V3's router and its
    correction bias over fused experts, without shared experts."""
    if p + "mlp.experts.gate_up_proj" not in sd:
        return {(role, layer, GLOBAL): sd[f"{p}mlp.{n}_proj.weight"]
                for role, n in ((32, "gate"), (33, "up"), (34, "down"))}
    out = {(40, layer, GLOBAL): sd[p + "mlp.gate.weight"],
           (45, layer, GLOBAL): sd[p + "mlp.gate.e_score_correction_bias"]}
    return _experts(out, sd[p + "mlp.experts.gate_up_proj"], sd[p + "mlp.experts.down_proj"], layer)


def _experts(out: dict, gate_up: np.ndarray, down: np.ndarray, layer: int) -> dict:
    inter = gate_up.shape[1] // 2
    for e in range(gate_up.shape[0]):
        out[(48, layer, e)] = gate_up[e, :inter]
        out[(49, layer, e)] = gate_up[e, inter:]
        out[(50, layer, e)] = down[e]
    return out


def _granite_tensors(sd: dict, p: str, layer: int, family: str) -> dict:
    """Granite: router `block_sparse_moe.router.weight`, shared MLP
    `shared_mlp.input_linear` (gate rows, then up rows) / `output_linear`."""
    b = p + "block_sparse_moe."
    out = {(40, layer, GLOBAL): sd[b + "router.weight"]}
    if family == "granitemoeshared":
        fused = sd[p + "shared_mlp.input_linear.weight"]
        width = fused.shape[0] // 2
        out |= {(41, layer, GLOBAL): fused[:width], (42, layer, GLOBAL): fused[width:],
                (43, layer, GLOBAL): sd[p + "shared_mlp.output_linear.weight"]}
    return _experts(out, sd[b + "experts.gate_up_proj"], sd[b + "experts.down_proj"], layer)


def expected_tensors(model: Any, family: str, dtype: torch.dtype = torch.float32) -> dict:
    """(role, layer, expert) -> float32 array, from the in-memory (fused) parameters,
    rounded through `dtype` first."""
    sd = {k: v.detach().to(dtype).float().numpy() for k, v in model.state_dict().items()}
    if family == "dbrx":
        return dbrx_tensors(sd, model)
    if family == "jetmoe":
        return jetmoe_tensors(sd, model)
    if family == "longcat_flash":
        return longcat_tensors(sd, model)
    if family == "mimo_v2_flash":
        return mimo_tensors(sd, model, _mimo_ffn)
    if family == "lfm2_moe":
        return lfm2_tensors(sd, model)
    if family == "granitemoehybrid":
        return granite_hybrid_tensors(sd, model)
    if family in ("qwen3_next", "qwen3_5_moe"):
        return qwen3_next_tensors(sd, model)
    if family in ("kimi_linear", "bailing_hybrid"):
        return kimi_linear_tensors(sd, model)
    if family == "jamba":
        return jamba_tensors(sd, model)
    if family == "nemotron_h":
        return nemotron_tensors(sd, model)
    out = {(1, GLOBAL, GLOBAL): sd["model.embed_tokens.weight"],
           (2, GLOBAL, GLOBAL): sd["model.norm.weight"]}
    if not model.config.tie_word_embeddings:
        out[(3, GLOBAL, GLOBAL)] = sd["lm_head.weight"]
    for role, name in ((4, "model.norm.bias"), (5, "lm_head.bias")):
        if name in sd:
            out[(role, GLOBAL, GLOBAL)] = sd[name]
    for layer in range(model.config.num_hidden_layers):
        p = f"model.layers.{layer}."
        out |= _attention_tensors(sd, p, layer) | _ffn_tensors(sd, p, layer, family)
        if QK_NORM.get(family) == 3:  # Hunyuan's q/k norms, named for their place after RoPE
            out[(25, layer, GLOBAL)] = sd[p + "self_attn.query_layernorm.weight"]
            out[(26, layer, GLOBAL)] = sd[p + "self_attn.key_layernorm.weight"]
        if NORM_KIND.get(family) == 2:  # the attention's and the FFN's norms come after them
            out[(16, layer, GLOBAL)] = sd[p + "post_attention_layernorm.weight"]
            out[(27, layer, GLOBAL)] = sd[p + "post_feedforward_layernorm.weight"]
        if family == "afmoe":
            out |= afmoe_tensors(sd, p, layer)
        if family in ("ernie4_5_moe", "llama4_text"):  # RoPE pairs (2i, 2i+1) -> (i, i + hd/2)
            hd = model.model.layers[layer].self_attn.head_dim
            for role in (17, 18):
                rows = out[(role, layer, GLOBAL)]
                heads = rows.reshape(-1, hd // 2, 2, rows.shape[1])
                out[(role, layer, GLOBAL)] = heads.transpose(0, 2, 1, 3).reshape(rows.shape)
        if family in MLA:
            _mla_interleave(model, out, layer)
    return out


def _mla_interleave(model: Any, out: dict, layer: int) -> None:
    """Interleaved RoPE (V2; V3 with rope_interleave): each q head's last rope_dim
    rows and the RoPE key's rows of MLA_KV_A, pairs (2i, 2i+1) -> (i, i + d/2)."""
    config, attn = model.config, model.model.layers[layer].self_attn
    if not getattr(config, "rope_interleave", True):
        return
    d, hd = attn.qk_rope_head_dim, attn.qk_head_dim

    def halves(rows: np.ndarray) -> np.ndarray:
        return rows.reshape(d // 2, 2, -1).transpose(1, 0, 2).reshape(rows.shape)
    q_role = 66 if (66, layer, GLOBAL) in out else 17
    q = out[(q_role, layer, GLOBAL)].copy()
    for h in range(config.num_attention_heads):
        q[h * hd + hd - d:(h + 1) * hd] = halves(q[h * hd + hd - d:(h + 1) * hd])
    kv = out[(67, layer, GLOBAL)].copy()
    kv[attn.kv_lora_rank:] = halves(kv[attn.kv_lora_rank:])
    out[(q_role, layer, GLOBAL)], out[(67, layer, GLOBAL)] = q, kv


def hf_logits(model: Any, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()
