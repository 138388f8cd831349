"""A Mamba2 layer's tensors (tensor_map.py asks here for a layer whose
attn_kind is 5; the record: families_granite_hybrid.py), and Jamba's (its
Mamba1 layers, attn_kind 8, and its own norm names; families_jamba.py).

Under `model.layers.{l}.mamba` (Granite-4.0-H):

- `in_proj.weight` [I + C + heads, H]: the gate z (I rows), the convolution's
  input x, B, C (C rows) and the time steps (a row per head), split into
  SSM_IN_Z, SSM_IN_XBC and SSM_IN_DT;
- `conv1d.weight` [C, 1, K] the depthwise taps, oldest position first
  (SSM_CONV_KERNEL [C, K]), `conv1d.bias` [C] (zeros without mamba_conv_bias);
- `dt_bias`, `D`, `norm.weight` as they are; `A_log` stored as A = -exp(A_log)
  in float32, what transformers computes at each call;
- `out_proj.weight` (SSM_OUT).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..image.image_spec import ATTN_MAMBA1, Role, TensorEntry
from .tensor_map_fused import TensorMap

Loader = Callable[[], np.ndarray]

_AS_STORED = {Role.SSM_DT_BIAS: "dt_bias", Role.SSM_D: "D", Role.SSM_NORM: "norm.weight",
              Role.SSM_OUT: "out_proj.weight"}
_IN_PROJ = (Role.SSM_IN_Z, Role.SSM_IN_XBC, Role.SSM_IN_DT)


def mamba2_tensor(tmap: TensorMap, entry: TensorEntry, module: str = "mamba") -> Loader | None:
    """The loader of a Mamba2 mixer's tensor (None: not one of them)."""
    r = tmap.spec.record
    base = f"model.layers.{entry.layer}.{module}"
    if entry.role in _AS_STORED:
        name = f"{base}.{_AS_STORED[entry.role]}"
        return tmap._stored(name, entry.shape)
    if entry.role in _IN_PROJ:
        name = f"{base}.in_proj.weight"
        widths = (r.ssm_inner, r.conv_channels, r.ssm_heads)
        tmap._expect(name, (sum(widths), r.hidden_size))
        start = sum(widths[:_IN_PROJ.index(entry.role)])
        rows = slice(start, start + entry.shape[0])
        return lambda: tmap._load(name, rows=rows)
    if entry.role == Role.SSM_CONV_KERNEL:
        name = f"{base}.conv1d.weight"
        tmap._expect(name, (entry.shape[0], 1, entry.shape[1]))
        return lambda: tmap._load(name).reshape(entry.shape)
    if entry.role == Role.SSM_CONV_BIAS:
        name = f"{base}.conv1d.bias"
        if not tmap.ckpt.has(name) and not tmap.spec.config.flag("mamba_conv_bias", True):
            return lambda: np.zeros(entry.shape, np.float32)
        return tmap._stored(name, entry.shape)
    if entry.role == Role.SSM_A:
        name = f"{base}.A_log"
        return tmap._decay(name, entry.shape)
    return None


# Jamba: Mamba1 tensors under model.layers.{l}.mamba, its norms' own names.
_JAMBA_NORMS = {Role.OUTPUT_NORM: "model.final_layernorm.weight", Role.FFN_NORM: "pre_ff_layernorm.weight"}
_MAMBA1_AS_STORED = {Role.SSM_CONV_BIAS: "conv1d.bias", Role.MAMBA1_X_PROJ: "x_proj.weight",
                     Role.MAMBA1_DT_NORM: "dt_layernorm.weight",
                     Role.MAMBA1_B_NORM: "b_layernorm.weight",
                     Role.MAMBA1_C_NORM: "c_layernorm.weight",
                     Role.MAMBA1_DT_PROJ: "dt_proj.weight", Role.SSM_DT_BIAS: "dt_proj.bias",
                     Role.SSM_D: "D", Role.SSM_OUT: "out_proj.weight"}


def _mamba1_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    r = tmap.spec.record
    base = f"model.layers.{entry.layer}.mamba"
    if entry.role in (Role.SSM_IN_XBC, Role.SSM_IN_Z):  # in_proj: x, then the gate z
        name = f"{base}.in_proj.weight"
        tmap._expect(name, (2 * r.ssm_inner, r.hidden_size))
        rows = slice(0, r.ssm_inner) if entry.role == Role.SSM_IN_XBC else \
            slice(r.ssm_inner, 2 * r.ssm_inner)
        return lambda: tmap._load(name, rows=rows)
    if entry.role == Role.SSM_CONV_BIAS and not tmap.ckpt.has(f"{base}.conv1d.bias") and \
            not tmap.spec.config.flag("mamba_conv_bias", True):
        return lambda: np.zeros(entry.shape, np.float32)
    if entry.role in _MAMBA1_AS_STORED:
        name = f"{base}.{_MAMBA1_AS_STORED[entry.role]}"
        return tmap._stored(name, entry.shape)
    if entry.role == Role.SSM_CONV_KERNEL:
        name = f"{base}.conv1d.weight"
        tmap._expect(name, (entry.shape[0], 1, entry.shape[1]))
        return lambda: tmap._load(name).reshape(entry.shape)
    if entry.role == Role.MAMBA1_A:
        name = f"{base}.A_log"
        return tmap._decay(name, entry.shape)
    return None


def jamba_tensor(tmap: TensorMap, entry: TensorEntry) -> Loader | None:
    """The loader of a tensor Jamba stores otherwise (None: the usual one)."""
    if entry.role in _JAMBA_NORMS:
        name = _JAMBA_NORMS[entry.role]
        name = name if entry.role == Role.OUTPUT_NORM else f"model.layers.{entry.layer}.{name}"
        return tmap._stored(name, entry.shape)
    if entry.role in (Role.DENSE_GATE, Role.DENSE_UP, Role.DENSE_DOWN):
        part = {Role.DENSE_GATE: "gate", Role.DENSE_UP: "up", Role.DENSE_DOWN: "down"}[entry.role]
        name = f"model.layers.{entry.layer}.feed_forward.{part}_proj.weight"
        return tmap._stored(name, entry.shape)
    kinds = tmap.spec.attn_kinds or []
    if entry.layer < len(kinds) and kinds[entry.layer] == ATTN_MAMBA1:
        return _mamba1_tensor(tmap, entry)
    return None
