"""Reader of legacy `pytorch_model.bin` files (used only when no .safetensors exist).

torch is imported lazily and only ever with `weights_only=True`, so a pickle can
not run code. Files in the zip format are memory-mapped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckpointError

_FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise CheckpointError("reading pytorch_model.bin needs torch; install it or "
                              "convert the checkpoint to .safetensors") from None
    return torch


def _load_state_dict(path: Path) -> dict[str, Any]:
    torch = _torch()
    try:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # legacy (non-zip) files can not be memory-mapped
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a bad file
        raise CheckpointError(f"cannot load with torch.load(weights_only=True): {exc}",
                              path=path) from None
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise CheckpointError("not a flat dict of tensors", path=path)
    return state


class TorchBinFile:
    """One pytorch_model.bin shard with the same interface as SafetensorsFile."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.tensors = _load_state_dict(self.path)

    def names(self) -> list[str]:
        return list(self.tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.tensors[name].shape)

    def dtype(self, name: str) -> str:
        return str(self.tensors[name].dtype).removeprefix("torch.")

    def load(self, name: str, index: int | None = None) -> np.ndarray:
        tensor = self.tensors[name]
        if self.dtype(name) not in _FLOAT_DTYPES:
            raise CheckpointError(f"tensor {name!r} has dtype {tensor.dtype}; only "
                                  f"{', '.join(_FLOAT_DTYPES)} can be converted", path=self.path)
        if index is not None:
            tensor = tensor[index]
        return tensor.float().numpy().copy()

    def close(self) -> None:
        self.tensors = {}
