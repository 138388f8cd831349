"""Deliberately broken model images, each with the status colibri_init (or
colibri_verify) must report. Built from one valid image by editing bytes at
the offsets docs/format.md gives; written here on their own, independent of
the converter's code, so a mistake in the writer cannot hide here.

    python tests/sdk/broken_images.py VALID OUT_DIR [VALID_Q8 [VALID_R16 [VALID_QK3 [VALID_QK3_R16]]]]
(model.bin files) writes one file per defect plus manifest.json (name ->
expected statuses); with an image whose feed-forward matrices are Q8 (format 1.3), also the
quantized defects, with one whose are Q4_R16 (1.8), those of row groups,
with one whose are QK3 (1.15), those of super-blocks, and with one whose are
QK3_R16 (1.16), those of super-blocks in groups of 16 rows.
"""
from __future__ import annotations

import json
import pathlib
import struct
import sys
import zlib
from collections.abc import Callable

# Status numbers pinned in colibri.h.
OK, BAD_MAGIC, UNSUPPORTED_VERSION, TRUNCATED, CHECKSUM = 0, 2, 3, 4, 5
OUT_OF_RANGE, MISALIGNED, UNSUPPORTED_ARCH, UNSUPPORTED_ROUTER = 6, 7, 8, 9
CONFIG_MISMATCH, BAD_HYPERPARAMS, UNSUPPORTED_DTYPE = 10, 14, 15
BAD_TENSOR_TABLE, BAD_SHAPE, OVERLAP, BAD_LAYER_TABLE = 16, 17, 18, 19
QUANT_SIZE, QUANT_BLOCKS, QUANT_SCALE, RESERVED = 31, 32, 33, 35

HEADER, LAYER_ENTRY, TENSOR_ENTRY = 256, 16, 64
ROLE_ATTN_NORM, ROLE_ROUTER, ROLE_EXPERT_GATE = 16, 40, 48
DTYPE_Q8, DTYPE_Q4, DTYPE_Q8_R16, DTYPE_Q4_R16 = 1, 2, 3, 4
DTYPE_QK2, DTYPE_QK3, DTYPE_QK2_R16, DTYPE_QK3_R16 = 5, 6, 10, 11
DTYPE_UNKNOWN = 15  # the first dtype no reader knows (1.16 has 0 .. 14)
ROLE_TOKEN_EMBED = 1


def put(img: bytearray, offset: int, fmt: str, value) -> None:
    struct.pack_into("<" + fmt, img, offset, value)


def get(img: bytes, offset: int, fmt: str):
    return struct.unpack_from("<" + fmt, img, offset)[0]


def fix_crc(img: bytearray) -> bytearray:
    end = get(img, 48, "Q") + get(img, 56, "I") * TENSOR_ENTRY
    crc = zlib.crc32(bytes(img[:24]) + b"\0\0\0\0" + bytes(img[28:end]))
    put(img, 24, "I", crc)
    return img


def tensor(img: bytes, index: int) -> int:
    """Byte offset of tensor table entry `index`."""
    return get(img, 48, "Q") + index * TENSOR_ENTRY


def first_role(img: bytes, role: int) -> int:
    for i in range(get(img, 56, "I")):
        if get(img, tensor(img, i), "H") == role:
            return i
    raise ValueError(f"image has no tensor of role {role}")


def first_expert_gate(img: bytes) -> int:
    return first_role(img, ROLE_EXPERT_GATE)


def edited(valid: bytes, edit: Callable[[bytearray], None], crc: bool = True) -> bytes:
    img = bytearray(valid)
    edit(img)
    return bytes(fix_crc(img) if crc else img)


