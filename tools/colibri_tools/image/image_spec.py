"""Constants and byte layout of the Colibri model image, version 1.16 (docs/format.md).

Every field table below is (name, offset, struct code) and is the single place
the Python tools take offsets from. All integers and floats are little-endian.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, fields
from enum import IntEnum

from .dtypes import (  # noqa: F401 (re-exported: the image_spec names)
    BLOCK_BYTES,
    DTYPE_F32,
    DTYPE_Q4,
    DTYPE_Q4_R16,
    DTYPE_Q8,
    DTYPE_Q8_R16,
    DTYPE_QK2,
    DTYPE_QK6,
    GROUP_ROWS,
    QBLOCK,
    QK_BLOCK,
    QK_DTYPES,
    QK_R16_DTYPES,
    QUANT_DTYPES,
    R16_DTYPES,
    SUPERBLOCK_DTYPES,
    block_weights,
    qk_bits,
    row_blocks,
)

MAGIC = b"COLIBRI\x1a"
VERSION_MAJOR = 1
VERSION_MINOR = 0
NEWEST_MINOR_READ = 16  # the newest minor version this reader knows (docs/format.md)
HEADER_SIZE = 256
HEADER_SIZE_EXTENDED = 512  # format 1.13: with the record's extension (section 1.2)
LAYER_ENTRY_SIZE = 16
TENSOR_ENTRY_SIZE = 64
DATA_ALIGN = 64                 # every tensor starts at a multiple of this
DEFAULT_ALIGNMENT = 4096        # every expert block starts at a multiple of `alignment`
MIN_ALIGNMENT = 64
MAX_ALIGNMENT = 1 << 20
NO_LAYER = 0xFFFF               # layer of a global tensor
NO_EXPERT = 0xFFFF              # expert of a non-expert tensor
META_CRC_OFFSET = 24            # the 4 bytes taken as zero when computing meta_crc32
MAX_TOP_K = 64
# Upper limits of the model record (section 1.1); the C core's table is
# sdk/src/hparams.c (tests/tools/test_limits.py keeps the two equal).
LIMITS = {
    "vocab_size": 1 << 24, "hidden_size": 65536, "n_layers": 1024, "n_heads": 1024,
    "head_dim": 1024, "max_context": 1 << 24, "intermediate": 1 << 20, "n_experts": 4096,
    "top_k": MAX_TOP_K,
}


class Arch(IntEnum):
    MIXTRAL = 1
    QWEN2_MOE = 2
    OLMOE = 3
    QWEN3_MOE = 4
    SWITCH = 5
    GRANITEMOE = 6
    GRANITEMOE_SHARED = 7
    PHIMOE = 8
    ERNIE4_5_MOE = 9
    GLM4_MOE = 10
    DOTS1 = 11
    GPT_OSS = 12
    DEEPSEEK_V2 = 13
    DEEPSEEK_V3 = 14
    FLEX_OLMO = 15
    HUNYUAN_V1_MOE = 16
    GLM4_MOE_LITE = 17
    MINIMAX_M2 = 18
    EXAONE_MOE = 19
    DBRX = 20
    AFMOE = 21
    LLAMA4 = 22
    JETMOE = 23
    LONGCAT_FLASH = 24
    MIMO_V2_FLASH = 25
    LFM2_MOE = 26
    GRANITEMOE_HYBRID = 27
    QWEN3_NEXT = 28
    QWEN3_5_MOE = 29
    KIMI_LINEAR = 30
    BAILING_HYBRID = 31
    JAMBA = 32
    NEMOTRON_H = 33


class FfnKind(IntEnum):
    DENSE = 0
    MOE = 1
    SHORTCUT = 2  # format 1.12: a dense FFN and a MoE whose output waits for the next layer
    NONE = 3  # format 1.14: no FFN (Nemotron-H's mixer blocks: the layer is its operator)


class Role(IntEnum):
    TOKEN_EMBED = 1
    OUTPUT_NORM = 2
    LM_HEAD = 3
    OUTPUT_NORM_BIAS = 4
    LM_HEAD_BIAS = 5
    ATTN_NORM = 16
    ATTN_Q = 17
    ATTN_K = 18
    ATTN_V = 19
    ATTN_O = 20
    ATTN_Q_BIAS = 21
    ATTN_K_BIAS = 22
    ATTN_V_BIAS = 23
    ATTN_O_BIAS = 24
    ATTN_Q_NORM = 25
    ATTN_K_NORM = 26
    FFN_NORM = 27
    ATTN_NORM_BIAS = 28
    FFN_NORM_BIAS = 29
    ATTN_SINKS = 30
    DENSE_GATE = 32
    DENSE_UP = 33
    DENSE_DOWN = 34
    ROUTER_LOGIT_BIAS = 39
    ROUTER = 40
    SHARED_GATE = 41
    SHARED_UP = 42
    SHARED_DOWN = 43
    SHARED_EXPERT_GATE = 44
    ROUTER_BIAS = 45
    EXPERT_GATE_UP_BIAS = 46
    EXPERT_DOWN_BIAS = 47
    EXPERT_GATE = 48
    EXPERT_UP = 49
    EXPERT_DOWN = 50
    MLA_Q_A = 64  # format 1.6: Multi-head Latent Attention
    MLA_Q_A_NORM = 65
    MLA_Q_B = 66
    MLA_KV_A = 67
    MLA_KV_A_NORM = 68
    MLA_KV_B = 69
    ATTN_GATE = 70  # format 1.11: the attention output's gate (attn_bias bit 8)
    ATTN_POST_NORM = 71  # format 1.11: the sublayers' output norms (norm_kind 3)
    FFN_POST_NORM = 72
    ATTN_ROUTER = 73  # format 1.11: the attention experts' router (attn_bias bit 9)
    MOE_OUT_BIAS = 74  # format 1.11: added to the routed experts' sum (attn_bias bit 10)
    ROPE_FREQ = 75  # format 1.12: a layer's RoPE inverse frequencies (FLAG_LAYER_ROPE)
    CONV_IN_B = 76  # format 1.13: a short convolution layer's B, C and X projections,
    CONV_IN_C = 77  # its taps [H, conv_kernel] and its output projection
    CONV_IN_X = 78
    CONV_KERNEL = 79
    CONV_OUT = 80
    SSM_IN_Z = 81  # format 1.14: a Mamba2 layer's gate z, x/B/C and dt projections,
    SSM_IN_XBC = 82  # its taps [C, conv_kernel], and the float32 vectors: the
    SSM_IN_DT = 83  # convolution's bias, dt's bias, A (= -exp(A_log)), D, the
    SSM_CONV_KERNEL = 84  # gated norm's weights; its output projection
    SSM_CONV_BIAS = 85
    SSM_DT_BIAS = 86
    SSM_A = 87
    SSM_D = 88
    SSM_NORM = 89
    SSM_OUT = 90
    SSM_IN_BETA = 91  # format 1.14: a gated delta layer's beta projection
    KDA_F_A = 92  # format 1.14: a KDA layer's forget gate projection [rank or I, H],
    KDA_F_B = 93  # its second factor [I, rank] (kda_rank > 0), and its output gate's
    KDA_G_A = 94
    KDA_G_B = 95
    ATTN_HEAD_GATE = 96  # format 1.14: [n_heads, H] float32, attn_bias bit 11 (MLA's)
    MAMBA1_X_PROJ = 97  # format 1.14: a Mamba1 layer's dt / B / C projection [R + 2N, I],
    MAMBA1_DT_NORM = 98  # the norms of dt [R], B and C [N], dt's projection [I, R], and
    MAMBA1_B_NORM = 99  # A [I, N] = -exp(A_log), float32
    MAMBA1_C_NORM = 100
    MAMBA1_DT_PROJ = 101
    MAMBA1_A = 102


EXPERT_ROLES = (Role.EXPERT_GATE, Role.EXPERT_UP, Role.EXPERT_DOWN)

# Header, section 1 (the model record, section 1.1, follows in MODEL_RECORD_FIELDS).
HEADER_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("magic", 0, "8s"),
    ("version_major", 8, "H"),
    ("version_minor", 10, "H"),
    ("header_size", 12, "I"),
    ("image_size", 16, "Q"),
    ("meta_crc32", 24, "I"),
    ("flags", 28, "I"),
    ("alignment", 32, "I"),
    ("arch", 36, "I"),
    ("layer_table_offset", 40, "Q"),
    ("tensor_table_offset", 48, "Q"),
    ("n_tensors", 56, "I"),
)

MODEL_RECORD_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("zero_experts", 60, "I"),  # format 1.12: the header's former reserved u32
    ("vocab_size", 64, "I"),
    ("hidden_size", 68, "I"),
    ("n_layers", 72, "I"),
    ("n_heads", 76, "I"),
    ("n_kv_heads", 80, "I"),
    ("head_dim", 84, "I"),
    ("max_context", 88, "I"),
    ("dense_intermediate", 92, "I"),
    ("expert_intermediate", 96, "I"),
    ("n_experts", 100, "I"),
    ("shared_intermediate", 104, "I"),
    ("rms_eps", 108, "f"),
    ("rope_theta", 112, "f"),
    ("attn_bias", 116, "I"),
    ("qk_norm", 120, "I"),
    ("tie_embeddings", 124, "I"),
    ("router_score", 128, "I"),
    ("top_k", 132, "I"),
    ("router_norm_topk", 136, "I"),
    ("routed_scaling", 140, "f"),
    ("shared_gate", 144, "I"),
    ("n_group", 148, "I"),
    ("topk_group", 152, "I"),
    ("activation", 156, "I"),
    ("norm_kind", 160, "I"),
    ("embedding_scale", 164, "f"),  # format 1.1 (HDR_FLAG_SCALES); 0 = the default
    ("residual_scale", 168, "f"),
    ("attention_scale", 172, "f"),
    ("logits_divisor", 176, "f"),
    ("router_jitter", 180, "f"),  # format 1.2: sparsemixer's epsilon (router_score 3), else 0
    ("router_norm_min", 184, "f"),  # format 1.4: floor of the weights' sum (router_score 4)
    ("rope_dim", 188, "I"),  # format 1.5 (HDR_FLAG_ROPE); 0 = the default
    ("rope_kind", 192, "I"),
    ("rope_factor", 196, "f"),
    ("rope_ramp_low", 200, "f"),
    ("rope_ramp_width", 204, "f"),
    ("rope_attn_factor", 208, "f"),
    ("sliding_window", 212, "I"),  # format 1.6 (FLAG_SLIDING): a sliding layer's window
    ("swiglu_limit", 216, "f"),  # format 1.6, activation 1: the clamped SwiGLU's limit
    ("swiglu_alpha", 220, "f"),  # and its alpha
    ("mla", 224, "I"),  # format 1.7 (FLAG_MLA): 1 Multi-head Latent Attention, else 0
    ("q_lora_rank", 228, "I"),
    ("kv_lora_rank", 232, "I"),
    ("v_head_dim", 236, "I"),
    ("lora_eps", 240, "f"),
    ("qkv_clip", 244, "f"),  # format 1.11: q, k, v clamped to +-qkv_clip (0: not clamped)
    ("attn_temp_floor", 248, "f"),  # format 1.11: Llama 4's attention temperature (0: none)
    ("attn_temp_scale", 252, "f"),
)
MODEL_RECORD_END = 256  # the record fills the header (format 1.11): no reserved bytes left
# Format 1.13: the record's extension, bytes 256 .. 511 of a 512-byte header (section 1.2).
EXTENSION_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("conv_kernel", 256, "I"),  # taps of the short convolution layers (attn_kind 4)
    ("router_sum_eps", 260, "f"),  # router_score 1: added to the k weights' sum (0: 1e-20)
    ("ssm_heads", 264, "I"),  # format 1.14: the Mamba2 layers' heads (attn_kind 5), their
    ("ssm_head_dim", 268, "I"),  # channels, the state per channel, the groups of B and C
    ("ssm_state", 272, "I"),
    ("ssm_groups", 276, "I"),
    ("kda_rank", 280, "I"),  # format 1.14: a KDA layer's gate projections' rank (0: one matrix)
    ("kda_bound", 284, "f"),  # its bounded forget gate's lower bound (0: softplus, unbounded)
    ("ssm_dt_rank", 288, "I"),  # format 1.14: a Mamba1 layer's time step rank (0: none)
    ("ssm_dt_min", 292, "f"),  # format 1.14: a Mamba2 layer's least time step (0: none)
)
EXTENSION_END = 296  # 296 .. 511 reserved: zero
MAX_KDA_BOUND = 1024.0  # = MAX_KDA_BOUND in sdk/src/hparams.c
SSM_FIELDS = ("ssm_heads", "ssm_head_dim", "ssm_state", "ssm_groups")
MAX_SSM_SIZE = 1024  # = MAX_SSM_SIZE in sdk/src/hparams.c
SCALE_FIELDS = ("embedding_scale", "residual_scale", "attention_scale", "logits_divisor")
ROPE_FIELDS = ("rope_dim", "rope_kind", "rope_factor", "rope_ramp_low", "rope_ramp_width",
               "rope_attn_factor")
FLAG_SCALES = 1  # header flags bit 0: the record's four scales are set (format 1.1)
FLAG_ROPE = 2  # bit 1: the record's RoPE fields are set (format 1.5)
FLAG_SLIDING = 4  # bit 2: sliding_window and the layers' attn_kind (format 1.6)
FLAG_MLA = 8  # bit 3: the record's Multi-head Latent Attention fields are set (format 1.7)
FLAG_EXPERTS_LAST = 16  # bit 4: every expert block after all other tensor data (format 1.9)
FLAG_LAYER_ROPE = 32  # bit 5: each layer's RoPE inverse frequencies, ROPE_FREQ (format 1.12)
FLAG_KV_INT8 = 64  # bit 6: the KV cache is held as int8 (format 1.15, docs/core.md)
KNOWN_FLAGS = (FLAG_SCALES | FLAG_ROPE | FLAG_SLIDING | FLAG_MLA | FLAG_EXPERTS_LAST
               | FLAG_LAYER_ROPE | FLAG_KV_INT8)
ACT_SILU, ACT_SWIGLU_CLAMPED = 0, 1  # activation values (1: gpt-oss, format 1.6)
ACT_RELU2 = 2  # format 1.14: relu(x)^2 of an MLP without gate (Nemotron-H): no *_GATE matrices
ATTN_FULL, ATTN_SLIDING = 0, 1  # a layer's attn_kind (format 1.6)
ATTN_FULL_NOPE = 2  # format 1.10: full attention without RoPE (EXAONE's global layers)
ATTN_CHUNKED = 3  # format 1.11: chunks of sliding_window positions (Llama 4)
ATTN_CONV = 4  # format 1.13: a gated short convolution instead of attention (LFM2)
ATTN_MAMBA2 = 5  # format 1.14: a Mamba2 mixer instead of attention (Granite-4.0-H)
ATTN_GATED_DELTA = 6  # format 1.14: a gated delta rule layer (Qwen3-Next's linear attention)
ATTN_KDA = 7  # format 1.14: the delta rule with a decay per key channel (Kimi-Linear)
ATTN_MAMBA1 = 8  # format 1.14: a Mamba (v1) mixer (Jamba)
ATTN_NONE = 9  # format 1.14: no operator (Nemotron-H's FFN blocks: the layer is its FFN)
RECURRENT_KINDS = (ATTN_CONV, ATTN_MAMBA2, ATTN_GATED_DELTA, ATTN_KDA, ATTN_MAMBA1)  # no KV cache
SSM_KINDS = (ATTN_MAMBA2, ATTN_GATED_DELTA, ATTN_KDA, ATTN_MAMBA1)  # with the ssm_* sizes
MLA_FIELDS = ("mla", "q_lora_rank", "kv_lora_rank", "v_head_dim", "lora_eps")
MLA_LATENT = 1  # the mla value (format 1.7)
MAX_LORA_RANK = 65536  # = MAX_LORA_RANK in sdk/src/hparams.c
ROUTER_SOFTMAX, ROUTER_SIGMOID, ROUTER_TOPK_SOFTMAX, ROUTER_SPARSEMIXER = 0, 1, 2, 3  # router_score
ROUTER_SOFTMAX_BIASED = 4  # format 1.4: top-k of softmax + ROUTER_BIAS (ERNIE-4.5)
ROUTER_TOPK_SIGMOID_INPUT = 5  # format 1.11 (Llama 4): top-k logits, sigmoid, on the input
# norm_kind values: 1 LayerNorm with bias (format 1.2); 2 RMSNorm on each sublayer's
# output before its residual add, the sublayers reading the stream (format 1.10: OLMo-2)
NORM_RMS, NORM_LAYER, NORM_RMS_POST = 0, 1, 2
NORM_RMS_SANDWICH = 3  # format 1.11: RMSNorm on each sublayer's input and output (AFMoE)
QK_NORM_PER_HEAD_ROTATED = 3  # qk_norm 3 (format 1.10, Hunyuan): per head, after RoPE
QK_NORM_L2_ROTATED = 4  # format 1.11 (Llama 4): per head, no weights, after RoPE, RoPE layers
BIAS_ATTN, BIAS_LM_HEAD = 0xF, 0x10  # attn_bias bits: q, k, v, o; LM head (format 1.2)
ROPE_DEFAULT, ROPE_YARN = 0, 1  # rope_kind values (format 1.5)
MAX_GROUPS = 64  # = MAX_GROUPS in sdk/src/hparams.c
BIAS_SINKS, BIAS_ROUTER, BIAS_EXPERTS = 0x20, 0x40, 0x80  # format 1.6 (gpt-oss)
BIAS_ATTN_GATE = 0x100  # format 1.11 (AFMoE): the attention output's sigmoid gate
BIAS_ATTN_EXPERTS = 0x200  # format 1.11 (JetMoE): attention experts (mixture of attention heads)
BIAS_MOE_OUT = 0x400  # format 1.11 (JetMoE): a bias after the routed experts' sum
BIAS_HEAD_GATE = 0x800  # format 1.14 (Ling): an MLA layer's output times a sigmoid per head
BIAS_ALL = 0xFFF

LAYER_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("ffn_kind", 0, "I"),
    ("first_tensor", 4, "I"),
    ("n_tensors", 8, "I"),
    ("attn_kind", 12, "I"),  # format 1.6: 0 full, 1 sliding window (with FLAG_SLIDING); 1.10: 2 full, no RoPE
)

TENSOR_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("role", 0, "H"),
    ("layer", 2, "H"),
    ("expert", 4, "H"),
    ("dtype", 6, "H"),
    ("ndim", 8, "I"),
    ("shape", 12, "4I"),
    ("data_crc32", 28, "I"),
    ("offset", 32, "Q"),
    ("size", 40, "Q"),
    ("block", 48, "I"),       # format 1.3, Q8/Q4: weights per block (32); else 0
    ("row_blocks", 52, "I"),  # format 1.3, Q8/Q4: blocks per row, ceil(cols / 32); else 0
)
TENSOR_RESERVED = 56  # bytes 56 .. 63 of an entry are reserved: zero (COLIBRI_E_RESERVED otherwise)


@dataclass
class ModelRecord:
    """The model record (section 1.1), field for field."""

    vocab_size: int
    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    max_context: int
    dense_intermediate: int
    expert_intermediate: int
    n_experts: int
    shared_intermediate: int
    rms_eps: float
    rope_theta: float
    attn_bias: int = 0
    qk_norm: int = 0
    tie_embeddings: int = 0
    router_score: int = 0
    top_k: int = 0
    router_norm_topk: int = 0
    routed_scaling: float = 1.0
    shared_gate: int = 0
    n_group: int = 1
    topk_group: int = 1
    activation: int = 0
    norm_kind: int = 0
    embedding_scale: float = 0.0  # 0: the defaults 1, 1, head_dim^-0.5, 1 (no FLAG_SCALES)
    residual_scale: float = 0.0
    attention_scale: float = 0.0
    logits_divisor: float = 0.0
    router_jitter: float = 0.0  # format 1.2: sparsemixer's epsilon (router_score 3)
    router_norm_min: float = 0.0  # format 1.4: floor of the weights' sum (router_score 4)
    rope_dim: int = 0  # format 1.5; 0: RoPE over the whole head, default kind (no FLAG_ROPE)
    rope_kind: int = 0
    rope_factor: float = 0.0
    rope_ramp_low: float = 0.0
    rope_ramp_width: float = 0.0
    rope_attn_factor: float = 0.0
    sliding_window: int = 0  # format 1.6: positions a sliding layer attends to (0: none)
    swiglu_limit: float = 0.0  # format 1.6: activation 1's limit and alpha
    swiglu_alpha: float = 0.0
    mla: int = 0  # format 1.7: 1 Multi-head Latent Attention (FLAG_MLA), else 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    v_head_dim: int = 0
    lora_eps: float = 0.0
    qkv_clip: float = 0.0  # format 1.11: 0, or q, k, v clamped to +-qkv_clip (DBRX)
    attn_temp_floor: float = 0.0  # format 1.11: Llama 4's attention temperature (0: none)
    attn_temp_scale: float = 0.0
    zero_experts: int = 0  # format 1.12: zero-computation experts after the routed ones
    # format 1.12: each layer has its ROPE_FREQ table; not a record field but the
    # header's FLAG_LAYER_ROPE (set from it when read), as the core's hp.layer_rope
    layer_rope: int = 0
    kv_int8: int = 0  # format 1.15: the header's FLAG_KV_INT8, as the core's hp.kv_int8
    conv_kernel: int = 0  # format 1.13 (extension): the short convolutions' taps
    router_sum_eps: float = 0.0  # format 1.13 (extension): router 1's sum term, 0: 1e-20
    ssm_heads: int = 0  # format 1.14 (extension): the Mamba2 layers' sizes
    ssm_head_dim: int = 0
    ssm_state: int = 0
    ssm_groups: int = 0
    kda_rank: int = 0  # format 1.14 (extension): KDA's gate projections' rank, 0: full
    kda_bound: float = 0.0  # its forget gate's lower bound, 0: none (softplus)
    ssm_dt_rank: int = 0  # format 1.14 (extension): a Mamba1 layer's time step rank, 0: none
    ssm_dt_min: float = 0.0  # format 1.14 (extension): Mamba2's time steps clamped to >= it

    @property
    def extended(self) -> bool:
        """Whether the record needs the 512-byte header's extension (1.13)."""
        return (self.conv_kernel != 0 or self.router_sum_eps != 0.0 or self.ssm_heads != 0
                or self.kda_rank != 0 or self.kda_bound != 0.0 or self.ssm_dt_rank != 0
                or self.ssm_dt_min != 0.0)

    @property
    def ssm_inner(self) -> int:
        """A Mamba2 layer's inner width: heads * head_dim (0 without them)."""
        return self.ssm_heads * self.ssm_head_dim

    @property
    def conv_channels(self) -> int:
        """A recurrent layer's convolution channels: a Mamba2 layer's x, B and C,
        else (a short convolution) the hidden size."""
        if self.ssm_heads:  # a Mamba1 layer's (dt rank) convolves x only
            return self.ssm_inner + (0 if self.ssm_dt_rank else 2 * self.ssm_groups * self.ssm_state)
        return self.hidden_size

    @property
    def recurrent_floats(self) -> int:
        """Floats of one recurrent layer in one copy of the state: the last
        conv_kernel - 1 inputs, then a Mamba2 layer's S [heads][head_dim][state]."""
        return max(self.conv_kernel - 1, 0) * self.conv_channels + self.ssm_inner * self.ssm_state

    @property
    def header_size(self) -> int:
        return HEADER_SIZE_EXTENDED if self.extended else HEADER_SIZE

    @property
    def has_scales(self) -> bool:
        return any(getattr(self, name) != 0.0 for name in SCALE_FIELDS)

    @property
    def has_rope(self) -> bool:
        return any(getattr(self, name) != 0 for name in ROPE_FIELDS)

    @property
    def has_mla(self) -> bool:
        return any(getattr(self, name) != 0 for name in MLA_FIELDS)

    @property
    def router_width(self) -> int:
        """The experts a router scores: n_experts, then (format 1.12) the zero ones."""
        return self.n_experts + self.zero_experts

    @property
    def attention_experts(self) -> bool:
        """attn_bias bit 9 (format 1.11, JetMoE): ATTN_Q and ATTN_O stack the experts'."""
        return bool(self.attn_bias & BIAS_ATTN_EXPERTS)

    @property
    def out_width(self) -> int:
        """Columns of ATTN_O: n_heads * head_dim, with MLA n_heads * v_head_dim, with
        attention experts one expert's n_kv_heads * head_dim."""
        if self.attention_experts:
            return self.n_kv_heads * self.head_dim
        return self.n_heads * (self.v_head_dim if self.mla else self.head_dim)


