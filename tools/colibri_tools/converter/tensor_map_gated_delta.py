"""Qwen3-Next's and Qwen3.5-MoE's tensors (tensor_map.py asks here for families
"qwen3_next" and "qwen3_5_moe_text"; the record: families_qwen3_next.py).

- Its RMSNorms (input_layernorm, post_attention_layernorm, the final norm, the
  attention's q_norm and k_norm) scale by 1 + weight: stored as 1 + weight in
  float32. The gated norm of a linear attention layer scales by its weight.
- `self_attn.q_proj.weight` [heads * 2 * head_dim, H]: per head its query rows,
  then its gate rows: split into ATTN_Q and ATTN_GATE.
- A linear attention layer, under `linear_attn`, with Hk key heads of dk and
  Hv value heads of dv (r = Hv / Hk per key head):
  `in_proj_qkvz.weight`, per key head g: q (dk rows), k (dk), v (r * dv), z
  (r * dv); stored as SSM_IN_Z (every z, value heads in order) and SSM_IN_XBC
  (every v, then every k, then every q: the convolution's channels in the
  Mamba2 layout x, B, C); `in_proj_ba.weight`, per key head: b (r rows), a (r):
  SSM_IN_BETA and SSM_IN_DT; `conv1d.weight` [q, k, v channels, 1, K], its
  rows reordered as SSM_IN_XBC's; `dt_bias`; A = -exp(A_log); `norm.weight`
  [dv]; `out_proj.weight`.
- Qwen3.5-MoE stores the same projections apart: `in_proj_qkv` (every q, then
  every k, then every v), `in_proj_z`, `in_proj_b`, `in_proj_a`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..image.image_spec import Role, TensorEntry
from .tensor_map_fused import TensorMap

Loader = Callable[[], np.ndarray]

_ZERO_CENTRED = (Role.OUTPUT_NORM, Role.ATTN_NORM, Role.FFN_NORM, Role.ATTN_Q_NORM,
                 Role.ATTN_K_NORM)
_AS_STORED = {Role.SSM_DT_BIAS: "dt_bias", Role.SSM_NORM: "norm.weight",
              Role.SSM_OUT: "out_proj.weight"}


def _qkvz_rows(tmap: TensorMap) -> dict[str, np.ndarray]:
    """Row indices of in_proj_qkvz for each of q, k, v, z, in the image's order."""
    r = tmap.spec.record
    dk, dv, key_heads = r.ssm_state, r.ssm_head_dim, r.ssm_groups
    per_value = r.ssm_heads // key_heads * dv
    block = 2 * dk + 2 * per_value
    rows = {"q": [], "k": [], "v": [], "z": []}
    for g in range(key_heads):
        base = g * block
        rows["q"] += range(base, base + dk)
        rows["k"] += range(base + dk, base + 2 * dk)
        rows["v"] += range(base + 2 * dk, base + 2 * dk + per_value)
        rows["z"] += range(base + 2 * dk + per_value, base + block)
    return {name: np.asarray(index) for name, index in rows.items()}


def _ba_rows(tmap: TensorMap, part: int) -> np.ndarray:
    """Rows of in_proj_ba: b (part 0) or a (part 1) of every value head, in order."""
    r = tmap.spec.record
    per_key = r.ssm_heads // r.ssm_groups
    return np.asarray([g * 2 * per_key + part * per_key + i
                       for g in range(r.ssm_groups) for i in range(per_key)])


def _conv_rows(tmap: TensorMap) -> np.ndarray:
    """conv1d's channels (q, k, v in the checkpoint) in the image's order v, k, q."""
    r = tmap.spec.record
    keys = r.ssm_groups * r.ssm_state
    return np.concatenate([np.arange(2 * keys, 2 * keys + r.ssm_inner), np.arange(keys, 2 * keys),
                           np.arange(keys)])


_APART = {Role.SSM_IN_Z: "in_proj_z.weight", Role.SSM_IN_BETA: "in_proj_b.weight",
          Role.SSM_IN_DT: "in_proj_a.weight"}


def _apart_tensor(tmap: TensorMap, entry: TensorEntry, base: str) -> Loader | None:
    """Qwen3.5-MoE's projections: z, b and a as they are; q, k, v reordered v, k, q."""
    if entry.role in _APART:
        name = f"{base}.{_APART[entry.role]}"
        return tmap._stored(name, entry.shape)
    if entry.role == Role.SSM_IN_XBC:
        name = f"{base}.in_proj_qkv.weight"
        tmap._expect(name, entry.shape)
        return lambda: tmap._load(name)[_conv_rows(tmap)]
    return None


def _delta_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    r = tmap.spec.record
    base = f"model.layers.{entry.layer}.linear_attn"
    if entry.role in _AS_STORED:
        name = f"{base}.{_AS_STORED[entry.role]}"
        return tmap._stored(name, entry.shape)
    if tmap.ckpt.has(f"{base}.in_proj_qkv.weight"):
        apart = _apart_tensor(tmap, entry, base)
        if apart is not None:
            return apart
    if entry.role in (Role.SSM_IN_Z, Role.SSM_IN_XBC):
        name, rows = f"{base}.in_proj_qkvz.weight", _qkvz_rows(tmap)
        tmap._expect(name, (2 * r.ssm_groups * r.ssm_state + 2 * r.ssm_inner, r.hidden_size))
        order = rows["z"] if entry.role == Role.SSM_IN_Z else \
            np.concatenate([rows["v"], rows["k"], rows["q"]])
        return lambda: tmap._load(name)[order]
    if entry.role in (Role.SSM_IN_BETA, Role.SSM_IN_DT):
        name = f"{base}.in_proj_ba.weight"
        tmap._expect(name, (2 * r.ssm_heads, r.hidden_size))
        order = _ba_rows(tmap, 0 if entry.role == Role.SSM_IN_BETA else 1)
        return lambda: tmap._load(name)[order]
    if entry.role == Role.SSM_CONV_KERNEL:
        name = f"{base}.conv1d.weight"
        tmap._expect(name, (entry.shape[0], 1, entry.shape[1]))
        return lambda: tmap._load(name).reshape(entry.shape)[_conv_rows(tmap)]
    if entry.role == Role.SSM_A:
        name = f"{base}.A_log"
        return tmap._decay(name, entry.shape)
    return None


def _gated_query(tmap: TensorMap, entry: TensorEntry) -> Loader:
    """ATTN_Q or ATTN_GATE: every head's first (query) or second (gate) head_dim rows."""
    r = tmap.spec.record
    name = f"model.layers.{entry.layer}.self_attn.q_proj.weight"
    tmap._expect(name, (2 * r.n_heads * r.head_dim, r.hidden_size))
    half = 0 if entry.role == Role.ATTN_Q else r.head_dim
    order = np.asarray([2 * h * r.head_dim + half + i for h in range(r.n_heads)
                        for i in range(r.head_dim)])
    return lambda: tmap._load(name)[order]


def qwen3_next_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    """The loader of a tensor Qwen3-Next stores otherwise (None: the usual one)."""
    if entry.role in _ZERO_CENTRED:
        name = tmap.name_of(entry.role, entry.layer)
        tmap._expect(name, entry.shape)
        return lambda: np.float32(1.0) + tmap._load(name).astype(np.float32)
    if entry.role in (Role.ATTN_Q, Role.ATTN_GATE):
        return _gated_query(tmap, entry)
    return _delta_tensor(tmap, entry)
