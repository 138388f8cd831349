"""Model families: from a Hugging Face config.json to the image's model record.

Facts follow transformers 5.24 (models/{mixtral,qwen2_moe,olmoe,qwen3_moe}):

- mixtral: softmax top-k always renormalised; experts = num_local_experts of
  width intermediate_size; no biases; head_dim may be None (= hidden / heads); a
  sliding_window shorter than the context applies to every layer (format 1.6).
- qwen2_moe: q, k, v bias when qkv_bias; shared expert (shared_expert_intermediate_size)
  with a sigmoid gate; a layer is dense (intermediate_size) when it is in
  mlp_only_layers, (layer + 1) % decoder_sparse_step != 0 or num_experts == 0;
  experts have width moe_intermediate_size.
- olmoe: q, k, v, o bias when attention_bias; RMSNorm over the whole q and k
  projections (qk_norm 1), which needs head_dim == hidden / heads; no clip_qkv.
- qwen3_moe: q, k, v, o bias when attention_bias; per-head q/k RMSNorm (qk_norm 2);
  dense layers as qwen2_moe.
- granitemoe(shared): top-k of the router logits, softmax over the k; four multipliers.
- phimoe: LayerNorm with bias (eps rms_norm_eps) everywhere; q, k, v, o bias when
  attention_bias, LM-head bias when lm_head_bias; sparsemixer routing (always two
  experts, each weighted by a softmax over the logits within 2 router_jitter_noise of it,
  relatively); head_dim = hidden / heads; a sliding_window shorter than the context
  applies to every layer (format 1.6).
- ernie4_5_moe: MoE layers where (layer + 1) % moe_layer_interval == 0 and
  moe_layer_start_index <= layer <= moe_layer_end_index (-1: the last), dense ones of
  intermediate_size elsewhere; moe_num_shared_experts shared experts as one ungated MLP of
  moe_num_shared_experts * moe_intermediate_size; router: softmax, top moe_k of softmax +
  e_score_correction_bias, weights the softmax values divided by max(sum, moe_norm_min)
  (router_score 4); RoPE on interleaved pairs (2i, 2i + 1), which the image stores as the
  usual halves by permuting the q and k rows of each head (see tensor_map); tied
  embeddings by default.
- glm4_moe, dots1 (models/{glm4_moe,dots1}): DeepSeek-V3's router (sigmoid scores,
  e_score_correction_bias for selection only, n_group / topk_group with a group ranked
  by its two best, norm_topk_prob, routed_scaling_factor), the first
  first_k_dense_replace layers dense (intermediate_size), n_shared_experts *
  moe_intermediate_size of shared experts without a gate. GLM: q, k, v bias when
  attention_bias, per-head q/k norm when use_qk_norm, RoPE over
  partial_rotary_factor of the head (frequencies of that width). dots1: q, k, v, o bias
  when attention_bias, per-head q/k norm always; sliding layers refused.
- deepseek_v2, deepseek_v3 (models/deepseek_v{2,3}): Multi-head Latent Attention
  (q_lora_rank or a plain q_proj, kv_lora_rank, qk_nope_head_dim + qk_rope_head_dim,
  v_head_dim; the LoRA norms' eps is transformers' default 1e-6), RoPE on interleaved
  pairs (V2 always, V3 when rope_interleave) stored as halves by reordering rows, the
  attention scale times mscale(factor, mscale_all_dim)^2 under YaRN; first_k_dense_replace
  dense layers, n_shared_experts shared experts. V2: softmax, greedy or
  group_limited_greedy (groups ranked by their best score), no renormalisation, routed
  scaling; V3: the sigmoid router above. attention_bias true is refused.
- YaRN (rope_type "yarn") for the families that have RoPE parameters: the record's
  rope_kind 1 with the ramp and cos/sin factor transformers computes.
- gpt_oss: per-head attention sinks; layer_types "sliding_attention" layers attend to the
  last sliding_window positions (their own included), "full_attention" to all; q, k, v, o
  biases (attention_bias); router with a bias, top-k of its logits, softmax over the k;
  experts with biases and the clamped SwiGLU (swiglu_limit, swiglu_alpha, (up + 1)); gate
  and up interleaved in the checkpoint (columns 0, 2, 4 ... gate, 1, 3, 5 ... up); YaRN
  (its checkpoints' truncate false) through rope_fields.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from pathlib import Path

from ..image.image_layout import (
    MAX_ROUTER_JITTER,
    MAX_ROUTER_NORM_MIN,
    MAX_SCALE,
    model_problems,
)
from ..image.image_spec import (
    ACT_SWIGLU_CLAMPED,
    ATTN_NONE,
    ATTN_SLIDING,
    BIAS_EXPERTS,
    BIAS_LM_HEAD,
    BIAS_ROUTER,
    BIAS_SINKS,
    DEFAULT_ALIGNMENT,
    MODEL_RECORD_FIELDS,
    NORM_LAYER,
    RECURRENT_KINDS,
    ROUTER_SOFTMAX_BIASED,
    ROUTER_SPARSEMIXER,
    ROUTER_TOPK_SOFTMAX,
    Arch,
    FfnKind,
    ModelRecord,
)
from . import families_recent as recent
from .family_fields import (
    ALL_BIASES,
    MAX_CONTEXT_CAP,
    QKV_BIASES,
    attention_fields,
    attention_layer_kinds,
    check_common,
    dense_width,
    expert_count,
    granite_scales,
    mla_fields,
    qwen_ffn_kinds,
    rope_fields,
    rope_theta,
    routing_fields,
    sigmoid_router,
)
from .hf_config import HFConfig
from .multimodal import text_config

# Record field -> the config field it comes from, to name it in errors.
_SOURCE_FIELDS = {
    "vocab_size": "vocab_size", "hidden_size": "hidden_size", "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads",
    "head_dim": "head_dim", "max_context": "max_position_embeddings",
    "dense_intermediate": "intermediate_size", "shared_intermediate": "shared_expert_intermediate_size",
    "top_k": "num_experts_per_tok", "rms_eps": "rms_norm_eps", "rope_theta": "rope_theta",
    "routed_scaling": "routed_scaling_factor", "rope_dim": "partial_rotary_factor",
    "rope_factor": "rope_parameters.factor", "qkv_clip": "attn_config.clip_qkv",
    "attn_temp_floor": "floor_scale", "attn_temp_scale": "attn_scale",
    "zero_experts": "zero_expert_num", "conv_kernel": "conv_L_cache",
}
# Granite-4.0-H's Mamba2 sizes.
_MAMBA2_SOURCE_FIELDS = {
    "conv_kernel": "mamba_d_conv", "ssm_heads": "mamba_n_heads", "ssm_head_dim": "mamba_d_head",
    "ssm_state": "mamba_d_state", "ssm_groups": "mamba_n_groups", "ssm_dt_rank": "mamba_dt_rank",
}
# Nemotron-H's Mamba2 sizes and experts.
_NEMOTRON_SOURCE_FIELDS = {
    "conv_kernel": "conv_kernel", "ssm_heads": "mamba_num_heads", "ssm_head_dim": "mamba_head_dim",
    "ssm_state": "ssm_state_size", "ssm_groups": "n_groups", "ssm_dt_min": "time_step_min",
    "n_experts": "n_routed_experts", "dense_intermediate": "intermediate_size",
}
# Qwen3-Next's gated delta sizes.
_DELTA_SOURCE_FIELDS = {
    "conv_kernel": "linear_conv_kernel_dim", "ssm_heads": "linear_num_value_heads",
    "ssm_head_dim": "linear_value_head_dim", "ssm_state": "linear_key_head_dim",
    "ssm_groups": "linear_num_key_heads",
}
# DBRX names its fields otherwise, some under attn_config and ffn_config.
_DBRX_SOURCE_FIELDS = {
    "hidden_size": "d_model", "n_layers": "n_layers", "n_heads": "n_heads",
    "n_kv_heads": "attn_config.kv_n_heads", "head_dim": "d_model",
    "max_context": "max_seq_len", "expert_intermediate": "ffn_config.ffn_hidden_size",
    "n_experts": "ffn_config.moe_num_experts", "top_k": "ffn_config.moe_top_k",
}


@dataclass(frozen=True)
class ModelSpec:
    """What a checkpoint becomes: family, arch, model record and each layer's FFN kind."""

    family: str
    arch: Arch
    record: ModelRecord
    ffn_kinds: list[int]
    config: HFConfig
    attn_kinds: list[int] | None = None  # per layer, format 1.6; None: all full attention

    @property
    def moe_layers(self) -> list[int]:
        return [i for i, k in enumerate(self.ffn_kinds) if k in (FfnKind.MOE, FfnKind.SHORTCUT)]

    @property
    def ffn_only_layers(self) -> int:
        """Layers without an operator (attn_kind 9, format 1.14): no KV cache."""
        return sum(kind == ATTN_NONE for kind in self.attn_kinds or ())

    @property
    def conv_layers(self) -> int:
        """Recurrent layers (a short convolution, 1.13, or Mamba2, 1.14, in place
        of attention): rows in the state, no KV cache."""
        return sum(kind in RECURRENT_KINDS for kind in self.attn_kinds or ())

    @property
    def interleaved_rope(self) -> bool:
        """RoPE on pairs (2i, 2i + 1) in the checkpoint: q and k rows get permuted."""
        if self.family in ("deepseek_v3", "glm4_moe_lite"):  # rope_interleave, True by default
            return self.config.flag("rope_interleave", True)
        return self.family in INTERLEAVED_ROPE_FAMILIES