def header_flags(record: ModelRecord, experts_last: bool = False) -> int:
    """The header's flags for this record (section 1), and the layout's
    (experts_last: section 3.2, format 1.9)."""
    return ((FLAG_SCALES if record.has_scales else 0) | (FLAG_ROPE if record.has_rope else 0)
            | (FLAG_SLIDING if record.sliding_window else 0) | (FLAG_MLA if record.has_mla else 0)
            | (FLAG_EXPERTS_LAST if experts_last else 0)
            | (FLAG_LAYER_ROPE if record.layer_rope else 0)
            | (FLAG_KV_INT8 if record.kv_int8 else 0))


@dataclass(frozen=True)
class LayerEntry:
    ffn_kind: int
    first_tensor: int
    n_tensors: int
    attn_kind: int = 0  # format 1.6: ATTN_FULL or ATTN_SLIDING; .. ATTN_NONE (1.14)


@dataclass(frozen=True)
class TensorEntry:
    """One tensor table entry. Before placement offset, size and crc are 0."""

    role: int
    layer: int
    expert: int
    shape: tuple[int, ...]
    dtype: int = DTYPE_F32
    data_crc32: int = 0
    offset: int = 0
    size: int = 0

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.role, self.layer, self.expert)

    def describe(self) -> str:
        name = Role(self.role).name if self.role in Role._value2member_map_ else str(self.role)
        where = "global" if self.layer == NO_LAYER else f"layer {self.layer}"
        if self.expert != NO_EXPERT:
            where += f" expert {self.expert}"
        return f"{name} ({where})"


