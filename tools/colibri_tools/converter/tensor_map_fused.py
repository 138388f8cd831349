"""Checkpoint tensors that fuse what the image keeps apart (tensor_map.py asks
here for families "dbrx" and "jetmoe").

DBRX names its tensors `transformer.wte`, `transformer.norm_f`, and per block
`norm_attn_norm.{norm_1,attn.Wqkv,attn.out_proj,norm_2}` and
`ffn.{router.layer,experts.mlp.{w1,v1,w2}}`:

- Wqkv [Q + 2K, H]: the q rows, then k's, then v's.
- The experts' w1 (gate), v1 (up) and w2 (down) are each [E * F, H]: expert e
  owns rows e F .. (e + 1) F; w2's block is used as `h @ w2`, so the image's
  [H, F] down projection is its transpose.
- Its LayerNorms have no bias: the image's norm_kind 1 biases are zeros.

JetMoE's attention (`self_attention.`): `kv_proj` [2K, H] holds k's rows, then
v's; the attention experts' `experts.input_linear` [E, K, H] and
`experts.output_linear` [E, H, K] are the image's stacked ATTN_Q [E K, H] and
ATTN_O [E H, K] as they lie; `experts.router.layer` the ATTN_ROUTER and
`experts.bias` the ATTN_O_BIAS. Its MoE's `mlp.bias` is the MOE_OUT_BIAS (its
experts are Granite's names, which tensor_map.py reads).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..image.image_spec import Role, TensorEntry
from .checkpoint import Checkpoint
from .families import ModelSpec

Loader = Callable[[], np.ndarray]


class TensorMap(Protocol):
    """What is used here of tensor_map.TensorMap (which imports this module)."""

    spec: ModelSpec
    ckpt: Checkpoint

    def _expect(self, name: str, shape: tuple[int, ...]) -> None: ...

    def _load(self, name: str, index: int | None = None,
              rows: slice | None = None) -> np.ndarray: ...

_GLOBAL = {Role.TOKEN_EMBED: "transformer.wte.weight", Role.OUTPUT_NORM: "transformer.norm_f.weight",
           Role.LM_HEAD: "lm_head.weight"}
_LAYER = {Role.ATTN_NORM: "norm_attn_norm.norm_1.weight",
          Role.ATTN_O: "norm_attn_norm.attn.out_proj.weight",
          Role.FFN_NORM: "norm_attn_norm.norm_2.weight", Role.ROUTER: "ffn.router.layer.weight"}
_ZERO_BIASES = (Role.OUTPUT_NORM_BIAS, Role.ATTN_NORM_BIAS, Role.FFN_NORM_BIAS)
_QKV = (Role.ATTN_Q, Role.ATTN_K, Role.ATTN_V)


def _block(layer: int) -> str:
    return f"transformer.blocks.{layer}"


def _qkv_rows(tmap: TensorMap, entry: TensorEntry) -> Loader:
    r = tmap.spec.record
    q, k = r.n_heads * r.head_dim, r.n_kv_heads * r.head_dim
    name = f"{_block(entry.layer)}.norm_attn_norm.attn.Wqkv.weight"
    tmap._expect(name, (q + 2 * k, r.hidden_size))
    start = {Role.ATTN_Q: 0, Role.ATTN_K: q, Role.ATTN_V: q + k}[Role(entry.role)]
    rows = slice(start, start + entry.shape[0])
    return lambda: tmap._load(name, rows=rows)


def dbrx_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader:
    """The loader of one non-expert tensor of a DBRX image."""
    if entry.role in _ZERO_BIASES:
        return lambda: np.zeros(entry.shape, dtype=np.float32)
    if entry.role in _QKV:
        return _qkv_rows(tmap, entry)
    name = _GLOBAL.get(entry.role) or f"{_block(entry.layer)}.{_LAYER[entry.role]}"
    return tmap._stored(name, entry.shape)


_JETMOE_ATTENTION = {Role.ATTN_Q: "experts.input_linear.weight",
                     Role.ATTN_O: "experts.output_linear.weight",
                     Role.ATTN_ROUTER: "experts.router.layer.weight",
                     Role.ATTN_O_BIAS: "experts.bias"}


def jetmoe_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    """The loader of a JetMoE tensor named otherwise than Llama's, or None."""
    base = f"model.layers.{entry.layer}"
    if entry.role == Role.MOE_OUT_BIAS:
        name = f"{base}.mlp.bias"
    elif entry.role in _JETMOE_ATTENTION:
        name = f"{base}.self_attention.{_JETMOE_ATTENTION[Role(entry.role)]}"
    elif entry.role in (Role.ATTN_K, Role.ATTN_V):
        name = f"{base}.self_attention.kv_proj.weight"
        rows = entry.shape[0]
        tmap._expect(name, (2 * rows, entry.shape[1]))
        part = slice(0, rows) if entry.role == Role.ATTN_K else slice(rows, 2 * rows)
        return lambda: tmap._load(name, rows=part)
    else:
        return None
    want = entry.shape
    if entry.role in (Role.ATTN_Q, Role.ATTN_O):  # [E, rows of one expert, cols]
        experts = tmap.spec.record.n_experts
        want = (experts, entry.shape[0] // experts, entry.shape[1])
    tmap._expect(name, want)
    return lambda: tmap._load(name).reshape(entry.shape)


def dbrx_experts(tmap: TensorMap, layer: int) -> list[tuple[Loader, Loader, Loader]]:
    """Each expert's gate, up and down, cut from the fused [E * F, H] tensors."""
    r = tmap.spec.record
    width, hidden = r.expert_intermediate, r.hidden_size
    w1, v1, w2 = (f"{_block(layer)}.ffn.experts.mlp.{n}" for n in ("w1", "v1", "w2"))
    for name in (w1, v1, w2):
        tmap._expect(name, (r.n_experts * width, hidden))
    rows = [slice(e * width, (e + 1) * width) for e in range(r.n_experts)]
    return [(lambda s=s: tmap._load(w1, rows=s), lambda s=s: tmap._load(v1, rows=s),
             lambda s=s: np.ascontiguousarray(tmap._load(w2, rows=s).T)) for s in rows]
