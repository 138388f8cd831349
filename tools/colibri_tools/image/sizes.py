"""Byte counts of a model: its image, its state (KV cache) and scratch
(docs/core.md, state and scratch layout) and the weight bytes one decoded
token reads. The one source for these numbers in the tools: colibri-convert
(model_config.h), colibri-board fit and colibri-bench take them from here.

The C functions colibri_state_size and colibri_scratch_size compute the same
state and scratch numbers (tests/sdk/test_sizes.py); the image size is the
placement of docs/format.md 3.2, which the writer uses too.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import OptionError
from .image_layout import align_up, place_tensors
from .image_spec import (
    DATA_ALIGN,
    DEFAULT_ALIGNMENT,
    NO_EXPERT,
    ModelRecord,
    Role,
    TensorEntry,
    row_blocks,
    tables_end,
)
from .layer_shapes import canonical_tensors
from .quant import assign_dtypes, in_row_groups, tensor_size

FLOAT_BYTES = 4
SCRATCH_ROUND = 16  # each scratch float count is rounded up to a multiple of this
MAX_BATCH = 256  # COLIBRI_MAX_BATCH
EXPERT_SLOT_ALIGN = 64  # sdk/src/expert_cache.c SLOT_ALIGN


def _check_context(record: ModelRecord, context: int) -> None:
    if not 1 <= context <= record.max_context:
        raise OptionError(f"context {context} must be 1 .. max_context ({record.max_context})")


def kv_row_floats(record: ModelRecord) -> int:
    """Floats of one position's K (or V) row of one layer: kv_dim, or with an
    int8 cache (format 1.15) n_kv_heads scales and kv_dim int8 in whole floats
    (sdk/src/model_internal.h's colibri_kv_row_floats)."""
    kv_dim = record.n_kv_heads * record.head_dim
    return record.n_kv_heads + -(-kv_dim // 4) if record.kv_int8 else kv_dim


def state_size(record: ModelRecord, context: int, conv_layers: int = 0,
               ffn_only_layers: int = 0) -> int:
    """Bytes of the state for `context` positions: the K and V cache of the
    layers that attend, and the two copies of each of the `conv_layers`
    recurrent layers' rows: a convolution's last conv_kernel - 1 inputs
    (format 1.13), a Mamba2 layer's S (1.14); the `ffn_only_layers` (attn_kind 9,
    1.14) hold neither."""
    _check_context(record, context)
    kv_layers = record.n_layers - conv_layers - ffn_only_layers
    per_position = (record.kv_lora_rank + record.rope_dim if record.mla  # latent, RoPE key
                    else 2 * kv_row_floats(record))
    conv = 2 * conv_layers * record.recurrent_floats
    return (kv_layers * context * per_position + conv) * FLOAT_BYTES


# One quantized activation block (docs/core.md): a float32 scale and 32 int8.
ACTIVATION_BLOCK_FLOATS = 9


def scratch_float_counts(record: ModelRecord, context: int, batch: int = 1,
                         quantized: bool = False, shortcut: bool = False) -> list[int]:
    """The float counts of section 8 for chunks of `batch` tokens, in the order
    listed there (not yet rounded). `quantized`: the image has a Q8/Q4 matrix,
    and a region holds a chunk's activations in blocks of 32; `shortcut`: it
    has a shortcut layer (format 1.12), whose MoE output the last region holds."""
    b, h = batch, record.hidden_size
    q = record.n_heads * record.head_dim
    k = record.n_kv_heads * record.head_dim
    m = max(record.dense_intermediate, record.expert_intermediate, record.shared_intermediate)
    top_k = max(record.top_k, 1)
    used = max(b, min(record.n_experts, b * top_k))  # a token per input, or the experts in use
    mla = record.mla  # k: latent + RoPE key, v: q LoRA, attn: n_heads * v_head_dim
    kv_a = record.kv_lora_rank + record.rope_dim if mla else 0
    q_lora = record.q_lora_rank if mla else 0
    latent = 2 * record.n_heads * record.kv_lora_rank if mla else 0
    inner = record.ssm_inner  # Mamba2, delta rules (1.14): z, the convolution's in and out,
    ssm = b * (2 * inner + 2 * record.conv_channels + record.ssm_heads) if inner else 0  # dt, beta
    # the widest input row of a product (ATTN_O's: MLA; SSM_OUT's: Mamba2)
    widest = max(h, q, record.out_width, m, inner)
    blocks = b * row_blocks(widest) * ACTIVATION_BLOCK_FLOATS if quantized else 0
    return [b * h, b * h, b * h, b * h, b * q, b * max(k, kv_a), b * max(k, q_lora),
            b * max(q, record.out_width), record.n_heads * context, b * m, b * m,
            b * max(record.router_width, 1), b * record.head_dim, b * top_k, b * top_k, b * h, used,
            b, blocks, latent, b * h if shortcut else 0, ssm]


def scratch_size(record: ModelRecord, context: int, batch: int = 1,
                 quantized: bool = False, shortcut: bool = False) -> int:
    """Bytes of scratch memory colibri_forward needs with a state of `context`
    positions, running chunks of up to `batch` tokens (1 .. MAX_BATCH), for an
    image with (`quantized`) or without a Q8/Q4 matrix, with (`shortcut`) or
    without a shortcut layer."""
    _check_context(record, context)
    if not 1 <= batch <= MAX_BATCH:
        raise OptionError(f"batch {batch} must be 1 .. {MAX_BATCH}")
    counts = scratch_float_counts(record, context, batch, quantized, shortcut)
    rounded = (-(-n // SCRATCH_ROUND) * SCRATCH_ROUND for n in counts)
    return FLOAT_BYTES * sum(rounded)


def expert_slot_size(block_sizes: Sequence[int]) -> int:
    """Bytes of one slot of the core's expert cache: the largest expert block
    rounded up to 64 (colibri_expert_cache.h); 0 without expert blocks."""
    largest = max(block_sizes, default=0)
    return -(-largest // EXPERT_SLOT_ALIGN) * EXPERT_SLOT_ALIGN


def expert_cache_fixed_size(record: ModelRecord) -> int:
    """The part of colibri_expert_cache_size that does not grow with the
    slots: the per-expert and per-layer words and the alignment slack."""
    keys = record.n_layers * record.n_experts
    return 3 + 4 * (2 * keys + record.n_layers) + EXPERT_SLOT_ALIGN - 1


def expert_cache_size(record: ModelRecord, slot_bytes: int, n_slots: int) -> int:
    """colibri_expert_cache_size(model, n_slots) (docs/core.md, An expert
    cache in caller memory): four words a slot besides its bytes."""
    return expert_cache_fixed_size(record) + n_slots * (4 * 4 + slot_bytes)


def logits_size(record: ModelRecord) -> int:
    """Bytes of one position's logits (vocab_size floats)."""
    return record.vocab_size * FLOAT_BYTES


def placed_tensors(record: ModelRecord, ffn_kinds: Sequence[int],
                   alignment: int = DEFAULT_ALIGNMENT, quant: str | None = None,
                   quant_attention: bool = False,
                   quant_embeddings: bool = False, row_groups: bool | None = None,
                   experts_last: bool = False, attn_kinds: Sequence[int] | None = None
                   ) -> tuple[list[TensorEntry], int]:
    """Every tensor of the image with its dtype, offset and size, and the image
    size (docs/format.md 3.1 - 3.4), without any weights: what colibri-convert
    writes with --quant `quant` ("int8", "int4"; None: float32),
    --quant-attention, --quant-embeddings, --row-groups (None: the
    converter's default, groups of 16 rows whenever quantized) and
    --experts-last; `attn_kinds`: the layers' (format 1.13's short convolutions
    hold other tensors), all full attention when None."""
    tensors, layers = canonical_tensors(record, list(ffn_kinds),
                                        list(attn_kinds) if attn_kinds else None)
    tensors = assign_dtypes(tensors, quant, quant_attention, quant_embeddings)
    if quant is not None if row_groups is None else row_groups:
        tensors = in_row_groups(tensors)
    start = align_up(tables_end(len(layers), len(tensors), record.header_size), DATA_ALIGN)
    return place_tensors(tensors, start, alignment, tensor_size, experts_last=experts_last)


def image_size(record: ModelRecord, ffn_kinds: Sequence[int],
               alignment: int = DEFAULT_ALIGNMENT, quant: str | None = None,
               quant_attention: bool = False, quant_embeddings: bool = False,
               row_groups: bool | None = None, attn_kinds: Sequence[int] | None = None) -> int:
    """Bytes of the model image colibri-convert writes for this record."""
    return placed_tensors(record, ffn_kinds, alignment, quant, quant_attention,
                          quant_embeddings, row_groups, attn_kinds=attn_kinds)[1]


def decode_bytes_per_token(record: ModelRecord, tensors: Sequence[TensorEntry]) -> int:
    """Weight bytes one decoded token reads: every tensor but the embedding
    table (one row of it) and the routed experts (top_k of each layer's
    n_experts, on average; with zero-computation experts, which read
    nothing, the share of the picks the router's width gives the real ones).
    With tied embeddings the table is read whole, as the output projection."""
    shared = sum(t.size for t in tensors if t.expert == NO_EXPERT)
    routed = sum(t.size for t in tensors if t.expert != NO_EXPERT)
    embed = next(t.size for t in tensors if t.role == Role.TOKEN_EMBED)
    per_token = shared - (0 if record.tie_embeddings else embed) + FLOAT_BYTES * record.hidden_size
    if record.n_experts:
        per_token += routed * record.top_k // record.router_width
    return per_token
