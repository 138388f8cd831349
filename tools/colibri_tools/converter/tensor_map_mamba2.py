"""A Mamba2 layer's tensors (tensor_map.py asks here for a layer whose
attn_kind is 5; the record: families_granite_hybrid.py).

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

from ..image.image_spec import Role, TensorEntry
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
        tmap._expect(name, entry.shape)
        return lambda: tmap._load(name)
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
        tmap._expect(name, entry.shape)
        return lambda: tmap._load(name)
    if entry.role == Role.SSM_A:
        name = f"{base}.A_log"
        tmap._expect(name, entry.shape)
        return lambda: -np.exp(tmap._load(name).astype(np.float32))
    return None
