"""Kimi-Linear's tensors (tensor_map.py asks here for family "kimi_linear"; the
record: families_kimi_linear.py). Its MLA and MoE tensors have DeepSeek's and
Mixtral's names (the MoE under `block_sparse_moe` as saved, `mlp` in memory).

- A dense layer's MLP is saved under `block_sparse_moe` too (`mlp` in memory).
- A KDA layer, under `self_attn`: `q_proj`, `k_proj`, `v_proj` (stored as
  SSM_IN_XBC, every v row, then k, then q: the Mamba2 layout x, B, C), their
  taps `q_conv1d`, `k_conv1d`, `v_conv1d` [I, 1, K] as saved (one `conv1d`
  [3I, 1, K], q, k, v, in memory), reordered alike; `b_proj` (beta); the
  forget gate's `f_a_proj`, `f_b_proj`, `dt_bias` and `A_log` [1, 1, heads, 1]
  (under `forget_gate` in memory), stored as A = -exp(A_log); the output gate's
  `g_a_proj`, `g_b_proj`; `o_norm` (the per-head norm) and `o_proj`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..image.image_spec import ATTN_KDA, Role, TensorEntry
from .tensor_map_fused import TensorMap
from .tensor_map_nemotron import nemotron_name

Loader = Callable[[], np.ndarray]

_KDA_NAMES = {Role.SSM_IN_BETA: "b_proj.weight", Role.KDA_F_A: "f_a_proj.weight",
              Role.KDA_F_B: "f_b_proj.weight", Role.KDA_G_A: "g_a_proj.weight",
              Role.KDA_G_B: "g_b_proj.weight", Role.SSM_DT_BIAS: "dt_bias",
              Role.SSM_NORM: "o_norm.weight", Role.SSM_OUT: "o_proj.weight"}
_DENSE = {Role.DENSE_GATE: "gate_proj", Role.DENSE_UP: "up_proj", Role.DENSE_DOWN: "down_proj"}
# Ling's saved names (the original model's) -> transformers' in-memory ones, in order.
_BAILING_RENAMES = (("model.word_embeddings.", "model.embed_tokens."),
                    (".attention.dense.", ".self_attn.o_proj."),
                    (".attention.f_proj.", ".self_attn.forget_gate.f_proj."),
                    (".attention.A_log", ".self_attn.forget_gate.A_log"),
                    (".attention.dt_bias", ".self_attn.forget_gate.dt_bias"),
                    (".attention.", ".self_attn."),
                    (".mlp.gate.expert_bias", ".mlp.gate.e_score_correction_bias"))


def bailing_name(name: str) -> str:
    """A Ling checkpoint's tensor under transformers' in-memory name."""
    for saved, memory in _BAILING_RENAMES:
        name = name.replace(saved, memory, 1)
    return name


SAVED_NAMES = {"bailing_hybrid": bailing_name, "nemotron_h": nemotron_name}


def _first(tmap: TensorMap, names: tuple[str, ...]) -> str:
    return next((n for n in names if tmap.ckpt.has(n)), names[0])


def _kda_name(tmap: TensorMap, base: str, role: int) -> str:
    """The saved name, or the in-memory one under forget_gate; Ling's one-matrix
    gates are f_proj (under forget_gate) and g_proj."""
    name = _KDA_NAMES[role]
    if tmap.spec.record.kda_rank == 0 and role in (Role.KDA_F_A, Role.KDA_G_A):
        name = "forget_gate.f_proj.weight" if role == Role.KDA_F_A else "g_proj.weight"
    return _first(tmap, (f"{base}.{name}", f"{base}.forget_gate.{name}"))


def _vkq(tmap: TensorMap, base: str, suffix: str, rows: int) -> Loader:
    """v, k and q stacked (each [rows, ...]) from q/k/v_<suffix>."""
    names = [f"{base}.{part}_{suffix}" for part in ("v", "k", "q")]
    for name in names:
        shape = tuple(tmap.ckpt.shape(name)) if tmap.ckpt.has(name) else None
        tmap._expect(name, (rows, *(shape[1:] if shape else ())))
    return lambda: np.concatenate([tmap._load(n) for n in names])


def _kda_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader:
    r = tmap.spec.record
    base, inner = f"model.layers.{entry.layer}.self_attn", r.ssm_inner
    if entry.role == Role.SSM_IN_XBC:
        return _vkq(tmap, base, "proj.weight", inner)
    if entry.role == Role.SSM_CONV_KERNEL:
        fused = f"{base}.conv1d.weight"
        if tmap.ckpt.has(fused):  # q, k, v in memory
            tmap._expect(fused, (3 * inner, 1, r.conv_kernel))
            order = np.concatenate([np.arange(2 * inner, 3 * inner), np.arange(inner, 2 * inner),
                                    np.arange(inner)])
            return lambda: tmap._load(fused).reshape(entry.shape)[order]
        load = _vkq(tmap, base, "conv1d.weight", inner)
        return lambda: load().reshape(entry.shape)
    if entry.role == Role.SSM_A:
        name = _first(tmap, (f"{base}.A_log", f"{base}.forget_gate.A_log"))
        kimi = tmap.spec.family == "kimi_linear"
        tmap._expect(name, (1, 1, r.ssm_heads, 1) if kimi else (r.ssm_heads,))
        return lambda: -np.exp(tmap._load(name).astype(np.float32).reshape(entry.shape))
    name = _kda_name(tmap, base, entry.role)
    return tmap._stored(name, entry.shape)


def kimi_linear_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    """The loader of a tensor Kimi-Linear or Ling stores otherwise (None: the usual one)."""
    if entry.role == Role.ATTN_HEAD_GATE:
        name = f"model.layers.{entry.layer}.self_attn.g_proj.weight"
        return tmap._stored(name, entry.shape)
    if entry.role in _DENSE:
        base = f"model.layers.{entry.layer}"
        name = _first(tmap, (f"{base}.block_sparse_moe.{_DENSE[entry.role]}.weight",
                             f"{base}.mlp.{_DENSE[entry.role]}.weight"))
        return tmap._stored(name, entry.shape)
    kinds = tmap.spec.attn_kinds or []
    operator = entry.role in _KDA_NAMES or entry.role in (Role.SSM_IN_XBC, Role.SSM_CONV_KERNEL,
                                                          Role.SSM_A)
    if operator and entry.layer < len(kinds) and kinds[entry.layer] == ATTN_KDA:
        return _kda_tensor(tmap, entry)
    return None
