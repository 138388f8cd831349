"""A Hugging Face model directory: config.json plus its weight files.

Weights are found in this order: `model.safetensors.index.json` (+ shards),
`model.safetensors`, then (only when no safetensors exist)
`pytorch_model.bin.index.json` (+ shards) or `pytorch_model.bin`. Tensors are
loaded lazily, one at a time, as float32 numpy arrays.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import numpy as np

from ..errors import CheckpointError
from .safetensors_io import SafetensorsFile
from .torch_bin_io import TorchBinFile

CONFIG_NAME = "config.json"
TOKENIZER_NAME = "tokenizer.json"
SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_SINGLE = "pytorch_model.bin"
TORCH_INDEX = "pytorch_model.bin.index.json"


class WeightFile(Protocol):
    path: Path

    def names(self) -> list[str]: ...
    def shape(self, name: str) -> tuple[int, ...]: ...
    def dtype(self, name: str) -> str: ...
    def load(self, name: str, index: int | None = None) -> np.ndarray: ...
    def close(self) -> None: ...


def read_json(path: Path) -> dict:
    """Read a JSON object, or raise CheckpointError naming the file."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError("file not found", path=path) from None
    except RecursionError:
        raise CheckpointError("cannot read JSON: nested too deeply", path=path) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"cannot read JSON: {exc}", path=path) from None
    if not isinstance(value, dict):
        raise CheckpointError("JSON top level is not an object", path=path)
    return value


def _shard_names(index_path: Path) -> dict[str, str]:
    weight_map = read_json(index_path).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError("no weight_map object", path=index_path)
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or Path(shard).name != shard or shard in ("", ".", ".."):
            raise CheckpointError(f"tensor {name!r}: shard name {shard!r} is not a plain "
                                  f"file name", path=index_path)
    return weight_map


def _open_indexed(directory: Path, index_name: str, opener: type) -> list[WeightFile]:
    index_path = directory / index_name
    weight_map = _shard_names(index_path)
    files = []
    for shard in sorted(set(weight_map.values())):
        if not (directory / shard).is_file():
            raise CheckpointError(f"shard {shard!r} listed in the index is missing", path=index_path)
        files.append(opener(directory / shard))
    for f in files:
        listed = {n for n, s in weight_map.items() if s == f.path.name}
        held = set(f.names())
        for name in sorted(listed - held):
            raise CheckpointError(f"index puts tensor {name!r} in this shard but it is not there",
                                  path=f.path)
        for name in sorted(held - listed):
            raise CheckpointError(f"tensor {name!r} is not listed in {index_name}", path=f.path)
    return files


def _open_weight_files(directory: Path) -> list[WeightFile]:
    if (directory / SAFETENSORS_INDEX).is_file():
        return _open_indexed(directory, SAFETENSORS_INDEX, SafetensorsFile)
    if (directory / SAFETENSORS_SINGLE).is_file():
        return [SafetensorsFile(directory / SAFETENSORS_SINGLE)]
    if (directory / TORCH_INDEX).is_file():
        return _open_indexed(directory, TORCH_INDEX, TorchBinFile)
    if (directory / TORCH_SINGLE).is_file():
        return [TorchBinFile(directory / TORCH_SINGLE)]
    raise CheckpointError(f"no {SAFETENSORS_SINGLE}, {SAFETENSORS_INDEX}, {TORCH_SINGLE} "
                          f"or {TORCH_INDEX} found", path=directory)


def resolve_model_dir(directory: str | Path) -> Path:
    """The folder holding config.json: `directory` itself, or, for a Hugging
    Face cache root (models--ORG--NAME with refs/ and snapshots/<revision>/),
    the snapshot refs/main names, or the only snapshot there is."""
    path = Path(directory)
    snapshots = path / "snapshots"
    if (path / CONFIG_NAME).is_file() or not snapshots.is_dir():
        return path
    revisions = sorted(p.name for p in snapshots.iterdir() if (p / CONFIG_NAME).is_file())
    ref = path / "refs" / "main"
    if ref.is_file():
        wanted = ref.read_text(encoding="ascii", errors="replace").strip()
        if wanted in revisions:
            return snapshots / wanted
        raise CheckpointError(f"refs/main names snapshot {wanted!r}, which has no {CONFIG_NAME} "
                              f"(snapshots with one: {', '.join(revisions) or 'none'})", path=path)
    if len(revisions) == 1:
        return snapshots / revisions[0]
    if not revisions:
        raise CheckpointError(f"a Hugging Face cache folder with no snapshot holding "
                              f"{CONFIG_NAME}", path=path)
    raise CheckpointError(f"several snapshots and no refs/main to choose: "
                          f"{', '.join(revisions)}; give snapshots/<revision> itself", path=path)


class Checkpoint:
    """A Hugging Face model directory opened for conversion (or a cache root:
    resolve_model_dir)."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory)
        if not self.path.is_dir():
            raise CheckpointError("not a directory", path=self.path)
        self.path = resolve_model_dir(self.path)
        self.config_path = self.path / CONFIG_NAME
        self.config = read_json(self.config_path)
        self.files = _open_weight_files(self.path)
        self._where: dict[str, WeightFile] = {}
        for f in self.files:
            for name in f.names():
                if name in self._where:
                    raise CheckpointError(f"tensor {name!r} is also in "
                                          f"{self._where[name].path.name}", path=f.path)
                self._where[name] = f

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def tokenizer_path(self) -> Path | None:
        path = self.path / TOKENIZER_NAME
        return path if path.is_file() else None

    def names(self) -> list[str]:
        return list(self._where)

    def has(self, name: str) -> bool:
        return name in self._where

    def file_of(self, name: str) -> Path:
        return self._file(name).path

    def _file(self, name: str) -> WeightFile:
        try:
            return self._where[name]
        except KeyError:
            raise CheckpointError(f"tensor {name!r} not found", path=self.path) from None

    def shape(self, name: str) -> tuple[int, ...]:
        return self._file(name).shape(name)

    def load(self, name: str, index: int | None = None) -> np.ndarray:
        """The tensor (or its [index] slice along axis 0) as a float32 array."""
        return self._file(name).load(name, index)

    def close(self) -> None:
        for f in self.files:
            f.close()


def open_checkpoint(directory: str | Path) -> Checkpoint:
    """Open and index a Hugging Face model directory."""
    return Checkpoint(directory)