def _reject_sliding_window_qwen(c: HFConfig) -> None:
    c.reject_if("use_sliding_window", bool, "sliding-window attention is not supported")
    c.reject_if("layer_types", lambda v: isinstance(v, list) and any(t != "full_attention" for t in v),
                "only full attention layers are supported")


def _mixtral(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    fields = attention_fields(c, "head_dim")
    fields["sliding_window"] = _uniform_window(c)
    kinds = [FfnKind.MOE] * fields["n_layers"]
    n_experts = expert_count(c, ("num_local_experts", "num_experts"))
    fields |= routing_fields(c, kinds, n_experts, c.integer("intermediate_size", minimum=1), True)
    fields |= {"rope_theta": rope_theta(c, 1e6), "rms_eps": c.number("rms_norm_eps", 1e-5)}
    return Arch.MIXTRAL, fields, kinds


def _qwen_common(c: HFConfig) -> tuple[dict, list[int]]:
    """What Qwen2-MoE and Qwen3-MoE configs share: attention, layer kinds, routing."""
    _reject_sliding_window_qwen(c)
    fields = attention_fields(c, "head_dim")
    _, n_experts = c.first_integer(("num_experts", "num_local_experts"))   # 0: all dense
    kinds = qwen_ffn_kinds(c, fields["n_layers"], n_experts)
    moe_width = c.integer("moe_intermediate_size", minimum=1) if n_experts else 0
    fields |= routing_fields(c, kinds, n_experts, moe_width, c.flag("norm_topk_prob", False))
    return fields, kinds


def _qwen2_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    fields, kinds = _qwen_common(c)
    shared = c.integer("shared_expert_intermediate_size", 0) if FfnKind.MOE in kinds else 0
    fields |= {"dense_intermediate": dense_width(c, kinds), "shared_intermediate": shared,
               "shared_gate": int(shared > 0),
               "attn_bias": QKV_BIASES if c.flag("qkv_bias", True) else 0,
               "rope_theta": rope_theta(c, 1e4), "rms_eps": c.number("rms_norm_eps", 1e-6)}
    return Arch.QWEN2_MOE, fields, kinds


def _olmoe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    c.reject_if("clip_qkv", lambda v: v is not None, "clipping q, k and v is not supported")
    fields = attention_fields(c, "head_dim")
    hidden, heads = fields["hidden_size"], fields["n_heads"]
    if hidden % heads or fields["head_dim"] != hidden // heads:
        raise c.unsupported("head_dim", fields["head_dim"], f"OLMoE's q/k norm needs head_dim == "
                            f"hidden_size / num_attention_heads ({hidden} / {heads})")
    kinds = [FfnKind.MOE] * fields["n_layers"]
    n_experts = expert_count(c, ("num_experts", "num_local_experts"))
    fields |= routing_fields(c, kinds, n_experts, c.integer("intermediate_size", minimum=1),
                       c.flag("norm_topk_prob", False))
    fields |= {"attn_bias": ALL_BIASES if c.flag("attention_bias", False) else 0, "qk_norm": 1,
               "rope_theta": rope_theta(c, 1e4), "rms_eps": c.number("rms_norm_eps", 1e-5)}
    return Arch.OLMOE, fields, kinds


def _qwen3_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    fields, kinds = _qwen_common(c)
    fields |= {"dense_intermediate": dense_width(c, kinds),
               "attn_bias": ALL_BIASES if c.flag("attention_bias", False) else 0, "qk_norm": 2,
               "rope_theta": rope_theta(c, 1e4), "rms_eps": c.number("rms_norm_eps", 1e-6)}
    return Arch.QWEN3_MOE, fields, kinds


def _granitemoe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """GraniteMoE (and, with a shared MLP, GraniteMoeShared): Mixtral-like
    attention and experts, top-k of the router logits then a softmax over the
    k, and four multipliers."""
    c.reject_if("attention_bias", bool, "attention biases are not supported for granitemoe")
    fields = attention_fields(c, None)
    kinds = [FfnKind.MOE] * fields["n_layers"]
    n_experts = expert_count(c, ("num_local_experts", "num_experts"))
    fields |= routing_fields(c, kinds, n_experts, c.integer("intermediate_size", minimum=1), False)
    shared = c.integer("shared_intermediate_size", 0)
    fields |= {"router_score": ROUTER_TOPK_SOFTMAX, "shared_intermediate": shared,
               "rope_theta": rope_theta(c, 1e4), "rms_eps": c.number("rms_norm_eps", 1e-6),
               **granite_scales(c)}
    return (Arch.GRANITEMOE_SHARED if shared else Arch.GRANITEMOE), fields, kinds


def _uniform_window(c: HFConfig) -> int:
    """Mixtral's and PhiMoE's sliding_window, which every layer uses (transformers
    masks with it whenever it is set): 0 when absent or as long as the context,
    where it changes nothing."""
    if c.raw("sliding_window") is None:
        return 0
    window = c.integer("sliding_window", minimum=1)
    return window if window < c.integer("max_position_embeddings", minimum=1) else 0


def _uniform_window_kinds(c: HFConfig, n_layers: int) -> list[int] | None:
    return [ATTN_SLIDING] * n_layers if _uniform_window(c) else None


def _phimoe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """PhiMoE: Mixtral-like attention and experts with LayerNorm (and biases)
    and the sparsemixer router."""
    fields = attention_fields(c, None)
    fields["sliding_window"] = _uniform_window(c)
    c.reject_if("num_experts_per_tok", lambda v: v != 2,
                "PhiMoE's sparsemixer routes every token to exactly 2 experts")
    jitter = c.number("router_jitter_noise", 0.01)
    if not 0.0 <= jitter <= MAX_ROUTER_JITTER:
        raise c.unsupported("router_jitter_noise", jitter, "must be 0 .. 1")
    kinds = [FfnKind.MOE] * fields["n_layers"]
    n_experts = expert_count(c, ("num_local_experts", "num_experts"))
    fields |= routing_fields(c, kinds, n_experts, c.integer("intermediate_size", minimum=1), False)
    biases = (ALL_BIASES if c.flag("attention_bias", False) else 0) | \
        (BIAS_LM_HEAD if c.flag("lm_head_bias", False) else 0)
    fields |= {"router_score": ROUTER_SPARSEMIXER, "router_jitter": jitter,
               "norm_kind": NORM_LAYER, "attn_bias": biases,
               "rope_theta": rope_theta(c, 1e6), "rms_eps": c.number("rms_norm_eps", 1e-5)}
    return Arch.PHIMOE, fields, kinds


def _ernie_ffn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    start = c.integer("moe_layer_start_index", 1)
    end = c.get("moe_layer_end_index", -1)
    if end == -1:
        end = n_layers - 1
    elif not isinstance(end, int) or isinstance(end, bool) or end < 0:
        raise c.unsupported("moe_layer_end_index", end, "must be -1 or a layer index")
    interval = c.integer("moe_layer_interval", 1, minimum=1)
    return [FfnKind.MOE if (i + 1) % interval == 0 and start <= i <= end else FfnKind.DENSE
            for i in range(n_layers)]


def _ernie4_5_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """ERNIE-4.5 MoE: dense and MoE layers by start/end/interval, shared experts,
    softmax router with a selection bias and a floor on the weights' sum."""
    c.reject_if("use_bias", bool, "biases on projections and MLPs are not supported")
    fields = attention_fields(c, "head_dim")
    fields["tie_embeddings"] = int(c.flag("tie_word_embeddings", True))
    n_experts = expert_count(c, ("moe_num_experts", "num_experts"))
    kinds = _ernie_ffn_kinds(c, fields["n_layers"])
    norm_min = c.number("moe_norm_min", 1e-12)
    if not 0.0 <= norm_min <= MAX_ROUTER_NORM_MIN:
        raise c.unsupported("moe_norm_min", norm_min, "must be 0 .. 1")
    moe = FfnKind.MOE in kinds
    width = c.integer("moe_intermediate_size", minimum=1) if moe else 0
    shared = c.integer("moe_num_shared_experts", 0) * width
    fields |= {"n_experts": n_experts if moe else 0, "expert_intermediate": width,
               "top_k": c.first_integer(("moe_k", "num_experts_per_tok"), minimum=1)[1]
               if moe else 0, "router_norm_topk": int(moe),
               "router_score": ROUTER_SOFTMAX_BIASED if moe else 0,
               "router_norm_min": norm_min if moe else 0.0,
               "dense_intermediate": dense_width(c, kinds), "shared_intermediate": shared,
               "rope_theta": rope_theta(c, 500000.0), "rms_eps": c.number("rms_norm_eps", 1e-5)}
    return Arch.ERNIE4_5_MOE, fields, kinds


def _first_dense_kinds(c: HFConfig, n_layers: int) -> list[int]:
    """DeepSeek-style layer kinds: the first first_k_dense_replace layers dense."""
    dense = c.integer("first_k_dense_replace", 0)
    return [FfnKind.DENSE if i < dense else FfnKind.MOE for i in range(n_layers)]


def _glm4_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    fields = attention_fields(c, "head_dim")
    kinds = _first_dense_kinds(c, fields["n_layers"])
    fields |= sigmoid_router(c, kinds, True)
    fields |= {"attn_bias": QKV_BIASES if c.flag("attention_bias", False) else 0,
               "qk_norm": 2 if c.flag("use_qk_norm", False) else 0,
               "rms_eps": c.number("rms_norm_eps", 1e-5),
               **rope_fields(c, fields["head_dim"], 1e4, partial=True)}
    return Arch.GLM4_MOE, fields, kinds


def _dots1(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    fields = attention_fields(c, "head_dim")
    types = c.raw("layer_types")
    if types is None:  # Dots1Config's rule: sliding from max_window_layers on
        window, start = c.raw("sliding_window"), c.integer("max_window_layers", fields["n_layers"])
        types = ["sliding_attention" if window is not None and i >= start else "full_attention"
                 for i in range(fields["n_layers"])]
    if any(t != "full_attention" for t in types):
        raise c.unsupported("layer_types", types, "only full attention layers are supported "
                            "(sliding_window / max_window_layers)")
    kinds = _first_dense_kinds(c, fields["n_layers"])
    fields |= sigmoid_router(c, kinds, False)
    fields |= {"attn_bias": ALL_BIASES if c.flag("attention_bias", False) else 0, "qk_norm": 2,
               "rms_eps": c.number("rms_norm_eps", 1e-6), **rope_fields(c, fields["head_dim"], 1e4)}
    return Arch.DOTS1, fields, kinds




def _gpt_oss_attn_kinds(c: HFConfig, n_layers: int) -> list[int] | None:
    """layer_types, or transformers' default: odd layers (1, 3, ...) full."""
    types = c.raw("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
    return attention_layer_kinds(c, types, n_layers)


def _gpt_oss(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """gpt-oss: sinks, alternating sliding-window and full attention, biases
    everywhere, top-k-then-softmax router with a bias, clamped SwiGLU experts."""
    c.reject_if("quantization_config", lambda v: v is not None,
                "quantized (MXFP4) checkpoints are not supported: dequantize to bf16 or f32")
    fields = attention_fields(c, "head_dim")
    kinds = [FfnKind.MOE] * fields["n_layers"]
    attn = _gpt_oss_attn_kinds(c, fields["n_layers"])
    window = c.integer("sliding_window", minimum=1) if ATTN_SLIDING in attn else 0
    n_experts = expert_count(c, ("num_local_experts", "num_experts"))
    fields |= routing_fields(c, kinds, n_experts, c.integer("intermediate_size", minimum=1), False)
    limit, alpha = c.number("swiglu_limit", 7.0), c.number("swiglu_alpha", 1.702)
    for key, value in (("swiglu_limit", limit), ("swiglu_alpha", alpha)):
        if not 0.0 < value <= MAX_SCALE:
            raise c.unsupported(key, value, "must be > 0 and <= 65536")
    biases = (ALL_BIASES if c.flag("attention_bias", True) else 0) | BIAS_SINKS | BIAS_ROUTER | \
        BIAS_EXPERTS
    fields |= {"router_score": ROUTER_TOPK_SOFTMAX, "attn_bias": biases,
               "sliding_window": min(window, MAX_CONTEXT_CAP), "activation": ACT_SWIGLU_CLAMPED,
               "swiglu_limit": limit, "swiglu_alpha": alpha,
               "rms_eps": c.number("rms_norm_eps", 1e-5),
               **rope_fields(c, fields["head_dim"], 150000.0)}
    return Arch.GPT_OSS, fields, kinds


def _deepseek_v2(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """DeepSeek-V2: MLA with interleaved RoPE, a softmax router (greedy or
    group-limited greedy: groups ranked by their best score), no renormalisation."""
    fields = attention_fields(c, None)
    kinds = _first_dense_kinds(c, fields["n_layers"])
    method = c.get("topk_method", "greedy")
    if method not in ("greedy", "group_limited_greedy"):
        raise c.unsupported("topk_method", method, "DeepSeek-V2's routers are greedy and "
                            "group_limited_greedy")
    n_experts = expert_count(c, ("n_routed_experts",))
    width = c.integer("moe_intermediate_size", minimum=1)
    fields |= routing_fields(c, kinds, n_experts, width, False)
    if FfnKind.MOE in kinds:
        grouped = method == "group_limited_greedy"
        fields |= {"n_group": c.integer("n_group", minimum=1) if grouped else 1,
                   "topk_group": c.integer("topk_group", minimum=1) if grouped else 1,
                   "routed_scaling": c.number("routed_scaling_factor", 1.0),
                   "shared_intermediate": c.integer("n_shared_experts", 0) * width}
    fields |= {"dense_intermediate": dense_width(c, kinds),
               "rms_eps": c.number("rms_norm_eps", 1e-6), **mla_fields(c, fields)}
    return Arch.DEEPSEEK_V2, fields, kinds


def _deepseek_v3(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """DeepSeek-V3 (and Moonlight): MLA (RoPE interleaved when
    rope_interleave) and the sigmoid router."""
    fields = attention_fields(c, None)
    kinds = _first_dense_kinds(c, fields["n_layers"])
    fields |= sigmoid_router(c, kinds, True)
    fields |= {"rms_eps": c.number("rms_norm_eps", 1e-6), **mla_fields(c, fields)}
    return Arch.DEEPSEEK_V3, fields, kinds


FAMILIES = {"mixtral": _mixtral, "qwen2_moe": _qwen2_moe, "olmoe": _olmoe, "qwen3_moe": _qwen3_moe,
            "granitemoe": _granitemoe, "granitemoeshared": _granitemoe, "phimoe": _phimoe,
            "ernie4_5_moe": _ernie4_5_moe, "glm4_moe": _glm4_moe, "dots1": _dots1,
            "gpt_oss": _gpt_oss, "deepseek_v2": _deepseek_v2, "deepseek_v3": _deepseek_v3,
            **recent.FAMILIES}
INTERLEAVED_ROPE_FAMILIES = {"ernie4_5_moe", "deepseek_v2", "llama4_text", "longcat_flash",
                             "bailing_hybrid"}
ATTN_KINDS = {"gpt_oss": _gpt_oss_attn_kinds, "mixtral": _uniform_window_kinds,
              "phimoe": _uniform_window_kinds, **recent.ATTN_KINDS}

_RECORD_DEFAULTS = {"dense_intermediate": 0, "shared_intermediate": 0}


def _present(c: HFConfig, keys: tuple[str, ...]) -> str:
    """The first of `keys` the config has (the first if none)."""
    return next((k for k in keys if c.raw(k) is not None), keys[0])


def _float32(value: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def _as_stored(record: ModelRecord) -> ModelRecord:
    """The record as the image will hold it: every float field rounded to
    float32 (an rms_norm_eps of 1e-50 becomes 0.0)."""
    return replace(record, **{name: _float32(getattr(record, name))
                              for name, _, fmt in MODEL_RECORD_FIELDS if fmt == "f"})


def _check_limits(c: HFConfig, arch: Arch, record: ModelRecord, kinds: list[int]) -> None:
    """The record's checks on the values the image will store, each failure
    reported against the config field it comes from."""
    stored = _as_stored(record)
    for p in model_problems(arch, DEFAULT_ALIGNMENT, stored, kinds):
        source = _SOURCE_FIELDS.get(p.field, p.field)
        reason = f"{p.field} {p.reason}"
        before = getattr(record, p.field, None)
        if isinstance(before, float) and before != p.value:
            reason += f" (float32 holds {before!r} as {p.value!r})"
        if p.field == "expert_intermediate":
            plain = arch in (Arch.MIXTRAL, Arch.OLMOE, Arch.PHIMOE, Arch.GRANITEMOE, Arch.JAMBA,
                             Arch.GRANITEMOE_SHARED, Arch.GRANITEMOE_HYBRID, Arch.FLEX_OLMO,
                             Arch.HUNYUAN_V1_MOE, Arch.MINIMAX_M2)
            source = "intermediate_size" if plain else "moe_intermediate_size"
        if p.field == "n_experts":
            source = _present(c, ("num_local_experts", "num_experts", "moe_num_experts",
                                  "n_routed_experts"))
        if p.field == "top_k":
            source = _present(c, ("num_experts_per_tok", "moe_k", "moe_topk"))
        if arch == Arch.DBRX:
            source = _DBRX_SOURCE_FIELDS.get(p.field, source)
        if arch in (Arch.GRANITEMOE_HYBRID, Arch.JAMBA):
            source = _MAMBA2_SOURCE_FIELDS.get(p.field, source)
        if arch == Arch.NEMOTRON_H:
            source = _NEMOTRON_SOURCE_FIELDS.get(p.field, source)
        if arch in (Arch.QWEN3_NEXT, Arch.QWEN3_5_MOE):
            source = _DELTA_SOURCE_FIELDS.get(p.field, source)
        raise c.unsupported(source, c.raw(source) if c.raw(source) is not None else p.value,
                            reason)


def model_spec(config: dict, path: str | Path) -> ModelSpec:
    """Map a config.json (already parsed) to the image's model record (a
    multimodal one's text model: multimodal.py)."""
    config = text_config(config, path)
    c = HFConfig(config, path)
    family = config.get("model_type")
    if not isinstance(family, str):
        raise c.unsupported("model_type", family, f"must be a string; supported: {', '.join(FAMILIES)}")
    if family not in FAMILIES:
        raise c.unsupported("model_type", family, f"supported: {', '.join(FAMILIES)}")
    check_common(c)
    arch, fields, kinds = FAMILIES[family](c)
    record = ModelRecord(**(_RECORD_DEFAULTS | fields))
    _check_limits(c, arch, record, kinds)
    attn = ATTN_KINDS[family](c, record.n_layers) if family in ATTN_KINDS else None
    return ModelSpec(family, arch, record, kinds, c, attn)


def switch_candidate(spec: ModelSpec) -> bool:
    """A qwen2_moe with top-1 unnormalised routing and a shared expert: arch 5 if the
    shared expert turns out to be all zeros."""
    r = spec.record
    return (spec.arch == Arch.QWEN2_MOE and r.top_k == 1 and r.router_norm_topk == 0
            and r.shared_intermediate > 0)


def as_switch(spec: ModelSpec) -> ModelSpec:
    """The same model as arch 5 without its (all-zero) shared expert."""
    record = replace(spec.record, shared_intermediate=0, shared_gate=0)
    return replace(spec, arch=Arch.SWITCH, record=record)
