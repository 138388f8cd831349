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
- flex_olmo (models/flex_olmo): OLMoE's attention and router (q/k norms of
  num_heads * head_dim and num_kv_heads * head_dim), OLMo-2's norms:
  post_attention_layernorm on the attention's output and post_feedforward_layernorm
  on the MoE's, each before its residual add (norm_kind 2, format 1.10).
- hunyuan_v1_moe (models/hunyuan_v1_moe): query_layernorm / key_layernorm per head
  after RoPE (qk_norm 3, format 1.10); router mlp.gate.wg, softmax top moe_topk always
  renormalised; shared_mlp (ungated) and experts both of intermediate_size;
  num_experts / moe_topk may be per-layer lists of one value; RoPE default or NTK
  alpha ("dynamic" with alpha: the base times alpha ** (head_dim / (head_dim - 2))).
- glm4_moe_lite (models/glm4_moe_lite, GLM-4.7-Flash): DeepSeek-V3's MLA (RoPE
  interleaved when rope_interleave) and router, its dense and sparse layers from
  mlp_layer_types; multi-token-prediction layers past the last one are skipped.
- minimax_m2 (models/minimax_m2): q/k norms over the whole projections, partial RoPE
  (rotary_dim, as its checkpoints write it, or partial_rotary_factor), the sigmoid
  router with its correction bias (mlp.e_score_correction_bias) and no groups.
- exaone_moe (models/exaone_moe): per-head q/k norm before RoPE; layer_types (or
  sliding_window_pattern) give sliding layers, which turn q and k, and global ones,
  which do not when a sliding_window is set (attn_kind 2, format 1.10); DeepSeek-V3's
  router (num_experts, num_shared_experts), dense layers by mlp_layer_types or
  first_k_dense_replace.
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
    ATTN_FULL,
    ATTN_FULL_NOPE,
    ATTN_SLIDING,
    BIAS_EXPERTS,
    BIAS_LM_HEAD,
    BIAS_ROUTER,
    BIAS_SINKS,
    DEFAULT_ALIGNMENT,
    MLA_LATENT,
    MODEL_RECORD_FIELDS,
    NORM_LAYER,
    NORM_RMS_POST,
    ROUTER_SIGMOID,
    ROUTER_SOFTMAX_BIASED,
    ROUTER_SPARSEMIXER,
    ROUTER_TOPK_SOFTMAX,
    Arch,
    FfnKind,
    ModelRecord,
)
from .family_fields import (
    ALL_BIASES,
    MAX_CONTEXT_CAP,
    QKV_BIASES,
    attention_fields,
    check_common,
    dense_width,
    expert_count,
    rope_fields,
    rope_parameters,
    rope_theta,
    routing_fields,
)
from .hf_config import HFConfig

# Record field -> the config field it comes from, to name it in errors.
_SOURCE_FIELDS = {
    "vocab_size": "vocab_size", "hidden_size": "hidden_size", "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads",
    "head_dim": "head_dim", "max_context": "max_position_embeddings",
    "dense_intermediate": "intermediate_size", "shared_intermediate": "shared_expert_intermediate_size",
    "top_k": "num_experts_per_tok", "rms_eps": "rms_norm_eps", "rope_theta": "rope_theta",
    "routed_scaling": "routed_scaling_factor", "rope_dim": "partial_rotary_factor",
    "rope_factor": "rope_parameters.factor",
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
        return [i for i, k in enumerate(self.ffn_kinds) if k == FfnKind.MOE]

    @property
    def interleaved_rope(self) -> bool:
        """RoPE on pairs (2i, 2i + 1) in the checkpoint: q and k rows get permuted."""
        if self.family in ("deepseek_v3", "glm4_moe_lite"):  # rope_interleave, True by default
            return self.config.flag("rope_interleave", True)
        return self.family in INTERLEAVED_ROPE_FAMILIES


def _qwen_ffn_kinds(c: HFConfig, n_layers: int, n_experts: int) -> list[int]:
    mlp_only = c.int_list("mlp_only_layers")
    step = c.integer("decoder_sparse_step", 1, minimum=1)
    return [FfnKind.MOE if (i not in mlp_only and n_experts > 0 and (i + 1) % step == 0)
            else FfnKind.DENSE for i in range(n_layers)]


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
    kinds = _qwen_ffn_kinds(c, fields["n_layers"], n_experts)
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


def _qwen3_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    fields, kinds = _qwen_common(c)
    fields |= {"dense_intermediate": dense_width(c, kinds),
               "attn_bias": ALL_BIASES if c.flag("attention_bias", False) else 0, "qk_norm": 2,
               "rope_theta": rope_theta(c, 1e4), "rms_eps": c.number("rms_norm_eps", 1e-6)}
    return Arch.QWEN3_MOE, fields, kinds


def _granite_scales(c: HFConfig) -> dict:
    """Granite's multipliers, as the record's format 1.1 scales."""
    return {"embedding_scale": c.number("embedding_multiplier", 1.0),
            "residual_scale": c.number("residual_multiplier", 1.0),
            "attention_scale": c.number("attention_multiplier", 1.0),
            "logits_divisor": c.number("logits_scaling", 1.0)}


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
               **_granite_scales(c)}
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


