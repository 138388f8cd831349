"""A multimodal checkpoint's text model (model_type qwen3_5_moe: Qwen3.5-MoE as
its checkpoints ship, `Qwen3_5MoeForConditionalGeneration`): the config's
text_config as a text model's config.json, and the weights under
`model.language_model.` seen as a text model's `model.`; the vision tower
(`model.visual.`) and the multi-token-prediction layers (`mtp.`) are left out,
as transformers' text model leaves them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import UnsupportedModelError

# model_type -> the model_type of its text model (whose converter runs).
TEXT_MODELS = {"qwen3_5_moe": "qwen3_5_moe_text"}
LANGUAGE_PREFIX = "model.language_model."
LEFT_OUT = ("model.visual.", "mtp.")


def text_config(config: dict, path: str | Path) -> dict:
    """config itself, or a multimodal config's text_config as a text model's."""
    family = config.get("model_type")
    if not isinstance(family, str) or family not in TEXT_MODELS:
        return config
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise UnsupportedModelError("text_config", text, f"a {family} config needs its text "
                                    "model's config as an object", path=path)
    tied = config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
    return {**text, "model_type": TEXT_MODELS[family], "tie_word_embeddings": tied}


def text_model_name(name: str) -> str | None:
    """A multimodal checkpoint's tensor under its text model's name (None: left out)."""
    if name.startswith(LANGUAGE_PREFIX):
        return "model." + name[len(LANGUAGE_PREFIX):]
    return None if name.startswith(LEFT_OUT) else name


class RenamedView:
    """A checkpoint's tensors under other names (rename: a saved name to the name
    the tensor map reads, None to leave it out), with the Checkpoint interface
    the tensor map uses."""

    def __init__(self, ckpt, rename: Callable[[str], str | None]) -> None:
        self.ckpt, self.path = ckpt, ckpt.path
        self._source = {}
        for name in ckpt.names():
            new = rename(name)
            if new is not None:
                self._source[new] = name

    def names(self) -> list[str]:
        return list(self._source)

    def has(self, name: str) -> bool:
        return name in self._source

    def _name(self, name: str) -> str:
        return self._source.get(name, name)

    def file_of(self, name: str) -> Path:
        return self.ckpt.file_of(self._name(name))

    def shape(self, name: str) -> tuple[int, ...]:
        return self.ckpt.shape(self._name(name))

    def load(self, name: str, index: int | None = None) -> np.ndarray:
        return self.ckpt.load(self._name(name), index)