def _defects(v: bytes) -> dict[str, tuple[bytes, dict]]:
    n_tensors = get(v, 56, "I")
    size = len(v)
    gate = first_expert_gate(v)
    last = n_tensors - 1
    t1 = tensor(v, 1)

    def set_at(offset: int, fmt: str, value):
        return lambda img: put(img, offset, fmt, value)

    def scales(flags: int, values: tuple[float, float, float, float]):
        def edit(img: bytearray) -> None:
            put(img, 28, "I", flags)
            for i, value in enumerate(values):
                put(img, 164 + 4 * i, "f", value)
        return edit

    def set_all(*fields: tuple[int, str, object]):
        def edit(img: bytearray) -> None:
            for offset, fmt, value in fields:
                put(img, offset, fmt, value)
        return edit

    def router(score: int, top_k: int, jitter: float):  # format 1.2: sparsemixer
        return set_all((128, "I", score), (132, "I", top_k), (180, "f", jitter))

    def norm_min(score: int, value: float):  # format 1.4: the weights' floor
        return set_all((128, "I", score), (184, "f", value))

    def sliding(window: int, attn_kind: int = 0):  # format 1.6: flag, window, layer 0's kind
        return set_all((28, "I", 4), (212, "I", window), (HEADER + 12, "I", attn_kind))

    def attn_bias_with(bits: int):  # the record's attn_bias with more bits set
        return set_at(116, "I", get(v, 116, "I") | bits)

    def temperature(floor: float, scale: float):  # format 1.11: Llama 4's temperature
        return set_all((248, "f", floor), (252, "f", scale))

    def swiglu(activation: int, limit: float, alpha: float):  # format 1.6: clamped SwiGLU
        return set_all((156, "I", activation), (216, "f", limit), (220, "f", alpha))

    def rope(flags: int, dim: int, kind: int, yarn: tuple[float, float, float, float]):
        """The header flags and the 1.5 RoPE fields (offsets 188 .. 211)."""
        def edit(img: bytearray) -> None:
            put(img, 28, "I", flags)
            put(img, 188, "I", dim)
            put(img, 192, "I", kind)
            for i, value in enumerate(yarn):
                put(img, 196 + 4 * i, "f", value)
        return edit

    def groups(n_group: int, topk_group: int):
        return lambda img: (put(img, 148, "I", n_group), put(img, 152, "I", topk_group))

    head_dim = get(v, 84, "I")
    yarn = (4.0, 1.0, 2.0, 1.1)

    def mla(flags: int, kind: int, q_lora: int, kv_lora: int, v_dim: int, eps: float):
        """The header flags and the 1.7 MLA fields (offsets 224 .. 243)."""
        def edit(img: bytearray) -> None:
            put(img, 28, "I", flags)
            for i, value in enumerate((kind, q_lora, kv_lora, v_dim)):
                put(img, 224 + 4 * i, "I", value)
            put(img, 240, "f", eps)
        return edit

    def swap_first_two(img: bytearray) -> None:
        a, b = tensor(img, 0), tensor(img, 1)
        img[a:a + 2], img[b:b + 2] = img[b:b + 2], img[a:a + 2]

    def flip_weight(img: bytearray) -> None:
        img[get(img, tensor(img, gate) + 32, "Q") + 5] ^= 0x40

    init = lambda status: {"init": status}  # noqa: E731
    return {
        "bad_magic": (edited(v, set_at(0, "B", ord("X")), crc=False), init(BAD_MAGIC)),
        "text_file": (b"COLIBRI is not this text\n" * 20, init(BAD_MAGIC)),
        "version_2": (edited(v, set_at(8, "H", 2)), init(UNSUPPORTED_VERSION)),
        "unknown_flag": (edited(v, set_at(28, "I", 1 << 31)), init(UNSUPPORTED_VERSION)),
        # format 1.9's EXPERTS_LAST on an image whose expert blocks lie between layers
        "experts_last_flag_on_interleaved_data": (
            edited(v, set_at(28, "I", get(v, 28, "I") | 16)), init(OVERLAP)),
        "header_only_100_bytes": (v[:100], init(TRUNCATED)),
        "cut_in_tensor_table": (v[:tensor(v, 2) + 10], init(TRUNCATED)),
        "cut_last_byte": (v[:-1], init(TRUNCATED)),
        "image_size_larger_than_file": (edited(v, set_at(16, "Q", size + 64)), init(TRUNCATED)),
        "header_byte_flipped": (edited(v, set_at(68, "I", get(v, 68, "I") + 1), crc=False),
                                init(CHECKSUM)),
        "table_byte_flipped": (edited(v, set_at(t1 + 60, "B", 1), crc=False), init(CHECKSUM)),
        # Reserved bytes (docs/format.md 7): a later minor's feature, refused even with a
        # good checksum.
        # The header's u32 at 60, reserved before 1.12, is zero_experts: 2^24 of them is
        # past the 4096 experts a layer may have.
        "zero_experts_too_many": (edited(v, set_at(60, "I", 1 << 24)), init(BAD_HYPERPARAMS)),
        "tensor_reserved_first": (edited(v, set_at(tensor(v, 0) + 56, "B", 1)), init(RESERVED)),
        "tensor_reserved_last": (edited(v, set_at(tensor(v, last) + 63, "B", 1)), init(RESERVED)),
        "offset_past_end": (edited(v, set_at(tensor(v, last) + 32, "Q", size)),
                            init(OUT_OF_RANGE)),
        "offset_far_past_end": (edited(v, set_at(t1 + 32, "Q", 1 << 62)), init(OUT_OF_RANGE)),
        "size_overflows": (edited(v, set_at(t1 + 40, "Q", (1 << 64) - 64)), init(OUT_OF_RANGE)),
        "tensor_misaligned": (edited(v, set_at(t1 + 32, "Q", get(v, t1 + 32, "Q") + 4)),
                              init(MISALIGNED)),
        "expert_block_misaligned": (
            edited(v, set_at(tensor(v, gate) + 32, "Q", get(v, tensor(v, gate) + 32, "Q") + 64)),
            init(MISALIGNED)),
        "gap_in_expert_block": (
            edited(v, set_at(tensor(v, gate + 1) + 32, "Q", get(v, tensor(v, gate + 1) + 32, "Q")
                             + 64)), init(MISALIGNED)),
        "unknown_arch": (edited(v, set_at(36, "I", 99)), init(UNSUPPORTED_ARCH)),
        "unknown_activation": (edited(v, set_at(156, "I", 3)), init(UNSUPPORTED_ARCH)),
        "sigmoid_router_without_bias": (edited(v, set_at(128, "I", 1)), init(BAD_LAYER_TABLE)),
        "groups_not_dividing_experts": (edited(v, groups(3, 1)), init(UNSUPPORTED_ROUTER)),
        "groups_keep_too_few_experts": (edited(v, groups(4, 1)), init(UNSUPPORTED_ROUTER)),
        "topk_group_above_n_group": (edited(v, groups(2, 3)), init(UNSUPPORTED_ROUTER)),
        "groups_too_many": (edited(v, groups(128, 1)), init(UNSUPPORTED_ROUTER)),
        "rope_fields_without_flag": (edited(v, rope(0, 4, 0, (0.0,) * 4)), init(BAD_HYPERPARAMS)),
        "rope_flag_without_fields": (edited(v, rope(2, 0, 0, (0.0,) * 4)), init(BAD_HYPERPARAMS)),
        "rope_dim_odd": (edited(v, rope(2, 3, 0, (0.0,) * 4)), init(BAD_HYPERPARAMS)),
        "rope_dim_above_head_dim": (edited(v, rope(2, head_dim + 2, 0, (0.0,) * 4)),
                                    init(BAD_HYPERPARAMS)),
        "mla_fields_without_flag": (edited(v, mla(0, 1, 0, 16, 8, 1e-6)), init(BAD_HYPERPARAMS)),
        "mla_flag_without_fields": (edited(v, mla(8, 0, 0, 0, 0, 0.0)), init(UNSUPPORTED_ARCH)),
        "mla_kind_unknown": (edited(v, mla(8, 2, 0, 16, 8, 1e-6)), init(UNSUPPORTED_ARCH)),
        "mla_kv_rank_zero": (edited(v, mla(8, 1, 0, 0, 8, 1e-6)), init(BAD_HYPERPARAMS)),
        "mla_v_head_dim_huge": (edited(v, mla(8, 1, 0, 16, 4096, 1e-6)), init(BAD_HYPERPARAMS)),
        "mla_lora_eps_nan": (edited(v, mla(8, 1, 0, 16, 8, float("nan"))),
                             init(BAD_HYPERPARAMS)),
        "mla_on_grouped_query_heads": (edited(v, mla(8, 1, 0, 16, 8, 1e-6)),
                                      init(BAD_HYPERPARAMS)),
        "rope_kind_unknown": (edited(v, rope(2, 4, 2, yarn)), init(UNSUPPORTED_ARCH)),
        "default_rope_with_yarn_numbers": (edited(v, rope(2, 4, 0, yarn)), init(BAD_HYPERPARAMS)),
        "yarn_factor_nan": (edited(v, rope(2, 4, 1, (float("nan"), 1.0, 2.0, 1.1))),
                            init(BAD_HYPERPARAMS)),
        "yarn_ramp_width_zero": (edited(v, rope(2, 4, 1, (4.0, 1.0, 0.0, 1.1))),
                                 init(BAD_HYPERPARAMS)),
        "yarn_ramp_low_negative": (edited(v, rope(2, 4, 1, (4.0, -1.0, 2.0, 1.1))),
                                   init(BAD_HYPERPARAMS)),
        "yarn_attn_factor_huge": (edited(v, rope(2, 4, 1, (4.0, 1.0, 2.0, 1e9))),
                                  init(BAD_HYPERPARAMS)),
        "routed_scaling_nan": (edited(v, set_at(140, "I", 0x7FC00000)), init(UNSUPPORTED_ROUTER)),
        "routed_scaling_huge": (edited(v, set_at(140, "I", 0x7F7FFFFF)), init(UNSUPPORTED_ROUTER)),
        "scales_without_flag": (edited(v, scales(0, (2.0, 1.0, 0.5, 1.0))), init(BAD_HYPERPARAMS)),
        "scale_flag_without_scales": (edited(v, scales(1, (0.0, 0.0, 0.0, 0.0))),
                                      init(BAD_HYPERPARAMS)),
        "scale_negative": (edited(v, scales(1, (2.0, -1.0, 0.5, 1.0))), init(BAD_HYPERPARAMS)),
        "scale_too_large": (edited(v, scales(1, (2.0, 1.0, 0.5, 1e6))), init(BAD_HYPERPARAMS)),
        "router_score_unknown": (edited(v, set_at(128, "I", 99)), init(UNSUPPORTED_ROUTER)),
        # Format 1.6 (gpt-oss): the SLIDING flag and window, attn_kind, activation 1 and its
        # limit and alpha, attn_bias bits 5-7.
        "sliding_flag_without_window": (edited(v, set_at(28, "I", 4)), init(BAD_HYPERPARAMS)),
        "sliding_window_without_flag": (edited(v, set_at(212, "I", 8)), init(BAD_HYPERPARAMS)),
        "sliding_window_huge": (edited(v, sliding(1 << 25)), init(BAD_HYPERPARAMS)),
        "attn_kind_sliding_without_flag": (edited(v, set_at(HEADER + 12, "I", 1)),
                                           init(BAD_LAYER_TABLE)),
        "clamped_swiglu_without_limit": (edited(v, swiglu(1, 0.0, 1.702)), init(BAD_HYPERPARAMS)),
        "clamped_swiglu_alpha_nan": (edited(v, swiglu(1, 7.0, float("nan"))),
                                     init(BAD_HYPERPARAMS)),
        "swiglu_limit_without_clamp": (edited(v, swiglu(0, 7.0, 0.0)), init(BAD_HYPERPARAMS)),
        "sinks_missing": (edited(v, attn_bias_with(32)), init(BAD_LAYER_TABLE)),
        "router_logit_bias_missing": (edited(v, attn_bias_with(64)), init(BAD_LAYER_TABLE)),
        "expert_biases_missing": (edited(v, attn_bias_with(128)), init(BAD_LAYER_TABLE)),
        # Format 1.2 (PhiMoE): norm_kind 1, router_score 3 with its jitter, attn_bias bit 4.
        "unknown_norm_kind": (edited(v, set_at(160, "I", 4)), init(UNSUPPORTED_ARCH)),
        # Format 1.11 (DBRX, AFMoE, Llama 4, JetMoE): the q/k/v clamp, the output gate, the
        # temperature, attention experts, the MoE output bias, chunks, the new kinds.
        "qkv_clip_negative": (edited(v, set_at(244, "f", -1.0)), init(BAD_HYPERPARAMS)),
        "qkv_clip_negative_zero": (edited(v, set_at(244, "I", 0x80000000)),
                                   init(BAD_HYPERPARAMS)),
        "qkv_clip_nan": (edited(v, set_at(244, "I", 0x7FC00000)), init(BAD_HYPERPARAMS)),
        "qkv_clip_huge": (edited(v, set_at(244, "f", 1e6)), init(BAD_HYPERPARAMS)),
        "attn_gate_missing": (edited(v, attn_bias_with(256)), init(BAD_LAYER_TABLE)),
        "attention_experts_heads_mismatch": (edited(v, attn_bias_with(512)), init(BAD_HYPERPARAMS)),
        "moe_out_bias_missing": (edited(v, attn_bias_with(1024)), init(BAD_LAYER_TABLE)),
        "attn_bias_bit_11": (edited(v, attn_bias_with(2048)), init(BAD_HYPERPARAMS)),
        "temperature_floor_without_scale": (edited(v, set_at(248, "f", 8192.0)),
                                            init(BAD_HYPERPARAMS)),
        "temperature_scale_without_floor": (edited(v, set_at(252, "f", 0.1)),
                                            init(BAD_HYPERPARAMS)),
        "temperature_floor_below_one": (edited(v, temperature(0.5, 0.1)), init(BAD_HYPERPARAMS)),
        "temperature_scale_nan": (edited(v, temperature(8192.0, float("nan"))),
                                  init(BAD_HYPERPARAMS)),
        "temperature_floor_huge": (edited(v, temperature(1e9, 0.1)), init(BAD_HYPERPARAMS)),
        "unknown_qk_norm_5": (edited(v, set_at(120, "I", 5)), init(UNSUPPORTED_ARCH)),
        "router_score_6": (edited(v, set_at(128, "I", 6)), init(UNSUPPORTED_ROUTER)),
        "chunked_without_window": (edited(v, set_at(HEADER + 12, "I", 3)),
                                   init(BAD_LAYER_TABLE)),
        "attn_kind_4": (edited(v, sliding(8, attn_kind=4)), init(BAD_LAYER_TABLE)),
        "post_norms_missing": (edited(v, set_at(160, "I", 3)), init(BAD_LAYER_TABLE)),
        "layer_norm_without_biases": (edited(v, set_at(160, "I", 1)), init(BAD_LAYER_TABLE)),
        "lm_head_bias_missing": (edited(v, attn_bias_with(16)), init(BAD_LAYER_TABLE)),
        "jitter_without_sparsemixer": (edited(v, set_at(180, "f", 0.01)),
                                       init(UNSUPPORTED_ROUTER)),
        "jitter_negative_zero": (edited(v, set_at(180, "I", 0x80000000)),
                                 init(UNSUPPORTED_ROUTER)),
        "sparsemixer_jitter_negative": (edited(v, router(3, 2, -0.01)), init(UNSUPPORTED_ROUTER)),
        "sparsemixer_jitter_nan": (edited(v, router(3, 2, float("nan"))),
                                   init(UNSUPPORTED_ROUTER)),
        "sparsemixer_jitter_above_one": (edited(v, router(3, 2, 1.5)), init(UNSUPPORTED_ROUTER)),
        "sparsemixer_top_3": (edited(v, router(3, 3, 0.01)), init(UNSUPPORTED_ROUTER)),
        # Format 1.4 (ERNIE-4.5): router_score 4 with router_norm_min and ROUTER_BIAS.
        "router_bias_missing": (edited(v, norm_min(4, 1e-12)), init(BAD_LAYER_TABLE)),
        "norm_min_without_biased_router": (edited(v, norm_min(0, 1e-12)),
                                           init(UNSUPPORTED_ROUTER)),
        "norm_min_negative": (edited(v, norm_min(4, -0.5)), init(UNSUPPORTED_ROUTER)),
        "norm_min_infinite": (edited(v, norm_min(4, float("inf"))), init(UNSUPPORTED_ROUTER)),
        "norm_min_above_one": (edited(v, norm_min(4, 2.0)), init(UNSUPPORTED_ROUTER)),
        "rope_theta_subnormal": (edited(v, set_at(112, "I", 0x00000001)), init(BAD_HYPERPARAMS)),
        "rope_theta_below_one": (edited(v, set_at(112, "f", 0.5)), init(BAD_HYPERPARAMS)),
        "zero_heads": (edited(v, set_at(76, "I", 0)), init(BAD_HYPERPARAMS)),
        "odd_head_dim": (edited(v, set_at(84, "I", 7)), init(BAD_HYPERPARAMS)),
        "top_k_above_experts": (edited(v, set_at(132, "I", 4097)), init(BAD_HYPERPARAMS)),
        "eps_negative": (edited(v, set_at(108, "f", -1.0)), init(BAD_HYPERPARAMS)),
        "alignment_not_power_of_two": (edited(v, set_at(32, "I", 3000)), init(BAD_HYPERPARAMS)),
        "n_layers_huge": (edited(v, set_at(72, "I", 0xFFFFFFFF)), init(BAD_HYPERPARAMS)),
        "dtype_unknown": (edited(v, set_at(t1 + 6, "H", 7)), init(UNSUPPORTED_DTYPE)),
        "q8_dtype_without_blocks": (edited(v, set_at(tensor(v, gate) + 6, "H", DTYPE_Q8)),
                                    init(QUANT_BLOCKS)),
        "tensors_swapped": (edited(v, swap_first_two), init(BAD_TENSOR_TABLE)),
        "expert_index_wrong": (edited(v, set_at(tensor(v, gate) + 4, "H", 1)),
                               init(BAD_TENSOR_TABLE)),
        "shape_wrong": (edited(v, set_at(t1 + 12, "I", get(v, t1 + 12, "I") + 1)),
                        init(BAD_SHAPE)),
        "overlapping_tensors": (edited(v, set_at(t1 + 32, "Q", get(v, tensor(v, 0) + 32, "Q"))),
                                init(OVERLAP)),
        "tensor_over_tables": (edited(v, set_at(tensor(v, 0) + 32, "Q", 0)), init(OVERLAP)),
        "layer_kind_unknown": (edited(v, set_at(HEADER, "I", 7)), init(BAD_LAYER_TABLE)),
        "layer_first_tensor_wrong": (edited(v, set_at(HEADER + 4, "I", 0)),
                                     init(BAD_LAYER_TABLE)),
        "one_tensor_too_many": (edited(v, set_at(56, "I", n_tensors + 1)), init(BAD_LAYER_TABLE)),
        "expert_weight_corrupted": (edited(v, flip_weight, crc=False),
                                    {"init": OK, "verify": CHECKSUM}),
    }


