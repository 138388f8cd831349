"""The importance matrix of a calibration text, for the super-block
quantizer (colibri-convert --quant qk2 .. qk6 --calibration TEXT,
docs/quantization.md): for every weight matrix, the energy of each input
column, sum over the tokens that went through it of x_c^2. A routed expert
sees only the tokens routed to it, so its sums hold its routing frequency too.

The engine computes them, not a second model: the model is written float32
to a temporary image and run on the text (windows of up to 256 tokens, one
thread) with a kernel table whose matmat_f32 slot records its input rows and
then calls the fastest table's here (every table gives the same bits). A
product's weights start where its matrix lies in the image (one thread: no
product is split), which names the tensor. Products that do not pass through
matmat_f32 (none of the matrices a --quant stores, today) get no entry: their
matrices are quantized with unit importance.
"""

from __future__ import annotations

import ctypes
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..image.image_reader import read_image
from ..image.image_spec import DTYPE_F32
from ..image.image_writer import SourceTensor, write_image

WINDOW = 256
Key = tuple[int, int, int]  # (role, layer, expert) of a tensor table entry

_f32p = ctypes.POINTER(ctypes.c_float)
MATMAT_F32 = ctypes.CFUNCTYPE(None, _f32p, ctypes.c_size_t, _f32p, _f32p, ctypes.c_uint32,
                              ctypes.c_uint32, ctypes.c_uint32)


class ImportanceRecorder:
    """A kernel table that sums the squares of every float32 product's input
    columns per matrix (keyed by the matrix's offset in the image)."""

    def __init__(self, lib: ctypes.CDLL, offsets: dict[int, Key]) -> None:
        from ..runtime.engine import kernel_names

        fastest = lib.colibri_linux_kernels(kernel_names()[0].encode())[0]  # the best first
        self.table = type(fastest)()
        ctypes.pointer(self.table)[0] = fastest
        self._inner = MATMAT_F32(fastest.matmat_f32)
        self._hook = MATMAT_F32(self._on_product)
        self.table.matmat_f32 = ctypes.cast(self._hook, ctypes.c_void_p).value
        self.offsets = offsets
        self.base = 0  # the image's address, once it is mapped
        self.energy: dict[Key, np.ndarray] = {}

    def _on_product(self, out, stride, w, x, rows, cols, n) -> None:
        key = self.offsets.get(ctypes.cast(w, ctypes.c_void_p).value - self.base)
        if key is not None and n > 0:
            rows_in = np.ctypeslib.as_array(x, shape=(n, cols)).astype(np.float64)
            total = self.energy.setdefault(key, np.zeros(cols))
            total += (rows_in * rows_in).sum(axis=0)
        self._inner(out, stride, w, x, rows, cols, n)


def importance(spec, sources: Sequence[SourceTensor], ids: list[int],
               alignment: int) -> dict[Key, np.ndarray]:
    """(role, layer, expert) -> the energy of each input column of that
    matrix over the calibration ids (float64, [cols])."""
    from ..runtime.engine import Engine, load_library

    window = min(WINDOW, spec.record.max_context)
    floats = [replace(s, entry=replace(s.entry, dtype=DTYPE_F32)) for s in sources]
    with tempfile.TemporaryDirectory(prefix="colibri-importance-") as tmp:
        image = Path(tmp) / "fp32.bin"
        write_image(image, arch=spec.arch, record=spec.record, ffn_kinds=spec.ffn_kinds,
                    sources=floats, alignment=alignment)
        offsets = {t.offset: (t.role, t.layer, t.expert) for t in read_image(image).tensors
                   if len(t.shape) == 2}
        recorder = ImportanceRecorder(load_library()[0], offsets)
        with Engine(image, context=window, threads=1, kernels=recorder.table) as engine:
            recorder.base = engine.image_address
            for start in range(0, len(ids), window):
                engine.reset()
                engine.forward(ids[start:start + window], logits="none")
    return recorder.energy
