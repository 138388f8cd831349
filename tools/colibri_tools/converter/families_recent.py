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
- dbrx: its config nests attention (attn_config: kv_n_heads, clip_qkv, rope_theta)
  and experts (ffn_config: ffn_hidden_size, moe_num_experts, moe_top_k,
  moe_normalize_expert_weights); LayerNorm without biases (norm_kind 1 with zero
  biases), q, k and v clamped to +-clip_qkv (format 1.11), a softmax router whose k
  weights are divided by their sum (p = 1) or left (None); fused expert tensors.
- afmoe: RMSNorm before and after each sublayer (norm_kind 3, format 1.11), the
  attention output gated by sigmoid(gate_proj x) (attn_bias bit 8), per-head q/k norm,
  RoPE only on the sliding layers (the full ones are attn_kind 2), the first
  num_dense_layers dense, the sigmoid router with expert_bias, always renormalised,
  times route_scale; shared experts; muP's embedding scale sqrt(hidden_size).
- llama4_text (Llama 4's text model): MoE on moe_layers (or every
  interleave_moe_layer_step-th), a top-k router whose sigmoid weights scale the
  experts' input (router_score 5), one shared expert; RoPE on interleaved pairs on
  the layers no_rope_layers marks 1, chunked (attention_chunk_size, attn_kind 3)
  by layer_types, the others full without RoPE, their queries tuned by the
  attention temperature (floor_scale, attn_scale); unweighted q/k norm after RoPE
  (use_qk_norm, qk_norm 4), all format 1.11.
- jetmoe: a mixture of attention heads (attn_bias bit 9, format 1.11): each token's
  top num_experts_per_tok of num_local_experts attention experts (logits' top-k,
  softmax over the k) bring num_key_value_heads query heads each over the shared
  keys and values, and their own output projections, weighted, plus a bias; the
  MoE is Granite's router with a bias after the experts' sum (attn_bias bit 10);
  the layers' norms have transformers' fixed eps 1e-6, so rms_norm_eps must be it.
