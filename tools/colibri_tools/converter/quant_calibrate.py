"""Expert use on a calibration text, for colibri-convert --quant mixed: the
float32 model is written to a temporary image, run through the engine with
the router observer on the text (windows of up to 256 tokens), and the
tokens each (layer, expert) took are counted (docs/quantization.md)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import OptionError
from ..image.image_writer import SourceTensor, write_image

WINDOW = 256


def calibration_ids(text_path: Path, tokenizer_path: Path | None) -> list[int]:
    if tokenizer_path is None:
        raise OptionError("--calibration needs the checkpoint's tokenizer.json")
    from ..runtime.generate import load_tokenizer

    ids = list(load_tokenizer(tokenizer_path).encode(Path(text_path).read_text("utf-8")).ids)
    if len(ids) < 2:
        raise OptionError(f"--calibration {text_path}: fewer than 2 tokens")
    return ids


def expert_counts(spec, sources: Sequence[SourceTensor], ids: list[int],
                  alignment: int) -> np.ndarray:
    """counts[layer, expert]: tokens of `ids` routed to each expert."""
    from ..runtime.engine import Engine

    window = min(WINDOW, spec.record.max_context)
    with tempfile.TemporaryDirectory(prefix="colibri-calibrate-") as tmp:
        image = Path(tmp) / "fp32.bin"
        write_image(image, arch=spec.arch, record=spec.record, ffn_kinds=spec.ffn_kinds,
                    sources=sources, alignment=alignment)
        with Engine(image, context=window, routes=True) as engine:
            for start in range(0, len(ids), window):
                engine.reset()
                engine.forward(ids[start:start + window], logits="none")
            return engine.routes.counts.copy()
