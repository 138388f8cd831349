"""The .safetensors reader against valid, truncated, corrupt and hostile files:
every bad file is a CheckpointError naming the file (and an offset), never a crash."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from colibri_tools import convert
from colibri_tools.converter.safetensors_io import SafetensorsFile, parse_header
from colibri_tools.errors import CheckpointError
from safetensors.numpy import save_file
from safetensors.torch import save_file as save_torch_file


def _raw_file(path: Path, header: object, data: bytes = b"", length: int | None = None) -> Path:
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    size = len(body) if length is None else length
    path.write_bytes(struct.pack("<Q", size) + body + data)
    return path


def _entry(dtype: str, shape: list, begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def test_reads_f32_f16_bf16_as_float32(tmp_path):
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(3, 5, generator=gen) * 10
    path = tmp_path / "t.safetensors"
    save_torch_file({"f32": values, "f16": values.half(), "bf16": values.bfloat16(),
                     "empty": torch.zeros(0, 4)}, str(path))
    f = SafetensorsFile(path)
    for name, dtype in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        got = f.load(name)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, values.to(dtype).float().numpy())
    np.testing.assert_array_equal(f.load("bf16", 1), values[1].bfloat16().float().numpy())
    assert f.load("empty").shape == (0, 4)


HOSTILE = {
    "too short": lambda p: (p.write_bytes(b"\x01\x02\x03"), p)[1],
    "huge header length": lambda p: _raw_file(p, {}, length=1 << 62),
    "header past end": lambda p: _raw_file(p, {"a": _entry("F32", [1], 0, 4)}, length=4096),
    "bad json": lambda p: _raw_file(p, b"{\"a\": [1, 2"),
    "not utf-8": lambda p: _raw_file(p, b"\xff\xfe{}"),
    "json list": lambda p: _raw_file(p, [1, 2, 3]),
    "unknown dtype": lambda p: _raw_file(p, {"a": _entry("F7", [1], 0, 4)}, bytes(4)),
    "offsets past end": lambda p: _raw_file(p, {"a": _entry("F32", [4], 0, 16)}, bytes(8)),
    "negative offset": lambda p: _raw_file(p, {"a": _entry("F32", [1], -4, 0)}, bytes(8)),
    "reversed offsets": lambda p: _raw_file(p, {"a": _entry("F32", [0], 8, 4)}, bytes(8)),
    "size mismatch": lambda p: _raw_file(p, {"a": _entry("F32", [3], 0, 8)}, bytes(8)),
    "huge shape": lambda p: _raw_file(p, {"a": _entry("F32", [1 << 40, 1 << 40], 0, 8)}, bytes(8)),
    "overlap": lambda p: _raw_file(p, {"a": _entry("F32", [2], 0, 8),
                                       "b": _entry("F32", [2], 4, 12)}, bytes(12)),
    "shape not list": lambda p: _raw_file(p, {"a": _entry("F32", "2", 0, 8)}, bytes(8)),
    "bool in shape": lambda p: _raw_file(p, {"a": _entry("F32", [True], 0, 4)}, bytes(4)),
    "float offset": lambda p: _raw_file(p, {"a": _entry("F32", [1], 0.0, 4)}, bytes(4)),
    "missing key": lambda p: _raw_file(p, {"a": {"dtype": "F32", "shape": [1]}}, bytes(4)),
    "duplicate name": lambda p: _raw_file(
        p, b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
           b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', bytes(8)),
    "metadata not object": lambda p: _raw_file(p, {"__metadata__": [1]}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_file_is_a_checkpoint_error(case, tmp_path):
    path = HOSTILE[case](tmp_path / "bad.safetensors")
    with pytest.raises(CheckpointError) as info:
        SafetensorsFile(path)
    assert str(path) in str(info.value) and "offset" in str(info.value)


def test_truncated_data_is_caught(tmp_path):
    path = tmp_path / "t.safetensors"
    save_file({"a": np.ones((8, 8), np.float32), "b": np.ones(16, np.float32)}, str(path))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(CheckpointError, match="outside"):
        parse_header(path)


def test_integer_tensor_parses_but_does_not_load(tmp_path):
    path = tmp_path / "t.safetensors"
    save_file({"ids": np.arange(4, dtype=np.int64)}, str(path))
    f = SafetensorsFile(path)
    with pytest.raises(CheckpointError, match="I64"):
        f.load("ids")


def test_random_header_corruption_never_crashes(tmp_path):
    """Mutation fuzzing of a real header: parse cleanly or raise CheckpointError."""
    good = tmp_path / "good.safetensors"
    save_file({"w": np.ones((4, 6), np.float32), "b": np.ones(6, np.float16)}, str(good))
    original = good.read_bytes()
    header_end = 8 + struct.unpack_from("<Q", original)[0]
    rng = random.Random(1234)
    bad = tmp_path / "bad.safetensors"
    for _ in range(400):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(header_end)] = rng.randrange(256)
        if rng.random() < 0.2:
            data = data[:rng.randrange(len(data))]
        bad.write_bytes(bytes(data))
        try:
            f = SafetensorsFile(bad)
            for name in f.names():
                if f.dtype(name) in ("F32", "F16", "BF16"):
                    f.load(name)
        except CheckpointError:
            pass


def test_hostile_shard_fails_conversion_cleanly(hf_checkpoint, copy_checkpoint, tmp_path, capsys):
    from colibri_tools.converter.convert import main
    hf_dir = copy_checkpoint(hf_checkpoint("qwen2_moe"))
    weights = hf_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[0:8] = struct.pack("<Q", (1 << 40))
    weights.write_bytes(bytes(data))
    out = tmp_path / "out"
    assert main([str(hf_dir), "-o", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "model.safetensors" in err and "header length" in err
    assert not out.exists()
    with pytest.raises(CheckpointError):
        convert(hf_dir, out, progress=False)
