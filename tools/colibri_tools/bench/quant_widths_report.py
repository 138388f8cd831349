"""colibri-quant-report --widths: the recipe a quantized image carries (every
tensor table entry's dtype), per layer and expert, with each matrix's bytes,
bits a weight and relative weight error against the float32 image:
||W - W_q|| / ||W|| over the matrix (docs/quantization.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import OptionError
from ..image.image_reader import read_image
from ..image.image_spec import DTYPE_F32, NO_EXPERT, NO_LAYER, Role
from ..image.quant import DTYPE_NAMES


@dataclass(frozen=True)
class MatrixWidth:
    layer: int | None
    role: str
    expert: int | None
    dtype: str
    bytes: int
    bits_per_weight: float
    relative_error: float


def matrix_widths(fp32_image: str | Path, quant_image: str | Path) -> list[MatrixWidth]:
    """One row per quantized matrix of quant_image, in table order."""
    ref, quant = read_image(fp32_image), read_image(quant_image)
    if len(ref.tensors) != len(quant.tensors):
        raise OptionError(f"{quant_image} and {fp32_image} are not the same model "
                          f"({len(quant.tensors)} against {len(ref.tensors)} tensors)")
    rows = []
    for t, f in zip(quant.tensors, ref.tensors):
        if (t.role, t.layer, t.expert) != (f.role, f.layer, f.expert):
            raise OptionError(f"{quant_image}: tensor {t.describe()} where {fp32_image} has "
                              f"{f.describe()}")
        if t.dtype == DTYPE_F32:
            continue
        w, q = ref.tensor_array(f), quant.tensor_array(t)
        norm = float(np.linalg.norm(w))
        rows.append(MatrixWidth(None if t.layer == NO_LAYER else t.layer, Role(t.role).name,
                                None if t.expert == NO_EXPERT else t.expert,
                                DTYPE_NAMES[t.dtype], t.size, 8 * t.size / w.size,
                                float(np.linalg.norm(q - w)) / norm if norm else 0.0))
    return rows


def render_widths(rows: list[MatrixWidth]) -> str:
    """A line per matrix, then per layer and overall: bytes and bits a weight."""
    lines = ["layer  matrix           expert  dtype    bytes      bits/weight  rel. error"]
    for r in rows:  # dtype: Q8 .. QK6, or in groups of 16 rows Q8_R16 .. QK6_R16
        lines.append(f"{'-' if r.layer is None else r.layer:>5}  {r.role:<16} "
                     f"{'-' if r.expert is None else r.expert:>6}  {r.dtype:<7} {r.bytes:>10}  "
                     f"{r.bits_per_weight:>11.3f}  {r.relative_error:.4f}")
    for layer in sorted({r.layer for r in rows if r.layer is not None}):
        lines.append(_total(f"layer {layer}", [r for r in rows if r.layer == layer]))
    lines.append(_total("all quantized matrices", rows))
    return "\n".join(lines)


def _total(name: str, rows: list[MatrixWidth]) -> str:
    size = sum(r.bytes for r in rows)
    weights = sum(8 * r.bytes / r.bits_per_weight for r in rows)
    kinds = sorted({r.dtype for r in rows})
    return f"{name}: {size} bytes, {8 * size / weights:.3f} bits a weight ({', '.join(kinds)})"
