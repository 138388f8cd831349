"""LFM2-MoE's tensors (tensor_map.py asks here for family "lfm2_moe"; the record:
families_lfm2.py).

- The final norm is `model.embedding_norm` (applied after the last layer, despite
  its name); each layer's norms are `operator_norm` (before the attention or the
  convolution) and `ffn_norm`.
- An attention layer: `self_attn.{q,k,v}_proj`, `out_proj`, and the per-head
  norms `q_layernorm` / `k_layernorm`.
- A convolution layer: `conv.in_proj.weight` [3H, H] is B, C and X in that order
  (its rows split into CONV_IN_B, CONV_IN_C, CONV_IN_X); `conv.conv.weight`
  [H, 1, L] the depthwise taps, oldest position first (CONV_KERNEL [H, L]);
  `conv.out_proj.weight` (CONV_OUT).
- `feed_forward.w1` / `w3` / `w2`: a dense layer's gate, up and down; a MoE
  layer's router `feed_forward.gate.weight`, its `expert_bias` (absent without
  use_expert_bias: a bias of zeros chooses as the scores alone do), its experts
  as Mixtral's names (per expert) or fused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..image.image_spec import Role, TensorEntry
from .tensor_map_fused import TensorMap

Loader = Callable[[], np.ndarray]

_NAMES = {Role.OUTPUT_NORM: "model.embedding_norm.weight", Role.ATTN_NORM: "operator_norm.weight",
          Role.FFN_NORM: "ffn_norm.weight", Role.ATTN_O: "self_attn.out_proj.weight",
          Role.ATTN_Q_NORM: "self_attn.q_layernorm.weight",
          Role.ATTN_K_NORM: "self_attn.k_layernorm.weight", Role.DENSE_GATE: "feed_forward.w1.weight",
          Role.DENSE_UP: "feed_forward.w3.weight", Role.DENSE_DOWN: "feed_forward.w2.weight",
          Role.CONV_OUT: "conv.out_proj.weight"}
_IN_THIRDS = {Role.CONV_IN_B: 0, Role.CONV_IN_C: 1, Role.CONV_IN_X: 2}


def lfm2_name(role: int, layer: int) -> str | None:
    """The checkpoint name of a tensor whose name is LFM2's own (None: the usual)."""
    if role not in _NAMES:
        return None
    return _NAMES[role] if role == Role.OUTPUT_NORM else f"model.layers.{layer}.{_NAMES[role]}"


def lfm2_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    """The loader of a tensor LFM2 stores otherwise (None: the usual one)."""
    h = tmap.spec.record.hidden_size
    base = f"model.layers.{entry.layer}"
    if entry.role in _IN_THIRDS:
        name, third = f"{base}.conv.in_proj.weight", _IN_THIRDS[entry.role]
        tmap._expect(name, (3 * h, h))
        return lambda: tmap._load(name, rows=slice(third * h, (third + 1) * h))
    if entry.role == Role.CONV_KERNEL:
        name = f"{base}.conv.conv.weight"
        tmap._expect(name, (h, 1, entry.shape[1]))
        return lambda: tmap._load(name).reshape(entry.shape)
    if entry.role == Role.ROUTER_BIAS and not tmap.spec.config.flag("use_expert_bias", True):
        return lambda: np.zeros(entry.shape, np.float32)
    return None
