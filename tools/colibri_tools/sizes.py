"""State (KV cache) and scratch byte counts, docs/core.md (state and scratch layout).

The C functions colibri_state_size and colibri_scratch_size compute the same
numbers; model_config.h states them for the context chosen at conversion.
"""

from __future__ import annotations

from .errors import OptionError
from .image_spec import ModelRecord

FLOAT_BYTES = 4
SCRATCH_ROUND = 16  # each scratch float count is rounded up to a multiple of this
MAX_BATCH = 256  # COLIBRI_MAX_BATCH


def _check_context(record: ModelRecord, context: int) -> None:
    if not 1 <= context <= record.max_context:
        raise OptionError(f"context {context} must be 1 .. max_context ({record.max_context})")


def state_size(record: ModelRecord, context: int) -> int:
    """Bytes of K and V cache for `context` positions."""
    _check_context(record, context)
    return 2 * record.n_layers * context * record.n_kv_heads * record.head_dim * FLOAT_BYTES


def scratch_float_counts(record: ModelRecord, context: int, batch: int = 1) -> list[int]:
    """The float counts of section 8 for chunks of `batch` tokens, in the order
    listed there (not yet rounded)."""
    b, h = batch, record.hidden_size
    q = record.n_heads * record.head_dim
    k = record.n_kv_heads * record.head_dim
    m = max(record.dense_intermediate, record.expert_intermediate, record.shared_intermediate)
    top_k = max(record.top_k, 1)
    return [b * h, b * h, b * h, b * h, b * q, b * k, b * k, b * q, record.n_heads * context,
            b * m, b * m,
            b * max(record.n_experts, 1), b * record.head_dim, b * top_k, b * top_k, b * h, b, b]


def scratch_size(record: ModelRecord, context: int, batch: int = 1) -> int:
    """Bytes of scratch memory colibri_forward needs with a state of `context`
    positions, running chunks of up to `batch` tokens (1 .. MAX_BATCH)."""
    _check_context(record, context)
    if not 1 <= batch <= MAX_BATCH:
        raise OptionError(f"batch {batch} must be 1 .. {MAX_BATCH}")
    counts = scratch_float_counts(record, context, batch)
    rounded = (-(-n // SCRATCH_ROUND) * SCRATCH_ROUND for n in counts)
    return FLOAT_BYTES * sum(rounded)