def _quant_defects(v: bytes) -> dict[str, tuple[bytes, dict]]:
    """Defects of a format 1.3 image whose expert matrices are Q8: 34-byte
    blocks of 32 (a binary16 scale, then 32 int8), block fields at entry
    offsets 48 (weights per block) and 52 (blocks per row)."""
    gate = tensor(v, first_expert_gate(v))
    router = tensor(v, first_role(v, ROLE_ROUTER))
    norm = tensor(v, first_role(v, ROLE_ATTN_NORM))
    data_at, size = get(v, gate + 32, "Q"), get(v, gate + 40, "Q")
    assert get(v, gate + 6, "H") == DTYPE_Q8 and get(v, gate + 48, "I") == 32

    def set_at(offset: int, fmt: str, value):
        return lambda img: put(img, offset, fmt, value)

    def scale(bits: int, block: int):
        """Block `block`'s scale set to the binary16 `bits`, data CRC made right."""
        def edit(img: bytearray) -> None:
            put(img, data_at + 34 * block, "H", bits)
            put(img, gate + 28, "I", zlib.crc32(bytes(img[data_at:data_at + size])))
        return edit

    def flip_q(img: bytearray) -> None:
        img[data_at + 34 + 7] ^= 0x01

    init = lambda status: {"init": status}  # noqa: E731
    return {
        "q8_block_size_16": (edited(v, set_at(gate + 48, "I", 16)), init(QUANT_BLOCKS)),
        "q8_row_blocks_off_by_one": (edited(v, set_at(gate + 52, "I", get(v, gate + 52, "I") + 1)),
                                     init(QUANT_BLOCKS)),
        "q8_size_one_block_short": (edited(v, set_at(gate + 40, "Q", size - 34)),
                                    init(QUANT_SIZE)),
        "q8_size_one_row_long": (edited(v, set_at(gate + 40, "Q", size + get(v, gate + 52, "I")
                                                  * 34)), init(QUANT_SIZE)),
        "q8_read_as_q4": (edited(v, set_at(gate + 6, "H", DTYPE_Q4)), init(QUANT_SIZE)),
        "q8_dtype_unknown": (edited(v, set_at(gate + 6, "H", DTYPE_UNKNOWN)),
                             init(UNSUPPORTED_DTYPE)),
        "q8_router": (edited(v, set_at(router + 6, "H", DTYPE_Q8)), init(UNSUPPORTED_DTYPE)),
        "q4_norm": (edited(v, set_at(norm + 6, "H", DTYPE_Q4)), init(UNSUPPORTED_DTYPE)),
        "q8_scale_nan": (edited(v, scale(0x7E00, 1)), {"init": OK, "verify": QUANT_SCALE}),
        "q8_scale_infinite": (edited(v, scale(0xFC00, 0)), {"init": OK, "verify": QUANT_SCALE}),
        "q8_weight_corrupted": (edited(v, flip_q, crc=False), {"init": OK, "verify": CHECKSUM}),
    }