def _sigmoid_router(c: HFConfig, kinds: list[int], norm_default: bool) -> dict:
    """DeepSeek-V3's router (also GLM-4.5's and dots1's), its experts and shared experts."""
    method = c.get("topk_method", "noaux_tc")
    if method != "noaux_tc":
        raise c.unsupported("topk_method", method, "this family's router is noaux_tc (sigmoid "
                            "scores, correction bias)")
    c.reject_if("scoring_func", lambda v: v not in (None, "sigmoid"), "only sigmoid scores")
    n_experts = expert_count(c, ("n_routed_experts",))
    width = c.integer("moe_intermediate_size", minimum=1)
    fields = routing_fields(c, kinds, n_experts, width, c.flag("norm_topk_prob", norm_default))
    if FfnKind.MOE not in kinds:
        return fields | {"dense_intermediate": dense_width(c, kinds)}
    return fields | {
        "router_score": ROUTER_SIGMOID, "n_group": c.integer("n_group", 1, minimum=1),
        "topk_group": c.integer("topk_group", 1, minimum=1),
        "routed_scaling": c.number("routed_scaling_factor", 1.0),
        "shared_intermediate": c.integer("n_shared_experts", 0) * width,
        "dense_intermediate": dense_width(c, kinds)}


def _glm4_moe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    fields = attention_fields(c, "head_dim")
    kinds = _first_dense_kinds(c, fields["n_layers"])
    fields |= _sigmoid_router(c, kinds, True)
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
    fields |= _sigmoid_router(c, kinds, False)
    fields |= {"attn_bias": ALL_BIASES if c.flag("attention_bias", False) else 0, "qk_norm": 2,
               "rms_eps": c.number("rms_norm_eps", 1e-6), **rope_fields(c, fields["head_dim"], 1e4)}
    return Arch.DOTS1, fields, kinds


_LAYER_TYPES = {"full_attention": ATTN_FULL, "sliding_attention": ATTN_SLIDING}


def _gpt_oss_attn_kinds(c: HFConfig, n_layers: int) -> list[int] | None:
    """layer_types, or transformers' default: odd layers (1, 3, ...) full."""
    types = c.raw("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in _LAYER_TYPES for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of "
                            f"{' / '.join(_LAYER_TYPES)}")
    return [_LAYER_TYPES[t] for t in types]


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


def _mla(c: HFConfig, fields: dict) -> dict:
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
               "rms_eps": c.number("rms_norm_eps", 1e-6), **_mla(c, fields)}
    return Arch.DEEPSEEK_V2, fields, kinds


