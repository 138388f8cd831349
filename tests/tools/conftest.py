"""Fixtures for the tools tests: cached tiny HF models and checkpoints on disk."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hf_models import build_model, save_checkpoint


@pytest.fixture(scope="session")
def hf_model() -> Callable[..., tuple[Any, Any]]:
    """hf_model(family, seed=0, **overrides) -> (model, config), built once per session."""
    cache: dict[str, tuple[Any, Any]] = {}

    def make(family: str, seed: int = 0, **overrides: Any) -> tuple[Any, Any]:
        key = repr((family, seed, sorted(overrides.items())))
        if key not in cache:
            cache[key] = build_model(family, seed, **overrides)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def hf_checkpoint(tmp_path_factory: pytest.TempPathFactory,
                  hf_model: Callable[..., tuple[Any, Any]]) -> Callable[..., Path]:
    """hf_checkpoint(family, *, layout, shards, dtype, tokenizer, weights_format, seed,
    **overrides) -> directory, written once per session. Treat it as read-only
    (use copy_checkpoint to edit one)."""
    cache: dict[str, Path] = {}

    def make(family: str, *, layout: str = "per_expert", shards: int = 1, dtype: str = "float32",
             tokenizer: bool = True, weights_format: str = "safetensors", seed: int = 0,
             **overrides: Any) -> Path:
        key = repr((family, layout, shards, dtype, tokenizer, weights_format, seed,
                    sorted(overrides.items())))
        if key not in cache:
            model, _ = hf_model(family, seed, **overrides)
            out = tmp_path_factory.mktemp(f"hf_{family}_{layout}")
            save_checkpoint(model, out, layout=layout, shards=shards, dtype=dtype,
                            tokenizer=tokenizer, weights_format=weights_format)
            cache[key] = out
        return cache[key]

    return make


@pytest.fixture
def copy_checkpoint(tmp_path: Path) -> Callable[[Path], Path]:
    """copy_checkpoint(src) -> a private, editable copy under tmp_path."""
    def copy(src: Path) -> Path:
        dst = tmp_path / f"hf_copy_{src.name}"
        shutil.copytree(src, dst)
        return dst

    return copy
