"""What a valid image holds: record limits (1.1), the canonical tensor sequence
(3.1) and data placement (3.2) of docs/format.md. Shared by the writer and the
reader, so both agree on one definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .image_spec import (
    ACT_RELU2,
    ATTN_CHUNKED,
    ATTN_CONV,
    ATTN_FULL,
    ATTN_FULL_NOPE,
    ATTN_MAMBA1,
    ATTN_NONE,
    ATTN_SLIDING,
    BIAS_ALL,
    BIAS_ATTN,
    BIAS_ATTN_EXPERTS,
    BIAS_ATTN_GATE,
    BIAS_EXPERTS,
    BIAS_HEAD_GATE,
    BIAS_LM_HEAD,
    BIAS_MOE_OUT,
    BIAS_ROUTER,
    BIAS_SINKS,
    DATA_ALIGN,
    EXPERT_ROLES,
    FLAG_LAYER_ROPE,
    FLAG_MLA,
    FLAG_ROPE,
    LIMITS,
    MAX_ALIGNMENT,
    MAX_GROUPS,
    MAX_KDA_BOUND,
    MAX_LORA_RANK,
    MAX_SSM_SIZE,
    MAX_TOP_K,
    MIN_ALIGNMENT,
    MLA_FIELDS,
    MLA_LATENT,
    NORM_LAYER,
    NORM_RMS_POST,
    NORM_RMS_SANDWICH,
    QK_NORM_L2_ROTATED,
    QK_NORM_PER_HEAD_ROTATED,
    RECURRENT_KINDS,
    ROPE_DEFAULT,
    ROPE_FIELDS,
    ROPE_YARN,
    ROUTER_SIGMOID,
    ROUTER_SOFTMAX,
    ROUTER_SOFTMAX_BIASED,
    ROUTER_SPARSEMIXER,
    ROUTER_TOPK_SIGMOID_INPUT,
    ROUTER_TOPK_SOFTMAX,
    SCALE_FIELDS,
    SSM_FIELDS,
    SSM_KINDS,
    Arch,
    FfnKind,
    ModelRecord,
    Role,
    TensorEntry,
    header_flags,
)
from .minors import (
    MINOR_CONV,
    MINOR_EXPERTS_LAST,
    MINOR_LLAMA4_ERA,
    MINOR_MAMBA2,
    MINOR_POST_NORMS,
    MINOR_QK_ROW_GROUPS,
    MINOR_QUANT,
    MINOR_ROW_GROUPS,
    MINOR_SUPERBLOCKS,
    MINOR_ZERO_EXPERTS,
)
from .quant import tensor_size
from .status import Status

BAD_HYPERPARAMS = Status.E_BAD_HYPERPARAMS.c_name
UNSUPPORTED_ARCH = Status.E_UNSUPPORTED_ARCH.c_name
UNSUPPORTED_ROUTER = Status.E_UNSUPPORTED_ROUTER.c_name
BAD_LAYER_TABLE = Status.E_BAD_LAYER_TABLE.c_name


@dataclass(frozen=True)
class Problem:
    """One defect of a model record: the field, its value, why, and the C status."""

    field: str
    value: object
    reason: str
    status: str


@dataclass(frozen=True)
class ExpertBlock:
    """One expert's gate, up and down tensors: [offset, offset + size)."""

    layer: int
    expert: int
    offset: int
    size: int


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def _in_range(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and low <= value <= high


def _positive_finite(value: float) -> bool:
    return math.isfinite(value) and value > 0


MIN_ROPE_THETA = 1.0  # = MIN_ROPE_THETA in sdk/src/hparams.c
MAX_ROUTED_SCALING = 1024.0  # = MAX_ROUTED_SCALING there
MAX_SCALE = 65536.0  # = MAX_SCALE there: embedding/residual/attention scales, logits divisor
MAX_ROUTER_JITTER = 1.0  # = MAX_ROUTER_JITTER there: sparsemixer's epsilon
MAX_ROUTER_NORM_MIN = 1.0  # = MAX_ROUTER_NORM_MIN there: floor of the routing weights' sum


def format_minor(arch: int, r: ModelRecord, quantized: bool = False,
                 row_groups: bool = False, experts_last: bool = False,
                 attn_kinds: tuple[int, ...] = (), ffn_kinds: tuple[int, ...] = (),
                 superblocks: bool = False, qk_row_groups: bool = False) -> int:
    """The minor format version an image needs: the newest feature it uses
    (docs/format.md section 7). `qk_row_groups`: a QK2_R16 .. QK6_R16 tensor
    (1.16); `superblocks`: a QK2 .. QK6 tensor (1.15); `row_groups`: a Q8_R16/Q4_R16
    tensor; `experts_last`: the EXPERTS_LAST layout (1.9); `attn_kinds`: the layers'
    (2 is 1.10, 3 is 1.11, 4 is 1.13, 5 and 6 are 1.14); `ffn_kinds`: theirs (2 is 1.12)."""
    if qk_row_groups or superblocks or r.kv_int8:
        return MINOR_QK_ROW_GROUPS if qk_row_groups else MINOR_SUPERBLOCKS
    if (r.ssm_heads or arch >= Arch.GRANITEMOE_HYBRID or set(SSM_KINDS) & set(attn_kinds)
            or ATTN_NONE in attn_kinds or FfnKind.NONE in ffn_kinds or r.activation == ACT_RELU2):
        return MINOR_MAMBA2
    if r.extended or arch >= Arch.LFM2_MOE or ATTN_CONV in attn_kinds:
        return MINOR_CONV
    if (r.zero_experts or r.layer_rope or arch >= Arch.LONGCAT_FLASH
            or FfnKind.SHORTCUT in ffn_kinds):
        return MINOR_ZERO_EXPERTS
    if (r.norm_kind == NORM_RMS_SANDWICH or r.qkv_clip
            or r.attn_bias & (BIAS_ATTN_GATE | BIAS_ATTN_EXPERTS | BIAS_MOE_OUT)
            or r.attn_temp_floor or r.qk_norm == QK_NORM_L2_ROTATED
            or r.router_score == ROUTER_TOPK_SIGMOID_INPUT or arch >= Arch.DBRX
            or ATTN_CHUNKED in attn_kinds):
        return MINOR_LLAMA4_ERA
    if r.norm_kind == NORM_RMS_POST or r.qk_norm == QK_NORM_PER_HEAD_ROTATED or \
            arch >= Arch.FLEX_OLMO or ATTN_FULL_NOPE in attn_kinds:
        return MINOR_POST_NORMS
    if experts_last:
        return MINOR_EXPERTS_LAST
    if row_groups:
        return MINOR_ROW_GROUPS
    if r.has_mla or arch >= Arch.DEEPSEEK_V2:
        return 7
    if (arch >= Arch.GPT_OSS or r.sliding_window or r.activation
            or r.attn_bias & (BIAS_SINKS | BIAS_ROUTER | BIAS_EXPERTS)):
        return 6
    if (r.has_rope or r.router_score == ROUTER_SIGMOID or r.n_group > 1
            or arch >= Arch.GLM4_MOE):
        return 5
    if arch >= Arch.ERNIE4_5_MOE or r.router_score == ROUTER_SOFTMAX_BIASED:
        return 4
    if quantized:
        return MINOR_QUANT
    if (arch >= Arch.PHIMOE or r.norm_kind == NORM_LAYER or r.router_score == ROUTER_SPARSEMIXER
            or r.attn_bias & BIAS_LM_HEAD):
        return 2
    if r.has_scales or r.router_score == ROUTER_TOPK_SOFTMAX or arch >= Arch.GRANITEMOE:
        return 1
    return 0


def _check(rows: list[tuple[str, object, bool, str]], status: str) -> list[Problem]:
    return [Problem(name, value, reason, status) for name, value, ok, reason in rows if not ok]


def _arch_problems(arch: int, r: ModelRecord) -> list[Problem]:
    return _check([
        ("arch", arch, arch in Arch._value2member_map_, "unknown family"),
        ("qk_norm", r.qk_norm, r.qk_norm in (0, 1, 2, 3, 4), "must be 0 .. 4"),
        ("activation", r.activation, r.activation in (0, 1, 2),
         "only 0 (SiLU), 1 (clamped SwiGLU) and 2 (relu^2 without gates) are supported"),
        ("norm_kind", r.norm_kind, r.norm_kind in (0, 1, 2, 3),
         "only 0 (RMSNorm), 1 (LayerNorm with bias), 2 (RMSNorm after each sublayer) and 3 "
         "(RMSNorm before and after each sublayer) are supported"),

    ], UNSUPPORTED_ARCH)


def _swiglu_ok(r: ModelRecord, value: float) -> bool:
    if r.activation == 1:
        return _positive_finite(value) and value <= MAX_SCALE
    return value == 0.0 and math.copysign(1.0, value) > 0


def _attention_problems(r: ModelRecord) -> list[Problem]:
    rows = [(name, getattr(r, name), _in_range(getattr(r, name), lo, hi), f"must be {lo} .. {hi}")
            for name, lo, hi in (("vocab_size", 1, LIMITS["vocab_size"]),
                                 ("hidden_size", 1, LIMITS["hidden_size"]),
                                 ("n_layers", 1, LIMITS["n_layers"]),
                                 ("n_heads", 1, LIMITS["n_heads"]), ("n_kv_heads", 1, r.n_heads),
                                 ("head_dim", 2, LIMITS["head_dim"]),
                                 ("max_context", 1, LIMITS["max_context"]))]
    rows += [
        ("n_kv_heads", r.n_kv_heads, r.n_kv_heads < 1 or r.n_heads % r.n_kv_heads == 0,
         "must divide n_heads"),
        ("head_dim", r.head_dim, r.head_dim % 2 == 0, "must be even"),
        ("rms_eps", r.rms_eps, _positive_finite(r.rms_eps), "must be finite and > 0"),
        ("rope_theta", r.rope_theta, math.isfinite(r.rope_theta) and r.rope_theta >= MIN_ROPE_THETA,
         "must be finite and >= 1"),
        ("attn_bias", r.attn_bias, r.attn_bias & ~BIAS_ALL == 0, "only bits 0..11 may be set"),
        ("tie_embeddings", r.tie_embeddings, r.tie_embeddings in (0, 1), "must be 0 or 1"),
    ]
    return _check(rows, BAD_HYPERPARAMS)


def _scale_problems(r: ModelRecord) -> list[Problem]:
    """Format 1.1's scales, as sdk/src/hparams.c's check_scales."""
    return _check([(name, getattr(r, name), _positive_finite(getattr(r, name)) and
                    getattr(r, name) <= MAX_SCALE, "must be > 0 and <= 65536 when any scale is set")
                   for name in SCALE_FIELDS if r.has_scales], BAD_HYPERPARAMS)


def _gpt_oss_problems(r: ModelRecord) -> list[Problem]:
    """Format 1.6's sliding window and clamped SwiGLU, as sdk/src/hparams.c's
    check_gpt_oss_fields."""
    return _check([
        ("sliding_window", r.sliding_window, _in_range(r.sliding_window, 0, LIMITS["max_context"]),
         f"must be 0 .. {LIMITS['max_context']}"),
        ("swiglu_limit", r.swiglu_limit, _swiglu_ok(r, r.swiglu_limit),
         "must be > 0 and <= 65536 with activation 1, else 0"),
        ("swiglu_alpha", r.swiglu_alpha, _swiglu_ok(r, r.swiglu_alpha),
         "must be > 0 and <= 65536 with activation 1, else 0"),
    ], BAD_HYPERPARAMS)


def _ffn_problems(r: ModelRecord) -> list[Problem]:
    width, experts = LIMITS["intermediate"], LIMITS["n_experts"]
    return _check([
        ("dense_intermediate", r.dense_intermediate, r.dense_intermediate <= width, "must be <= 2^20"),
        ("expert_intermediate", r.expert_intermediate, r.expert_intermediate <= width,
         "must be <= 2^20"),
        ("shared_intermediate", r.shared_intermediate, r.shared_intermediate <= width,
         "must be <= 2^20"),
        ("n_experts", r.n_experts, r.n_experts <= experts, f"must be <= {experts}"),
        ("zero_experts", r.zero_experts, 0 <= r.zero_experts <= experts - r.n_experts and (
            r.zero_experts == 0 or r.n_experts > 0),
         f"must be 0 .. {experts} - n_experts, and 0 without routed experts"),
        ("top_k", r.top_k, r.top_k <= min(r.router_width, MAX_TOP_K),
         f"must be <= min(n_experts + zero_experts, {MAX_TOP_K})"),
        ("router_norm_topk", r.router_norm_topk, r.router_norm_topk in (0, 1), "must be 0 or 1"),
        ("shared_gate", r.shared_gate, r.shared_gate in (0, 1), "must be 0 or 1"),
        ("shared_gate", r.shared_gate, r.shared_gate == 0 or r.shared_intermediate > 0,
         "needs a shared expert (shared_intermediate > 0)"),
    ], BAD_HYPERPARAMS)


def _router_jitter_ok(r: ModelRecord) -> bool:
    if r.router_score != ROUTER_SPARSEMIXER:
        return r.router_jitter == 0.0 and math.copysign(1.0, r.router_jitter) > 0
    return ((r.top_k == 2 or r.n_experts == 0) and math.isfinite(r.router_jitter)
            and 0.0 <= r.router_jitter <= MAX_ROUTER_JITTER)


def _router_norm_min_ok(r: ModelRecord) -> bool:
    if r.router_score != ROUTER_SOFTMAX_BIASED:
        return r.router_norm_min == 0.0 and math.copysign(1.0, r.router_norm_min) > 0
    return math.isfinite(r.router_norm_min) and 0.0 <= r.router_norm_min <= MAX_ROUTER_NORM_MIN


def _groups_ok(r: ModelRecord) -> bool:
    """Group-limited routing (format 1.5), as sdk/src/hparams.c's groups_valid."""
    if r.n_group == 1 and r.topk_group == 1:
        return True
    if r.router_score > ROUTER_SIGMOID or not _in_range(r.n_group, 1, MAX_GROUPS) or \
            not _in_range(r.topk_group, 1, r.n_group) or r.n_experts % r.n_group:
        return False
    per_group = r.n_experts // r.n_group
    return r.top_k <= r.topk_group * per_group and (r.router_score != ROUTER_SIGMOID or
                                                     per_group >= 2)


def _router_problems(r: ModelRecord) -> list[Problem]:
    return _check([
        ("router_score", r.router_score,
         r.router_score in (ROUTER_SOFTMAX, ROUTER_SIGMOID, ROUTER_TOPK_SOFTMAX,
                            ROUTER_SPARSEMIXER, ROUTER_SOFTMAX_BIASED, ROUTER_TOPK_SIGMOID_INPUT),
         "only 0 (softmax, top-k), 1 (sigmoid, biased selection), 2 (top-k, softmax over the "
         "k), 3 (sparsemixer), 4 (top-k of softmax + bias) and 5 (top-k logits, sigmoid, on "
         "the input) are supported"),
        ("router_norm_min", r.router_norm_min, _router_norm_min_ok(r),
         "must be 0 .. 1 with router_score 4, else 0"),
        ("router_jitter", r.router_jitter, _router_jitter_ok(r),
         "must be 0 .. 1 with router_score 3 (which needs top_k 2), else 0"),
        ("n_group", r.n_group, r.n_group == 1 or (
            _in_range(r.n_group, 1, MAX_GROUPS) and r.n_experts % r.n_group == 0
            and r.router_score <= ROUTER_SIGMOID),
         f"must be 1, or <= {MAX_GROUPS} dividing n_experts (router_score 0 or 1 only)"),
        ("topk_group", r.topk_group, _groups_ok(r),
         "must be 1 .. n_group, keep at least top_k experts, and a sigmoid router's groups "
         "need two experts each"),
        ("routed_scaling", r.routed_scaling,
         _positive_finite(r.routed_scaling) and r.routed_scaling <= MAX_ROUTED_SCALING,
         "must be > 0 and <= 1024"),
        ("zero_experts", r.zero_experts, _zero_experts_ok(r),
         "need router_score 0, 1, 2 or 4, n_group 1 and no attention experts"),
    ], UNSUPPORTED_ROUTER)


def _zero_experts_ok(r: ModelRecord) -> bool:
    """Zero-computation experts (1.12), as sdk/src/hparams.c's zero_experts_ok."""
    router = r.router_score in (ROUTER_SOFTMAX, ROUTER_SIGMOID, ROUTER_TOPK_SOFTMAX,
                                ROUTER_SOFTMAX_BIASED)
    return r.zero_experts == 0 or (router and r.n_group == 1 and not r.attention_experts)


def alignment_ok(alignment: int) -> bool:
    return MIN_ALIGNMENT <= alignment <= MAX_ALIGNMENT and alignment & (alignment - 1) == 0


def _yarn_ok(r: ModelRecord) -> bool:
    if r.rope_kind != ROPE_YARN:
        return (r.rope_factor, r.rope_ramp_low, r.rope_ramp_width, r.rope_attn_factor) == (0,) * 4
    return (_positive_finite(r.rope_factor) and r.rope_factor <= MAX_SCALE
            and math.isfinite(r.rope_ramp_low) and 0 <= r.rope_ramp_low <= MAX_SCALE
            and _positive_finite(r.rope_ramp_width) and r.rope_ramp_width <= MAX_SCALE
            and _positive_finite(r.rope_attn_factor) and r.rope_attn_factor <= MAX_SCALE)


def _rope_problems(r: ModelRecord, flags: int) -> list[Problem]:
    """Format 1.5 RoPE fields: all zero without the ROPE flag; with it a known
    kind, an even rope_dim 2 .. head_dim and the kind's numbers; each layer's own
    frequencies (1.12, LAYER_ROPE) with the flag and default RoPE."""
    if flags & FLAG_LAYER_ROPE and (not flags & FLAG_ROPE or r.rope_kind != ROPE_DEFAULT):
        return [Problem("layer_rope", 1, "each layer's RoPE frequencies need the header flag "
                        "ROPE and default RoPE (rope_kind 0)", BAD_HYPERPARAMS)]
    if not flags & FLAG_ROPE:
        return _check([(name, getattr(r, name), getattr(r, name) == 0,
                         "must be 0 without the header flag ROPE") for name in ROPE_FIELDS],
                      BAD_HYPERPARAMS)
    kind = _check([("rope_kind", r.rope_kind, r.rope_kind in (0, 1),
                    "only 0 (default) and 1 (YaRN) are supported")], UNSUPPORTED_ARCH)
    return kind + _check([
        ("rope_dim", r.rope_dim, _in_range(r.rope_dim, 2, r.head_dim) and r.rope_dim % 2 == 0,
         "must be even, 2 .. head_dim"),
        ("rope_factor", r.rope_factor, _yarn_ok(r),
         "YaRN's factor, ramp and attention factor must be finite, >= 0 (> 0 but the ramp's "
         "start), <= 65536; default RoPE's all 0"),
    ], BAD_HYPERPARAMS)


def _mla_problems(r: ModelRecord, flags: int) -> list[Problem]:
    """Format 1.7 Multi-head Latent Attention fields, as sdk/src/hparams.c's check_mla."""
    if not flags & FLAG_MLA:
        return _check([(name, getattr(r, name), getattr(r, name) == 0,
                        "must be 0 without the header flag MLA") for name in MLA_FIELDS],
                      BAD_HYPERPARAMS)
    kind = _check([("mla", r.mla, r.mla == MLA_LATENT,
                    "only 1 (MLA) goes with the flag")], UNSUPPORTED_ARCH)
    return kind + _check([
        ("kv_lora_rank", r.kv_lora_rank, _in_range(r.kv_lora_rank, 1, MAX_LORA_RANK),
         f"must be 1 .. {MAX_LORA_RANK}"),
        ("q_lora_rank", r.q_lora_rank, _in_range(r.q_lora_rank, 0, MAX_LORA_RANK),
         f"must be 0 .. {MAX_LORA_RANK}"),
        ("v_head_dim", r.v_head_dim, _in_range(r.v_head_dim, 1, LIMITS["head_dim"]),
         f"must be 1 .. {LIMITS['head_dim']}"),
        ("lora_eps", r.lora_eps, _positive_finite(r.lora_eps), "must be finite and > 0"),
        ("n_kv_heads", r.n_kv_heads, r.n_kv_heads == r.n_heads, "must equal n_heads with MLA"),
        ("qk_norm", r.qk_norm, r.qk_norm == 0, "must be 0 with MLA"),
        ("attn_bias", r.attn_bias, r.attn_bias & BIAS_ATTN == 0, "no q/k/v/o bias with MLA"),
        ("rope_dim", r.rope_dim, 0 < r.rope_dim < r.head_dim,
         "MLA needs the ROPE flag and rope_dim < head_dim"),
        ("kv_int8", r.kv_int8, not r.kv_int8, "no int8 KV cache with MLA (its latent stays "
         "float32)"),
    ], BAD_HYPERPARAMS)


def _attention_extra_problems(r: ModelRecord) -> list[Problem]:
    """Format 1.11's q/k/v clamp, attention temperature and output gate, as
    sdk/src/hparams.c's check_attention_extras: a clamp of 0 (bits zero) or > 0
    and <= 65536; a temperature floor of 0 (and a scale of 0) or 1 .. 2^24 with
    a scale > 0 and <= 65536; all three with standard attention only."""
    def zero(value: float) -> bool:
        return value == 0.0 and math.copysign(1.0, value) > 0

    clip_ok = zero(r.qkv_clip) or (_positive_finite(r.qkv_clip) and r.qkv_clip <= MAX_SCALE)
    if zero(r.attn_temp_floor):
        temp_ok = zero(r.attn_temp_scale)
    else:
        temp_ok = (math.isfinite(r.attn_temp_floor) and 1.0 <= r.attn_temp_floor <=
                   LIMITS["max_context"] and _positive_finite(r.attn_temp_scale)
                   and r.attn_temp_scale <= MAX_SCALE)
    return _check([
        ("qkv_clip", r.qkv_clip, clip_ok, "must be 0, or > 0 and <= 65536"),
        ("attn_temp_floor", r.attn_temp_floor, temp_ok,
         "must be 0 (and the scale 0), or 1 .. 2^24 with a scale > 0 and <= 65536"),
        ("qkv_clip", r.qkv_clip, not r.mla or r.qkv_clip == 0.0, "must be 0 with MLA"),
        ("attn_temp_floor", r.attn_temp_floor, not r.mla or r.attn_temp_floor == 0.0,
         "must be 0 with MLA"),
        ("attn_bias", r.attn_bias, not r.mla or not r.attn_bias & BIAS_ATTN_GATE,
         "no attention output gate (bit 8) with MLA"),
        ("attn_bias", r.attn_bias, r.mla or not r.attn_bias & BIAS_HEAD_GATE,
         "the head gate (bit 11) is MLA's only"),
        ("attn_bias", r.attn_bias, _attention_experts_ok(r),
         "attention experts (bit 9) need MoE layers' n_experts and top_k, n_heads = top_k * "
         "n_kv_heads, standard attention without q bias, q/k norm, gate or clamp"),
    ], BAD_HYPERPARAMS)


def _attention_experts_ok(r: ModelRecord) -> bool:
    """attn_bias bit 9 (format 1.11, JetMoE), as sdk/src/hparams.c's
    attention_experts_valid."""
    if not r.attention_experts:
        return True
    return (not r.mla and r.n_experts > 0 and r.top_k > 0
            and r.n_heads == r.top_k * r.n_kv_heads and r.qk_norm == 0
            and not r.attn_bias & (1 | BIAS_ATTN_GATE) and r.qkv_clip == 0.0)


def record_problems(arch: int, alignment: int, record: ModelRecord,
                    flags: int | None = None) -> list[Problem]:
    """Defects of the header's arch and alignment and of the model record (section 1.1)
    that do not depend on the layer table, in the order colibri_init reports them.
    `flags`: the header's (default: those the writer sets for this record)."""
    out = [] if alignment_ok(alignment) else [
        Problem("alignment", alignment, "must be a power of two, 64 .. 1 MiB", BAD_HYPERPARAMS)]
    flags = header_flags(record) if flags is None else flags
    return (out + _arch_problems(arch, record) + _attention_problems(record)
            + _ffn_problems(record) + _router_problems(record) + _scale_problems(record)
            + _rope_problems(record, flags) + _gpt_oss_problems(record)
            + _mla_problems(record, flags) + _attention_extra_problems(record)
            + _extension_problems(record))


MAX_CONV_KERNEL = 64  # = MAX_CONV_KERNEL in sdk/src/hparams.c


def _extension_problems(r: ModelRecord) -> list[Problem]:
    """Format 1.13's record extension, as sdk/src/hparams.c's check_extension."""
    sigmoid = r.router_score == ROUTER_SIGMOID
    eps_ok = (math.isfinite(r.router_sum_eps) and 0.0 <= r.router_sum_eps <= 1.0 if sigmoid
              else r.router_sum_eps == 0.0 and math.copysign(1.0, r.router_sum_eps) > 0)
    return _check([
        ("conv_kernel", r.conv_kernel, r.conv_kernel == 0 or 2 <= r.conv_kernel <= MAX_CONV_KERNEL,
         f"must be 0, or 2 .. {MAX_CONV_KERNEL} with short convolution layers"),
        ("router_sum_eps", r.router_sum_eps, eps_ok, "must be 0 .. 1 with router_score 1, else 0"),
    ] + _ssm_checks(r), BAD_HYPERPARAMS)


def _ssm_checks(r: ModelRecord) -> list:
    """Format 1.14's Mamba2 sizes, as hparams.c's ssm_valid: all zero, or
    heads, head_dim and state 1 .. MAX_SSM_SIZE with groups dividing the heads."""
    bound_zero = r.kda_bound == 0.0 and math.copysign(1.0, r.kda_bound) > 0
    if r.ssm_heads == 0:
        return [(name, getattr(r, name), getattr(r, name) == 0, "must be 0 without ssm_heads")
                for name in SSM_FIELDS[1:] + ("kda_rank", "ssm_dt_rank")] + [
            ("kda_bound", r.kda_bound, bound_zero, "must be 0 without ssm_heads"),
            ("ssm_dt_min", r.ssm_dt_min, r.ssm_dt_min == 0.0 and math.copysign(1.0, r.ssm_dt_min) > 0,
             "must be 0 without ssm_heads")]
    size = f"must be 1 .. {MAX_SSM_SIZE}"
    bound_ok = bound_zero or (math.isfinite(r.kda_bound) and -MAX_KDA_BOUND <= r.kda_bound < 0)
    dt_min_ok = (r.ssm_dt_min == 0.0 and math.copysign(1.0, r.ssm_dt_min) > 0) or (
        math.isfinite(r.ssm_dt_min) and 0 < r.ssm_dt_min <= 1)
    return [(name, getattr(r, name), 1 <= getattr(r, name) <= MAX_SSM_SIZE, size)
            for name in SSM_FIELDS[:3]] + [
        ("ssm_groups", r.ssm_groups, 1 <= r.ssm_groups <= r.ssm_heads
         and r.ssm_heads % r.ssm_groups == 0, "must divide ssm_heads"),
        ("kda_rank", r.kda_rank, 0 <= r.kda_rank <= MAX_SSM_SIZE, f"must be 0 .. {MAX_SSM_SIZE}"),
        ("kda_bound", r.kda_bound, bound_ok, f"must be 0, or -{MAX_KDA_BOUND:g} .. below 0"),
        ("ssm_dt_min", r.ssm_dt_min, dt_min_ok, "must be 0, or above 0 and at most 1"),
        ("ssm_dt_rank", r.ssm_dt_rank, r.ssm_dt_rank == 0 or (
            r.ssm_dt_rank <= MAX_SSM_SIZE and r.ssm_head_dim == 1 and r.ssm_groups == 1
            and r.ssm_dt_rank + 2 * r.ssm_state <= r.ssm_heads),
         "must be 0, or 1 .. 1024 with ssm_head_dim 1, ssm_groups 1 and ssm_dt_rank + 2 * "
         "ssm_state <= ssm_heads (Mamba1)")]


_KIND_WIDTHS = {FfnKind.DENSE: ("dense_intermediate",),
                FfnKind.MOE: ("expert_intermediate", "n_experts", "top_k")}
# The kinds whose layers hold each part: a shortcut layer (1.12) has both.
_PART_KINDS = {FfnKind.DENSE: (FfnKind.DENSE, FfnKind.SHORTCUT),
               FfnKind.MOE: (FfnKind.MOE, FfnKind.SHORTCUT)}


def _parts(kind: int) -> list[int]:
    """The parts (FfnKind.DENSE, FfnKind.MOE) a layer of this kind has."""
    return [part for part, kinds in _PART_KINDS.items() if kind in kinds]


def missing_widths(r: ModelRecord, kind: int) -> list[Problem]:
    """Widths a layer of this kind needs that are 0."""
    return [Problem(name, 0, "must be > 0: a layer of that kind needs it", BAD_HYPERPARAMS)
            for part in _parts(kind) for name in _KIND_WIDTHS[part] if getattr(r, name) == 0]


def unused_widths(r: ModelRecord, ffn_kinds: list[int]) -> list[Problem]:
    """Widths of a layer kind no layer has, which section 1.1 wants 0."""
    present = {part for kind in ffn_kinds for part in _parts(kind)}
    return [Problem(name, getattr(r, name), "must be 0: no layer of that kind", BAD_HYPERPARAMS)
            for kind, names in _KIND_WIDTHS.items() if kind not in present
            for name in names if getattr(r, name) != 0]


def shortcut_placed(ffn_kinds: list[int], layer: int) -> bool:
    """Section 2 (1.12): a shortcut layer is followed by a dense one, as
    sdk/src/tensor_check.c's shortcut_placed."""
    return ffn_kinds[layer] != FfnKind.SHORTCUT or (
        layer + 1 < len(ffn_kinds) and ffn_kinds[layer + 1] == FfnKind.DENSE)


def layer_kind_problems(r: ModelRecord, ffn_kinds: list[int]) -> list[Problem]:
    """Known kinds, shortcut layers before dense ones, and the widths each
    kind needs: 1 .. limit when a layer of that kind exists, else 0."""
    placed = [Problem(f"ffn_kinds[{i}]", kind, "must be 0, 1, or 2 followed by a dense layer",
                      BAD_LAYER_TABLE) for i, kind in enumerate(ffn_kinds)
              if kind not in tuple(FfnKind) or not shortcut_placed(ffn_kinds, i)]
    needed = [p for kind in sorted(set(ffn_kinds)) for p in missing_widths(r, kind)]
    return placed + needed + unused_widths(r, ffn_kinds)


def model_problems(arch: int, alignment: int, record: ModelRecord,
                   ffn_kinds: list[int]) -> list[Problem]:
    """Everything a writer must get right in the header, record and layer kinds."""
    return record_problems(arch, alignment, record) + layer_kind_problems(record, ffn_kinds)


def attn_kind_ok(r: ModelRecord, kind: int) -> bool:
    """Section 2: 0 full; 1 sliding and 3 chunked (1.11) need a window, 4 a short
    convolution (1.13) its taps and no Mamba2 sizes, 5 a Mamba2 mixer (1.14) its
    taps and heads, and so do 6 and 7, the delta rule layers (1.14); an MLA model's
    other layers are full attention with or without RoPE (as sdk/src/tensor_check.c's
    attn_kind_valid)."""
    windowed = kind in (ATTN_SLIDING, ATTN_CHUNKED)
    return (kind in (ATTN_FULL, ATTN_SLIDING, ATTN_FULL_NOPE, ATTN_CHUNKED, ATTN_NONE)
            + RECURRENT_KINDS
            and not (windowed and r.sliding_window == 0)
            and not (kind in RECURRENT_KINDS and r.conv_kernel == 0)
            and not (kind == ATTN_CONV and r.ssm_heads)
            and not (kind in SSM_KINDS and not r.ssm_heads)
            and not (kind in SSM_KINDS and (kind == ATTN_MAMBA1) != bool(r.ssm_dt_rank))
            and (not r.mla or kind in (ATTN_FULL, ATTN_FULL_NOPE, ATTN_NONE) + RECURRENT_KINDS))


def tensor_bytes(shape: tuple[int, ...]) -> int:
    return math.prod(shape) * 4


def place_tensors(entries: list[TensorEntry], data_start: int, alignment: int,
                  size_of=None, experts_last: bool = False) -> tuple[list[TensorEntry], int]:
    """Give every entry its offset and size (section 3.2); return them (in table
    order) and the image size. `size_of(entry)` gives a tensor's bytes (default:
    by its dtype, quant.tensor_size). experts_last (format 1.9): the data of
    every tensor but the experts' first, then the expert blocks, each in
    table order."""
    # the order of the data: table order, the experts' after the rest when asked (a stable sort)
    order = sorted(range(len(entries)),
                   key=lambda i: experts_last and entries[i].role in EXPERT_ROLES)
    out, cursor = list(entries), data_start
    firsts = {id(t) for t in _block_firsts(entries).values()}
    for i in order:
        step = alignment if id(entries[i]) in firsts else DATA_ALIGN
        offset = align_up(cursor, step)
        size = size_of(out[i]) if size_of is not None else tensor_size(out[i])
        out[i] = replace(out[i], offset=offset, size=size)
        cursor = offset + size
    return out, align_up(cursor, DATA_ALIGN)


def _block_firsts(entries: list[TensorEntry]) -> dict[tuple[int, int], TensorEntry]:
    """Each expert block's first tensor: its gate, or its up matrix without a
    gate (activation 2, format 1.14)."""
    firsts: dict[tuple[int, int], TensorEntry] = {}
    for t in entries:
        if t.role in EXPERT_ROLES and ((t.layer, t.expert) not in firsts
                                       or t.role < firsts[t.layer, t.expert].role):
            firsts[t.layer, t.expert] = t
    return firsts


def expert_block_start(role: int, activation: int) -> bool:
    """Whether a tensor of this role starts its expert block (aligned to alignment)."""
    return role == (Role.EXPERT_UP if activation == ACT_RELU2 else Role.EXPERT_GATE)


def expert_blocks(entries: list[TensorEntry]) -> list[ExpertBlock]:
    """Each expert's block, from its first tensor's offset to the end of its down tensor."""
    gates = _block_firsts(entries)
    downs = {(t.layer, t.expert): t for t in entries if t.role == Role.EXPERT_DOWN}
    return [ExpertBlock(layer, expert, g.offset, downs[layer, expert].offset
                        + downs[layer, expert].size - g.offset)
            for (layer, expert), g in gates.items()]