def _pack_fields(buf: bytearray, base: int, table: tuple, values: dict) -> None:
    for name, offset, code in table:
        value = values[name]
        if code == "4I":
            struct.pack_into("<4I", buf, base + offset, *value)
        else:
            struct.pack_into("<" + code, buf, base + offset, value)


def _unpack_fields(buf: bytes | memoryview, base: int, table: tuple) -> dict:
    out = {}
    for name, offset, code in table:
        value = struct.unpack_from("<" + code, buf, base + offset)
        out[name] = value if code == "4I" else value[0]
    return out


def pack_header(buf: bytearray, header: dict, record: ModelRecord) -> None:
    """Write the header (section 1 and 1.1) into buf[0:256], and the record's
    extension (1.2) into buf[256:512] when header_size is 512."""
    _pack_fields(buf, 0, HEADER_FIELDS, header)
    values = {f.name: getattr(record, f.name) for f in fields(record)}
    _pack_fields(buf, 0, MODEL_RECORD_FIELDS, values)
    if header["header_size"] == HEADER_SIZE_EXTENDED:
        _pack_fields(buf, 0, EXTENSION_FIELDS, values)


def unpack_header(buf: bytes | memoryview) -> tuple[dict, ModelRecord]:
    """The header and the record; the extension's fields when header_size is
    512 and the bytes are there (else their defaults)."""
    header = _unpack_fields(buf, 0, HEADER_FIELDS)
    extended = header["header_size"] == HEADER_SIZE_EXTENDED and len(buf) >= HEADER_SIZE_EXTENDED
    extension = _unpack_fields(buf, 0, EXTENSION_FIELDS) if extended else {}
    record = ModelRecord(**_unpack_fields(buf, 0, MODEL_RECORD_FIELDS), **extension,
                         layer_rope=int(bool(header["flags"] & FLAG_LAYER_ROPE)),
                         kv_int8=int(bool(header["flags"] & FLAG_KV_INT8)))
    return header, record