def _row_group_defects(v: bytes) -> dict[str, tuple[bytes, dict]]:
    """Defects of a format 1.8 image whose expert matrices are Q4_R16: tiles
    of 16 rows (16 binary16 scales, then 256 bytes of nibbles), the last
    group of a matrix padded to 16 rows."""
    gate = tensor(v, first_expert_gate(v))
    embed = tensor(v, first_role(v, ROLE_TOKEN_EMBED))
    data_at, size = get(v, gate + 32, "Q"), get(v, gate + 40, "Q")
    rows, row_blocks = get(v, gate + 12, "I"), get(v, gate + 52, "I")
    assert get(v, gate + 6, "H") == DTYPE_Q4_R16 and rows % 16 != 0
    tile = 16 * 18

    def set_at(offset: int, fmt: str, value):
        return lambda img: put(img, offset, fmt, value)

    def scale(bits: int, at: int):
        """The scale at data byte `at` set to the binary16 `bits`, data CRC made right."""
        def edit(img: bytearray) -> None:
            put(img, data_at + at, "H", bits)
            put(img, gate + 28, "I", zlib.crc32(bytes(img[data_at:data_at + size])))
        return edit

    init = lambda status: {"init": status}  # noqa: E731
    last_group = (rows // 16) * row_blocks * tile  # its tile 0; rows past `rows` are padding
    return {
        "r16_size_rows_not_padded": (edited(v, set_at(gate + 40, "Q", rows * row_blocks * 18)),
                                     init(QUANT_SIZE)),
        "r16_size_one_tile_short": (edited(v, set_at(gate + 40, "Q", size - tile)),
                                    init(QUANT_SIZE)),
        "r16_token_embedding": (edited(v, set_at(embed + 6, "H", DTYPE_Q4_R16)),
                                init(UNSUPPORTED_DTYPE)),
        "r16_read_as_q4": (edited(v, set_at(gate + 6, "H", DTYPE_Q4)), init(QUANT_SIZE)),
        "r16_scale_nan": (edited(v, scale(0x7E00, tile + 2 * 5)),
                          {"init": OK, "verify": QUANT_SCALE}),
        "r16_padding_row_scale_infinite": (edited(v, scale(0x7C00, last_group + 2 * 15)),
                                           {"init": OK, "verify": QUANT_SCALE}),
    }


def _set_at(offset: int, fmt: str, value):
    """An edit that writes value (struct format fmt) at offset."""
    return lambda img: put(img, offset, fmt, value)


def _half_editor(gate: int, data_at: int, size: int):
    """half(bits, at): an edit setting the binary16 at data byte `at` of the
    tensor whose entry is at `gate` to `bits`, its data CRC made right (the
    super-block defects of 1.15 and 1.16)."""
    def half(bits: int, at: int):
        def edit(img: bytearray) -> None:
            put(img, data_at + at, "H", bits)
            put(img, gate + 28, "I", zlib.crc32(bytes(img[data_at:data_at + size])))
        return edit
    return half


def _superblock_defects(v: bytes) -> dict[str, tuple[bytes, dict]]:
    """Defects of a format 1.15 image whose expert matrices are QK3: rows of
    super-blocks of 256 weights, 112 bytes each (binary16 d and dmin, 12
    bytes of scales and mins, 96 of levels), block fields 256 and
    ceil(cols / 256)."""
    gate = tensor(v, first_expert_gate(v))
    router = tensor(v, first_role(v, ROLE_ROUTER))
    embed = tensor(v, first_role(v, ROLE_TOKEN_EMBED))
    data_at, size = get(v, gate + 32, "Q"), get(v, gate + 40, "Q")
    rows, row_blocks = get(v, gate + 12, "I"), get(v, gate + 52, "I")
    assert get(v, gate + 6, "H") == DTYPE_QK3 and get(v, gate + 48, "I") == 256
    sb = 112

    set_at = _set_at
    half = _half_editor(gate, data_at, size)

    def flip_level(img: bytearray) -> None:
        img[data_at + sb + 40] ^= 0x10

    init = lambda status: {"init": status}  # noqa: E731
    return {
        "qk_block_size_32": (edited(v, set_at(gate + 48, "I", 32)), init(QUANT_BLOCKS)),
        "qk_row_blocks_off_by_one": (edited(v, set_at(gate + 52, "I", row_blocks + 1)),
                                     init(QUANT_BLOCKS)),
        "qk_size_one_superblock_short": (edited(v, set_at(gate + 40, "Q", size - sb)),
                                         init(QUANT_SIZE)),
        "qk_size_as_q8": (edited(v, set_at(gate + 40, "Q", rows * row_blocks * 8 * 34)),
                          init(QUANT_SIZE)),
        "qk_read_as_qk2": (edited(v, set_at(gate + 6, "H", DTYPE_QK2)), init(QUANT_SIZE)),
        "qk_token_embedding": (edited(v, set_at(embed + 6, "H", DTYPE_QK3)),
                               init(UNSUPPORTED_DTYPE)),
        "qk_router": (edited(v, set_at(router + 6, "H", DTYPE_QK3)), init(UNSUPPORTED_DTYPE)),
        "qk_d_infinite": (edited(v, half(0x7C00, sb)), {"init": OK, "verify": QUANT_SCALE}),
        "qk_dmin_nan": (edited(v, half(0xFE00, 2)), {"init": OK, "verify": QUANT_SCALE}),
        "qk_level_corrupted": (edited(v, flip_level, crc=False), {"init": OK, "verify": CHECKSUM}),
    }


def _superblock_group_defects(v: bytes) -> dict[str, tuple[bytes, dict]]:
    """Defects of a format 1.16 image whose expert matrices are QK3_R16: the
    QK3 super-blocks in tiles of 16 rows, 16 * 112 bytes each (the 16 d, the
    16 dmin, the scale bytes, then the level chunks), the last group of a
    matrix padded to 16 rows with zero rows."""
    gate = tensor(v, first_expert_gate(v))
    router = tensor(v, first_role(v, ROLE_ROUTER))
    embed = tensor(v, first_role(v, ROLE_TOKEN_EMBED))
    data_at, size = get(v, gate + 32, "Q"), get(v, gate + 40, "Q")
    rows, row_blocks = get(v, gate + 12, "I"), get(v, gate + 52, "I")
    assert get(v, gate + 6, "H") == DTYPE_QK3_R16 and get(v, gate + 48, "I") == 256
    assert rows % 16 != 0
    sb, tile = 112, 16 * 112
    assert size == -(-rows // 16) * row_blocks * tile

    set_at = _set_at
    half = _half_editor(gate, data_at, size)

    def flip_level(img: bytearray) -> None:
        img[data_at + 256 + 64 * 3 + 4 * 2] ^= 0x04  # chunk 3, row 2

    init = lambda status: {"init": status}  # noqa: E731
    last_group = (rows // 16) * row_blocks * tile  # its tile 0; rows past `rows` are padding
    return {
        "qkr16_block_size_32": (edited(v, set_at(gate + 48, "I", 32)), init(QUANT_BLOCKS)),
        "qkr16_row_blocks_off_by_one": (edited(v, set_at(gate + 52, "I", row_blocks + 1)),
                                        init(QUANT_BLOCKS)),
        "qkr16_size_rows_not_padded": (edited(v, set_at(gate + 40, "Q", rows * row_blocks * sb)),
                                       init(QUANT_SIZE)),
        "qkr16_size_one_tile_short": (edited(v, set_at(gate + 40, "Q", size - tile)),
                                      init(QUANT_SIZE)),
        "qkr16_read_as_qk3": (edited(v, set_at(gate + 6, "H", DTYPE_QK3)), init(QUANT_SIZE)),
        "qkr16_read_as_qk2_r16": (edited(v, set_at(gate + 6, "H", DTYPE_QK2_R16)),
                                  init(QUANT_SIZE)),
        "qkr16_dtype_unknown": (edited(v, set_at(gate + 6, "H", DTYPE_UNKNOWN)),
                                init(UNSUPPORTED_DTYPE)),
        "qkr16_token_embedding": (edited(v, set_at(embed + 6, "H", DTYPE_QK3_R16)),
                                  init(UNSUPPORTED_DTYPE)),
        "qkr16_router": (edited(v, set_at(router + 6, "H", DTYPE_QK3_R16)),
                         init(UNSUPPORTED_DTYPE)),
        "qkr16_d_infinite": (edited(v, half(0x7C00, 2 * 3)), {"init": OK, "verify": QUANT_SCALE}),
        "qkr16_padding_row_dmin_nan": (edited(v, half(0x7E00, last_group + 32 + 2 * 15)),
                                       {"init": OK, "verify": QUANT_SCALE}),
        "qkr16_level_corrupted": (edited(v, flip_level, crc=False),
                                  {"init": OK, "verify": CHECKSUM}),
    }


def write_broken_images(valid: bytes, out_dir: pathlib.Path, quantized: bytes | None = None,
                        row_groups: bytes | None = None, superblocks: bytes | None = None,
                        superblock_groups: bytes | None = None) -> dict[str, dict]:
    """Write every defect of `valid` (and of the Q8 image `quantized`, the
    Q4_R16 image `row_groups`, the QK3 image `superblocks`, the QK3_R16 image
    `superblock_groups` when given) with a manifest of the statuses."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {}
    defects = _defects(valid)
    if quantized is not None:
        defects.update(_quant_defects(quantized))
    if row_groups is not None:
        defects.update(_row_group_defects(row_groups))
    if superblocks is not None:
        defects.update(_superblock_defects(superblocks))
    if superblock_groups is not None:
        defects.update(_superblock_group_defects(superblock_groups))
    for name, (data, expect) in defects.items():
        (out_dir / f"{name}.bin").write_bytes(data)
        manifest[name] = expect
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


if __name__ == "__main__":
    write_broken_images(pathlib.Path(sys.argv[1]).read_bytes(), pathlib.Path(sys.argv[2]),
                        *(pathlib.Path(a).read_bytes() for a in sys.argv[3:7]))