def _deepseek_v3(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """DeepSeek-V3 (and Moonlight): MLA (RoPE interleaved when
    rope_interleave) and the sigmoid router."""
    fields = attention_fields(c, None)
    kinds = _first_dense_kinds(c, fields["n_layers"])
    fields |= _sigmoid_router(c, kinds, True)
    fields |= {"rms_eps": c.number("rms_norm_eps", 1e-6), **_mla(c, fields)}
    return Arch.DEEPSEEK_V3, fields, kinds


def _glm4_moe_lite(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """GLM-4.7-Flash: DeepSeek-V3's Multi-head Latent Attention and GLM-4.5's
    router (DeepSeek-V3's rule), dense and sparse layers as mlp_layer_types
    lists them (its default: the first dense, the rest sparse)."""
    fields = attention_fields(c, None)
    n = fields["n_layers"]
    types = c.raw("mlp_layer_types")
    if types is None:
        types = ["dense"] + ["sparse"] * (n - 1)
    if not isinstance(types, list) or len(types) != n or any(t not in ("dense", "sparse")
                                                           for t in types):
        raise c.unsupported("mlp_layer_types", types, f"must list 'dense' or 'sparse' for each "
                            f"of the {n} layers")
    kinds = [FfnKind.MOE if t == "sparse" else FfnKind.DENSE for t in types]
    fields |= _sigmoid_router(c, kinds, True)
    fields |= {"rms_eps": c.number("rms_norm_eps", 1e-5), **_mla(c, fields)}
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
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in _LAYER_TYPES for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of "
                            f"{' / '.join(_LAYER_TYPES)}")
    if window is None and "sliding_attention" in types:
        raise c.unsupported("layer_types", types, "sliding layers need a sliding_window")
    full = ATTN_FULL if window is None else ATTN_FULL_NOPE
    return [ATTN_SLIDING if t == "sliding_attention" else full for t in types]


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
    if not isinstance(types, list) or len(types) != n or any(t not in ("dense", "sparse")
                                                           for t in types):
        raise c.unsupported("mlp_layer_types", types, f"must list 'dense' or 'sparse' for each "
                            f"of the {n} layers")
    kinds = [FfnKind.MOE if t == "sparse" else FfnKind.DENSE for t in types]
    attn = _exaone_attn_kinds(c, n)
    window = c.integer("sliding_window", minimum=1) if ATTN_SLIDING in attn else 0
    n_experts = expert_count(c, ("num_experts",))
    width = c.integer("moe_intermediate_size", minimum=1)
    fields |= routing_fields(c, kinds, n_experts, width, c.flag("norm_topk_prob", True))
    if FfnKind.MOE in kinds:
        fields |= {"router_score": ROUTER_SIGMOID, "n_group": c.integer("n_group", 1, minimum=1),
                   "topk_group": c.integer("topk_group", 1, minimum=1),
                   "routed_scaling": c.number("routed_scaling_factor", 1.0),
                   "shared_intermediate": c.integer("num_shared_experts", 0) * width}
    fields |= {"dense_intermediate": dense_width(c, kinds), "qk_norm": 2,
               "sliding_window": min(window, MAX_CONTEXT_CAP),
               "rms_eps": c.number("rms_norm_eps", 1e-5),
               **rope_fields(c, fields["head_dim"], 1e6)}
    return Arch.EXAONE_MOE, fields, kinds


FAMILIES = {"mixtral": _mixtral, "qwen2_moe": _qwen2_moe, "olmoe": _olmoe, "qwen3_moe": _qwen3_moe,
            "granitemoe": _granitemoe, "granitemoeshared": _granitemoe, "phimoe": _phimoe,
            "ernie4_5_moe": _ernie4_5_moe, "glm4_moe": _glm4_moe, "dots1": _dots1,
            "gpt_oss": _gpt_oss, "deepseek_v2": _deepseek_v2, "deepseek_v3": _deepseek_v3,
            "flex_olmo": _flex_olmo, "hunyuan_v1_moe": _hunyuan_v1_moe,
            "glm4_moe_lite": _glm4_moe_lite, "minimax_m2": _minimax_m2,
            "exaone_moe": _exaone_moe}
INTERLEAVED_ROPE_FAMILIES = {"ernie4_5_moe", "deepseek_v2"}
ATTN_KINDS = {"gpt_oss": _gpt_oss_attn_kinds, "exaone_moe": _exaone_attn_kinds,
              "mixtral": _uniform_window_kinds,
              "phimoe": _uniform_window_kinds}

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
            plain = arch in (Arch.MIXTRAL, Arch.OLMOE, Arch.PHIMOE, Arch.GRANITEMOE,
                             Arch.GRANITEMOE_SHARED, Arch.FLEX_OLMO, Arch.HUNYUAN_V1_MOE,
                             Arch.MINIMAX_M2)
            source = "intermediate_size" if plain else "moe_intermediate_size"
        if p.field == "n_experts":
            source = _present(c, ("num_local_experts", "num_experts", "moe_num_experts",
                                  "n_routed_experts"))
        if p.field == "top_k":
            source = _present(c, ("num_experts_per_tok", "moe_k"))
        raise c.unsupported(source, c.raw(source) if c.raw(source) is not None else p.value,
                            reason)


def model_spec(config: dict, path: str | Path) -> ModelSpec:
    """Map a config.json (already parsed) to the image's model record."""
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
