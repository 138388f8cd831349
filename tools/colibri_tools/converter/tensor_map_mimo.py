"""MiMo-V2-Flash's attention tensors (tensor_map.py asks here for family
"mimo_v2_flash"; families_mimo.py says why each is reshaped so):

- k_proj [kv_l * head_dim, H] and v_proj [kv_l * v_head_dim, H] of a layer with
  kv_l KV heads: v times attention_value_scale, each value head padded with zero
  rows to head_dim; a full layer's heads each stored twice when the image's KV
  head count (the sliding layers') is twice its own. Their biases alike.
- o_proj [H, n_heads * v_head_dim]: each head's columns padded with zeros.
- sinks (`attention_sink_bias` on disk): a sliding layer's own; -inf on a full
  layer (exp(-inf) = 0: no share).
- ROPE_FREQ: the layer type's inverse frequencies, from the config.
The other tensors have the usual names (tensor_map.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..image.image_spec import ATTN_SLIDING, Role, TensorEntry
from .families_mimo import LAYER_TYPE, inverse_frequencies, value_scale, value_width
from .tensor_map_fused import TensorMap

Loader = Callable[[], np.ndarray]

_KV = {Role.ATTN_K: "k_proj.weight", Role.ATTN_K_BIAS: "k_proj.bias",
       Role.ATTN_V: "v_proj.weight", Role.ATTN_V_BIAS: "v_proj.bias"}


def _heads(tmap: TensorMap, layer: int) -> tuple[int, int]:
    """(the layer's own KV heads, how many times each is stored)."""
    r = tmap.spec.record
    sliding = tmap.spec.attn_kinds[layer] == ATTN_SLIDING
    own = r.n_kv_heads if sliding or ATTN_SLIDING not in tmap.spec.attn_kinds else \
        r.n_kv_heads // 2
    return own, r.n_kv_heads // own


def _kv(tmap: TensorMap, entry: TensorEntry) -> Loader:
    r, cfg = tmap.spec.record, tmap.spec.config
    name = f"model.layers.{entry.layer}.self_attn.{_KV[entry.role]}"
    own, copies = _heads(tmap, entry.layer)
    value = entry.role in (Role.ATTN_V, Role.ATTN_V_BIAS)
    width = value_width(cfg) if value else r.head_dim
    tmap._expect(name, (own * width, *entry.shape[1:]))
    scale = np.float32(value_scale(cfg)) if value else None

    def load() -> np.ndarray:
        heads = tmap._load(name).reshape(own, width, *entry.shape[1:])
        if scale is not None:
            heads = heads * scale
        padded = np.zeros((own, r.head_dim, *entry.shape[1:]), np.float32)
        padded[:, :width] = heads
        return np.repeat(padded, copies, axis=0).reshape(entry.shape)
    return load


def _output(tmap: TensorMap, entry: TensorEntry) -> Loader:
    r = tmap.spec.record
    name = f"model.layers.{entry.layer}.self_attn.o_proj.weight"
    width = value_width(tmap.spec.config)
    tmap._expect(name, (r.hidden_size, r.n_heads * width))

    def load() -> np.ndarray:
        padded = np.zeros((r.hidden_size, r.n_heads, r.head_dim), np.float32)
        padded[:, :, :width] = tmap._load(name).reshape(r.hidden_size, r.n_heads, width)
        return padded.reshape(entry.shape)
    return load


def _sinks(tmap: TensorMap, entry: TensorEntry) -> Loader:
    """A sliding layer's sinks: `attention_sink_bias` in its checkpoints, `sinks`
    in transformers' memory."""
    if tmap.spec.attn_kinds[entry.layer] != ATTN_SLIDING:
        return lambda: np.full(entry.shape, -np.inf, np.float32)
    base = f"model.layers.{entry.layer}.self_attn."
    name = base + ("sinks" if tmap.ckpt.has(base + "sinks") else "attention_sink_bias")
    return tmap._stored(name, entry.shape)


def mimo_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    """The loader of a MiMo attention tensor that differs from the usual; None for
    the others."""
    if entry.role in _KV:
        return _kv(tmap, entry)
    if entry.role == Role.ATTN_O:
        return _output(tmap, entry)
    if entry.role == Role.ATTN_SINKS:
        return _sinks(tmap, entry)
    if entry.role == Role.ROPE_FREQ:
        kind = LAYER_TYPE[tmap.spec.attn_kinds[entry.layer]]
        table = inverse_frequencies(tmap.spec.config, kind, tmap.spec.record.head_dim)
        return lambda: table.copy()
    return None