def pack_layer(buf: bytearray, offset: int, entry: LayerEntry) -> None:
    values = {"ffn_kind": entry.ffn_kind, "first_tensor": entry.first_tensor,
              "n_tensors": entry.n_tensors, "attn_kind": entry.attn_kind}
    _pack_fields(buf, offset, LAYER_FIELDS, values)


def unpack_layer(buf: bytes | memoryview, offset: int) -> LayerEntry:
    values = _unpack_fields(buf, offset, LAYER_FIELDS)
    return LayerEntry(values["ffn_kind"], values["first_tensor"], values["n_tensors"],
                      values["attn_kind"])


def pack_tensor(buf: bytearray, offset: int, entry: TensorEntry) -> None:
    quantized = entry.dtype in QUANT_DTYPES
    values = {"role": entry.role, "layer": entry.layer, "expert": entry.expert,
              "dtype": entry.dtype, "ndim": entry.ndim,
              "shape": tuple(entry.shape) + (0,) * (4 - entry.ndim),
              "data_crc32": entry.data_crc32, "offset": entry.offset, "size": entry.size,
              "block": block_weights(entry.dtype) if quantized else 0,
              "row_blocks": row_blocks(entry.shape[-1], entry.dtype) if quantized else 0}
    _pack_fields(buf, offset, TENSOR_FIELDS, values)