- longcat_flash: each of num_layers decoder layers is two image layers (format 1.12):
  the first a shortcut layer (its dense MLP and, on the same input, the MoE, whose
  output is added after the second layer's MLP), the second dense; MLA with a q LoRA
  and RoPE on interleaved pairs (its RoPE width is head_dim, which must be
  qk_rope_head_dim), the LoRA scales sqrt(hidden / rank) folded into the weights
  (tensor_map_longcat.py); a softmax router over n_routed_experts + zero_expert_num
  (the zero-computation experts), chosen on softmax + e_score_correction_bias, not
  renormalised, times routed_scaling_factor (router_score 4).
- mimo_v2_flash: families_mimo.py.
- lfm2_moe: families_lfm2.py.
- granitemoehybrid: families_granite_hybrid.py.
- qwen3_next, qwen3_5_moe_text: families_qwen3_next.py.
- kimi_linear, bailing_hybrid: families_kimi_linear.py.
- jamba: families_jamba.py.
- nemotron_h: families_nemotron_h.py.
"""

from __future__ import annotations

from ..image.image_spec import (
    ATTN_CHUNKED,
    ATTN_FULL,
    ATTN_FULL_NOPE,
    ATTN_SLIDING,
    BIAS_ATTN_EXPERTS,
    BIAS_ATTN_GATE,
    BIAS_MOE_OUT,
    NORM_LAYER,
    NORM_RMS_POST,
    NORM_RMS_SANDWICH,
    QK_NORM_L2_ROTATED,
    ROUTER_SIGMOID,
    ROUTER_SOFTMAX_BIASED,
    ROUTER_TOPK_SIGMOID_INPUT,
    ROUTER_TOPK_SOFTMAX,
    Arch,
    FfnKind,
)
from . import families_granite_hybrid as granite_hybrid
from . import families_jamba as jamba
from . import families_kimi_linear as kimi_linear
from . import families_lfm2 as lfm2
from . import families_mimo as mimo
from . import families_nemotron_h as nemotron_h
from . import families_qwen3_next as qwen3_next
from .family_fields import (
    ALL_BIASES,
    MAX_CONTEXT_CAP,
    attention_fields,
    attention_layer_kinds,
    dense_width,
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


def _nested(c: HFConfig, *keys: str) -> HFConfig:
    """The config with the objects under `keys` flattened in as "key.field"
    (DBRX's attn_config and ffn_config), so errors name the nested field."""
    values = dict(c.values)
    for key in keys:
        sub = c.raw(key)
        if sub is None:
            continue
        if not isinstance(sub, dict):
            raise c.unsupported(key, sub, "must be an object")
        values |= {f"{key}.{name}": value for name, value in sub.items()}
    return HFConfig(values, c.path)


def _dbrx(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """DBRX: LayerNorm without biases (stored as zero biases), q, k and v clamped
    to +-clip_qkv (format 1.11), a softmax top-k router, the k weights divided by
    their sum (moe_normalize_expert_weights 1) or not (None); every layer MoE."""
    c = _nested(c, "attn_config", "ffn_config")
    c.reject_if("ffn_config.ffn_act_fn", lambda v: (v or {}).get("name", "silu") != "silu",
                "only SiLU (SwiGLU) experts are supported")
    c.reject_if("ffn_config.moe_normalize_expert_weights", lambda v: v not in (None, 1, 1.0),
                "only 1 (weights divided by their sum) or null are supported")
    hidden, heads = c.integer("d_model", minimum=1), c.integer("n_heads", minimum=1)
    n = c.integer("n_layers", minimum=1)
    clip = c.raw("attn_config.clip_qkv")
    fields = {"vocab_size": c.integer("vocab_size", minimum=1), "hidden_size": hidden,
              "n_layers": n, "n_heads": heads,
              "n_kv_heads": c.integer("attn_config.kv_n_heads", 1, minimum=1),
              "head_dim": hidden // heads,
              "max_context": min(c.integer("max_seq_len", minimum=1), MAX_CONTEXT_CAP),
              "qkv_clip": 0.0 if clip is None else c.number("attn_config.clip_qkv"),
              "norm_kind": NORM_LAYER, "rms_eps": 1e-5,
              **rope_fields(c, hidden // heads, c.number("attn_config.rope_theta", 1e4))}
    norm = c.raw("ffn_config.moe_normalize_expert_weights") is not None
    fields |= {"n_experts": expert_count(c, ("ffn_config.moe_num_experts",)),
               "expert_intermediate": c.integer("ffn_config.ffn_hidden_size", minimum=1),
               "top_k": c.integer("ffn_config.moe_top_k", 1, minimum=1),
               "router_norm_topk": int(norm)}
    return Arch.DBRX, fields, [FfnKind.MOE] * n


def _afmoe_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    """layer_types, or AFMoE's rule: every global_attn_every_n_layers-th layer
    full, the rest sliding. Only the sliding layers turn q and k: the full ones
    are attn_kind 2 (and without a sliding_window the sliding ones attend to all)."""
    types = c.raw("layer_types")
    if types is None:
        every = c.integer("global_attn_every_n_layers", 4, minimum=1)
        types = ["sliding_attention" if (i + 1) % every else "full_attention"
                 for i in range(n_layers)]
    window = c.raw("sliding_window") is not None
    return [ATTN_FULL_NOPE if k == ATTN_FULL else ATTN_SLIDING if window else ATTN_FULL
            for k in attention_layer_kinds(c, types, n_layers)]


def _afmoe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """Arcee AFMoE: RMSNorm before and after each sublayer (norm_kind 3) and the
    attention output's sigmoid gate (attn_bias bit 8), both format 1.11; per-head q/k
    norm; the sigmoid router with expert_bias, renormalised, times route_scale."""
    fields = attention_fields(c, "head_dim")
    n = fields["n_layers"]
    dense = c.integer("num_dense_layers", 1)
    kinds = [FfnKind.DENSE if i < dense else FfnKind.MOE for i in range(n)]
    width = c.integer("moe_intermediate_size", minimum=1)
    fields |= routing_fields(c, kinds, expert_count(c, ("num_experts",)), width, True)
    if FfnKind.MOE in kinds:
        fields |= {"router_score": ROUTER_SIGMOID, "routed_scaling": c.number("route_scale", 1.0),
                   "shared_intermediate": c.integer("num_shared_experts", 0) * width}
    window = c.integer("sliding_window", minimum=1) if ATTN_SLIDING in \
        _afmoe_attn_kinds(c, n) else 0
    if c.flag("mup_enabled", False):
        fields |= {"embedding_scale": fields["hidden_size"] ** 0.5, "residual_scale": 1.0,
                   "attention_scale": fields["head_dim"] ** -0.5, "logits_divisor": 1.0}
    fields |= {"dense_intermediate": dense_width(c, kinds), "qk_norm": 2,
               "attn_bias": (ALL_BIASES if c.flag("attention_bias", False) else 0)
               | BIAS_ATTN_GATE, "norm_kind": NORM_RMS_SANDWICH,
               "sliding_window": min(window, MAX_CONTEXT_CAP),
               "rms_eps": c.number("rms_norm_eps", 1e-5),
               **rope_fields(c, fields["head_dim"], 1e4)}
    return Arch.AFMOE, fields, kinds


def _llama4_moe_layers(c: HFConfig, n_layers: int) -> list[int]:
    """Each layer's FFN kind: MoE on moe_layers, or on every
    interleave_moe_layer_step-th layer (transformers' default), else dense."""
    listed = c.raw("moe_layers")
    if listed is None:
        step = c.integer("interleave_moe_layer_step", 1, minimum=1)
        listed = list(range(step - 1, n_layers, step))
    if not isinstance(listed, list) or any(not isinstance(i, int) or isinstance(i, bool)
                                           or not 0 <= i < n_layers for i in listed):
        raise c.unsupported("moe_layers", listed, f"must list layer numbers 0 .. {n_layers - 1}")
    return [FfnKind.MOE if i in listed else FfnKind.DENSE for i in range(n_layers)]


def _llama4_attn_kinds(c: HFConfig, n_layers: int) -> list[int]:
    """RoPE where no_rope_layers has 1 (default: all but every
    no_rope_layer_interval-th), chunked there when layer_types says so (attn_kind
    3), the rest full without RoPE (attn_kind 2)."""
    rope = c.raw("no_rope_layers")
    if rope is None:
        interval = c.integer("no_rope_layer_interval", 4, minimum=1)
        rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
    if not isinstance(rope, list) or len(rope) != n_layers or any(r not in (0, 1) for r in rope):
        raise c.unsupported("no_rope_layers", rope, f"must list 0 or 1 for {n_layers} layers")
    types = c.raw("layer_types")
    if types is None:
        chunked = c.raw("attention_chunk_size") is not None
        types = ["chunked_attention" if r and chunked else "full_attention" for r in rope]
    if not isinstance(types, list) or len(types) != n_layers or any(
            t not in ("chunked_attention", "full_attention") for t in types):
        raise c.unsupported("layer_types", types, f"must list {n_layers} of chunked_attention / "
                            "full_attention")
    if any(t == "chunked_attention" and not r for t, r in zip(types, rope)):
        raise c.unsupported("layer_types", types, "chunked layers without RoPE are not supported")
    return [ATTN_CHUNKED if t == "chunked_attention" else ATTN_FULL if r else ATTN_FULL_NOPE
            for t, r in zip(types, rope)]


def _llama4_text(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """Llama 4 (text): the router's sigmoid weights on the experts' input, a
    shared expert, interleaved dense layers, chunked attention with RoPE and full
    layers without, the attention temperature, the unweighted q/k norm."""
    fields = attention_fields(c, "head_dim")
    n = fields["n_layers"]
    kinds = _llama4_moe_layers(c, n)
    attn = _llama4_attn_kinds(c, n)
    width = c.integer("intermediate_size", minimum=1)
    fields |= routing_fields(c, kinds, expert_count(c, ("num_local_experts",)), width, False)
    if FfnKind.MOE in kinds:
        fields |= {"router_score": ROUTER_TOPK_SIGMOID_INPUT, "shared_intermediate": width}
    if FfnKind.DENSE in kinds:
        fields["dense_intermediate"] = c.integer("intermediate_size_mlp", minimum=1)
    if ATTN_CHUNKED in attn:
        fields["sliding_window"] = min(c.integer("attention_chunk_size", minimum=1),
                                       MAX_CONTEXT_CAP)
    if c.flag("attn_temperature_tuning", True) and ATTN_FULL_NOPE in attn:
        fields |= {"attn_temp_floor": c.number("floor_scale", 8192),
                   "attn_temp_scale": c.number("attn_scale", 0.1)}
    fields |= {"qk_norm": QK_NORM_L2_ROTATED if c.flag("use_qk_norm", True) else 0,
               "attn_bias": ALL_BIASES if c.flag("attention_bias", False) else 0,
               "rms_eps": c.number("rms_norm_eps", 1e-5),
               **rope_fields(c, fields["head_dim"], 5e5)}
    return Arch.LLAMA4, fields, kinds


# JetMoE's decoder norms are built without its config's eps: transformers' 1e-6.
JETMOE_LAYER_EPS = 1e-6


def _jetmoe(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """JetMoE: attention experts (a mixture of attention heads: q and o projections
    per expert, k and v shared) and MoE experts sharing num_local_experts and
    num_experts_per_tok, both routed by the top-k logits with a softmax over the k
    (router_score 2), each with a bias after its weighted sum."""
    c.reject_if("activation_function", lambda v: (v or "silu") != "silu",
                "only SiLU (SwiGLU) experts are supported")
    c.reject_if("rms_norm_eps", lambda v: v not in (None, JETMOE_LAYER_EPS),
                f"must be {JETMOE_LAYER_EPS}: transformers builds the layers' norms with it "
                "whatever the config says, and an image has one eps")
    fields = attention_fields(c, "kv_channels")
    n = fields["n_layers"]
    top_k = c.integer("num_experts_per_tok", 2, minimum=1)
    kinds = [FfnKind.MOE] * n
    fields |= routing_fields(c, kinds, expert_count(c, ("num_local_experts",)),
                             c.integer("intermediate_size", minimum=1), False)
    fields |= {"n_heads": top_k * fields["n_kv_heads"], "router_score": ROUTER_TOPK_SOFTMAX,
               "attn_bias": 8 | BIAS_ATTN_EXPERTS | BIAS_MOE_OUT,
               "tie_embeddings": int(c.flag("tie_word_embeddings", True)),
               "rms_eps": JETMOE_LAYER_EPS, **rope_fields(c, fields["head_dim"], 1e4)}
    return Arch.JETMOE, fields, kinds


LONGCAT_DEFAULT_THETA = 1e7  # LongcatFlashConfig.default_theta


def _longcat_attention(c: HFConfig) -> dict:
    """LongCat-Flash's shape: num_layers decoder layers of two image layers each,
    MLA whose RoPE turns head_dim (= qk_rope_head_dim) dimensions."""
    hidden = c.integer("hidden_size", minimum=1)
    heads = c.integer("num_attention_heads", minimum=1)
    c.reject_if("num_key_value_heads", lambda v: v not in (None, heads),
                "must be num_attention_heads: MLA has one latent for every head")
    rope = c.integer("qk_rope_head_dim", 64, minimum=2)
    c.reject_if("head_dim", lambda v: v not in (None, rope), "must equal qk_rope_head_dim: "
                "transformers turns head_dim dimensions of the qk_rope_head_dim it rotates")
    nope = c.integer("qk_nope_head_dim", 128, minimum=1)
    c.reject_if("qk_head_dim", lambda v: v not in (None, nope + rope),
                "must be qk_nope_head_dim + qk_rope_head_dim")
    c.reject_if("q_lora_rank", lambda v: v is None, "LongCat-Flash's queries need a q LoRA")
    fields = {"vocab_size": c.integer("vocab_size", minimum=1), "hidden_size": hidden,
              "n_layers": 2 * c.integer("num_layers", minimum=1), "n_heads": heads,
              "max_context": min(c.integer("max_position_embeddings", minimum=1),
                                 MAX_CONTEXT_CAP),
              "tie_embeddings": int(c.flag("tie_word_embeddings", False))}
    fields |= mla_fields(c, fields)
    return fields | rope_fields(c, fields["head_dim"], LONGCAT_DEFAULT_THETA, rope_dim=rope)


def _longcat_zero_experts(c: HFConfig) -> int:
    """zero_expert_num as transformers reads it: 256 when the config leaves
    it out, none when it is null."""
    if "zero_expert_num" in c.values and c.raw("zero_expert_num") is None:
        return 0
    return c.integer("zero_expert_num", 256, minimum=0)


def _longcat_flash(c: HFConfig) -> tuple[Arch, dict, list[int]]:
    """LongCat-Flash: shortcut layers (a dense MLP beside the MoE, whose output
    waits for the next layer) and zero-computation experts (format 1.12)."""
    fields = _longcat_attention(c)
    kinds = [FfnKind.SHORTCUT, FfnKind.DENSE] * (fields["n_layers"] // 2)
    fields |= {"dense_intermediate": c.integer("ffn_hidden_size", minimum=1),
               "expert_intermediate": c.integer("expert_ffn_hidden_size", minimum=1),
               "n_experts": c.integer("n_routed_experts", minimum=1),
               "zero_experts": _longcat_zero_experts(c),
               "top_k": c.integer("moe_topk", minimum=1), "router_score": ROUTER_SOFTMAX_BIASED,
               "routed_scaling": c.number("routed_scaling_factor", 6.0),
               "rms_eps": c.number("rms_norm_eps", 1e-5)}
    c.flag("router_bias", False)  # its classifier.bias: never added (tensor_map_longcat.py)
    return Arch.LONGCAT_FLASH, fields, kinds


FAMILIES = {"flex_olmo": _flex_olmo, "hunyuan_v1_moe": _hunyuan_v1_moe,
            "glm4_moe_lite": _glm4_moe_lite, "minimax_m2": _minimax_m2, "exaone_moe": _exaone_moe,
            "dbrx": _dbrx, "afmoe": _afmoe, "llama4_text": _llama4_text, "jetmoe": _jetmoe,
            "longcat_flash": _longcat_flash, **mimo.FAMILIES, **lfm2.FAMILIES,
            **granite_hybrid.FAMILIES, **qwen3_next.FAMILIES, **kimi_linear.FAMILIES,
            **jamba.FAMILIES, **nemotron_h.FAMILIES}
ATTN_KINDS = {"exaone_moe": _exaone_attn_kinds, "afmoe": _afmoe_attn_kinds,
              "llama4_text": _llama4_attn_kinds, **mimo.ATTN_KINDS, **lfm2.ATTN_KINDS,
              **granite_hybrid.ATTN_KINDS, **qwen3_next.ATTN_KINDS, **kimi_linear.ATTN_KINDS,
              **jamba.ATTN_KINDS, **nemotron_h.ATTN_KINDS}