def unpack_tensor(buf: bytes | memoryview, offset: int) -> tuple[TensorEntry, int, tuple[int, ...],
                                                                 tuple[int, int]]:
    """Decode one entry; also return its raw ndim, raw 4-entry shape and raw
    (block, row_blocks) for validation."""
    v = _unpack_fields(buf, offset, TENSOR_FIELDS)
    ndim = v["ndim"]
    shape = tuple(v["shape"][:ndim]) if 1 <= ndim <= 4 else tuple(v["shape"])
    entry = TensorEntry(v["role"], v["layer"], v["expert"], shape, v["dtype"],
                        v["data_crc32"], v["offset"], v["size"])
    return entry, ndim, v["shape"], (v["block"], v["row_blocks"])


def tables_end(n_layers: int, n_tensors: int, header_size: int = HEADER_SIZE) -> int:
    """End of the tensor table = the extent meta_crc32 covers."""
    return header_size + LAYER_ENTRY_SIZE * n_layers + TENSOR_ENTRY_SIZE * n_tensors


def meta_crc32(buf: bytes | bytearray | memoryview, end: int) -> int:
    """CRC-32 of buf[0:end] with the meta_crc32 field taken as zero (section 1)."""
    view = memoryview(buf)
    crc = zlib.crc32(view[:META_CRC_OFFSET])
    crc = zlib.crc32(b"\0\0\0\0", crc)
    return zlib.crc32(view[META_CRC_OFFSET + 4:end], crc) & 0xFFFFFFFF
