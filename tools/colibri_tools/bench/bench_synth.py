"""Real-size images for colibri-bench (`--real NAME --quant int8|int4`): a
published checkpoint's shapes, from its public config.json values written
here as numbers, with random weights written directly as Q8/Q4 blocks, one
tensor at a time (the writer streams them to disk; no float32 copy of the
quantized matrices exists, and at most one float32 tensor, the largest being
the embedding table, is in memory at once). Nothing is downloaded.

The weights are random, so the text is noise; the speed is not: a decoded
token reads the same bytes as the real checkpoint converted with
`colibri-convert --quant ... --quant-attention --quant-embeddings` (the routed experts are
random, so each token touches top_k random experts per layer).
"""
from __future__ import annotations

import functools
import pathlib
from dataclasses import replace

import numpy as np

from ..converter.families import model_spec
from ..image.image_spec import BLOCK_BYTES, DTYPE_Q8, QBLOCK, QUANT_DTYPES, TensorEntry, row_blocks
from ..image.image_writer import SourceTensor, WrittenImage, write_image
from ..image.layer_shapes import canonical_tensors
from ..image.quant import BY_ROW, assign_dtypes, in_row_groups, tensor_size, to_row_groups

# config.json values of public checkpoints (only the fields the converter reads).
REAL_SHAPES: dict[str, dict] = {
    # allenai/OLMoE-1B-7B-0924: 6.9 B parameters, 1.3 B active
    "olmoe-1b-7b": {
        "model_type": "olmoe", "vocab_size": 50304, "hidden_size": 2048,
        "intermediate_size": 1024, "num_hidden_layers": 16, "num_attention_heads": 16,
        "num_key_value_heads": 16, "num_experts": 64, "num_experts_per_tok": 8,
        "max_position_embeddings": 4096, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
        "norm_topk_prob": False, "attention_bias": False, "clip_qkv": None,
        "tie_word_embeddings": False},
    # ibm-granite/granite-3.1-1b-a400m-instruct: 1.3 B parameters, 0.4 B active
    "granite-3.1-1b-a400m": {
        "model_type": "granitemoe", "vocab_size": 49155, "hidden_size": 1024,
        "intermediate_size": 512, "num_hidden_layers": 24, "num_attention_heads": 16,
        "num_key_value_heads": 8, "num_local_experts": 32, "num_experts_per_tok": 8,
        "max_position_embeddings": 131072, "rope_theta": 1500000.0, "rms_norm_eps": 1e-6,
        "attention_bias": False, "tie_word_embeddings": True, "embedding_multiplier": 12.0,
        "attention_multiplier": 0.015625, "residual_multiplier": 0.22, "logits_scaling": 6.0},
}


def _scale(dtype: int, cols: int) -> float:
    """A block scale giving weights of standard deviation about cols^-0.5 for
    uniformly random levels (Q8: -127..127, Q4: -8..7)."""
    level_std = 127 / 3 ** 0.5 if dtype == DTYPE_Q8 else (255 / 12) ** 0.5
    return 1.0 / (level_std * cols ** 0.5)


def _zero_padding(dtype: int, payload: np.ndarray, cols: int) -> None:
    """Set the levels past `cols` in each row's last block to weight 0."""
    used = cols % QBLOCK
    if used == 0:
        return
    last = payload[:, -1]
    if dtype == DTYPE_Q8:
        last[:, used:] = 0
        return
    for i in range(used, QBLOCK):  # Q4: element i in byte i % 16, low nibble if i < 16
        byte = last[:, i % 16]
        last[:, i % 16] = (byte & 0xF0) | 8 if i < 16 else (byte & 0x0F) | 0x80


def random_blocks(rng: np.random.Generator, entry: TensorEntry) -> np.ndarray:
    """Random Q8/Q4 blocks for a [rows, cols] entry: uniform levels, a scale per
    block drawn around _scale (binary16, finite)."""
    rows, cols = entry.shape
    nb, width = row_blocks(cols), BLOCK_BYTES[entry.dtype]
    out = np.empty((rows, nb, width), dtype=np.uint8)
    d = (rng.uniform(0.5, 1.5, size=(rows, nb)) * _scale(entry.dtype, cols)).astype("<f2")
    out[..., :2] = d.view(np.uint8).reshape(rows, nb, 2)
    if entry.dtype == DTYPE_Q8:
        out[..., 2:] = rng.integers(-127, 128, size=(rows, nb, QBLOCK), dtype=np.int8).view(np.uint8)
    else:
        out[..., 2:] = rng.integers(0, 256, size=(rows, nb, QBLOCK // 2), dtype=np.uint8)
    _zero_padding(entry.dtype, out[..., 2:], cols)
    return out


def random_tensor(seed: int, entry: TensorEntry) -> np.ndarray:
    """One tensor's data: blocks when quantized, else float32 (vectors: norms
    at 1; matrices: normal with standard deviation cols^-0.5)."""
    rng = np.random.default_rng([seed, entry.role, entry.layer & 0xFFFFFFFF, entry.expert & 0xFFFFFFFF])
    if entry.dtype in BY_ROW:  # the same blocks, in groups of 16 rows
        plain = random_blocks(rng, replace(entry, dtype=BY_ROW[entry.dtype]))
        return to_row_groups(entry.dtype, plain)
    if entry.dtype in QUANT_DTYPES:
        return random_blocks(rng, entry)
    if len(entry.shape) == 1:
        return np.ones(entry.shape, dtype=np.float32)
    out = rng.standard_normal(entry.shape, dtype=np.float32)
    out *= np.float32(entry.shape[-1] ** -0.5)
    return out


def _entries(name: str, quant: str, every_matrix: bool, row_groups: bool):
    spec = model_spec(REAL_SHAPES[name], f"<{name} config>")
    entries, _ = canonical_tensors(spec.record, spec.ffn_kinds)
    entries = assign_dtypes(entries, quant, every_matrix, every_matrix)
    return spec, in_row_groups(entries) if row_groups else entries


def synthesize(name: str, quant: str, path: pathlib.Path, *, seed: int = 0,
               every_matrix: bool = True, row_groups: bool = False,
               progress=None) -> WrittenImage:
    """Write the image of REAL_SHAPES[name] with random `quant` weights to path:
    every matrix but the routers quantized (as colibri-convert --quant-attention
    --quant-embeddings does), or with every_matrix False the feed-forward ones;
    with row_groups in groups of 16 rows (--row-groups)."""
    spec, entries = _entries(name, quant, every_matrix, row_groups)
    sources = [SourceTensor(e, functools.partial(random_tensor, seed, e)) for e in entries]
    return write_image(path, arch=spec.arch, record=spec.record, ffn_kinds=spec.ffn_kinds,
                       sources=sources, progress=progress)


def planned_size(name: str, quant: str, every_matrix: bool = True,
                 row_groups: bool = False) -> int:
    """Bytes of tensor data the image of `name` holds (before alignment), for
    checking the disk before writing."""
    return sum(tensor_size(e) for e in _entries(name, quant, every_matrix, row_groups)[1])


# A board without a board file, for the projection (docs/performance.md).
EXTRA_BANDWIDTH = {"rpi5": (17.07e9, "LPDDR4X-4267 x 32 bit peak (Raspberry Pi 5 product brief)")}
PROJECTED_BOARDS = ("rpi4", "rpi5", "jetson_orin_nano")


def _board_bandwidth(name: str) -> tuple[float, str]:
    from ..board.boards import load

    if name in EXTRA_BANDWIDTH:
        return EXTRA_BANDWIDTH[name]
    board = load(name)
    return board.bandwidth, board.bandwidth_source


def _stats(text: str, line: str, key: str) -> float:
    for row in text.splitlines():
        if f" {line}:" in row and f" {key}=" in row:
            return float(row.split(f" {key}=", 1)[1].split()[0])
    raise ValueError(f"colibri-run --stats printed no {line} {key}")


def run_colibri(colibri_run: pathlib.Path, image: pathlib.Path, ids: list[int], gen: int,
                threads: int, timeout: float = 1800) -> dict:
    """colibri-run --preload --stats on the image: prompt and decode tokens/s
    and the process's peak RSS (the preloaded image pages count)."""
    import subprocess

    cmd = [str(colibri_run), str(image), "--ids", ",".join(map(str, ids)), "--gen", str(gen),
           "--threads", str(threads), "--batch", str(len(ids)), "--context",
           str(len(ids) + gen + 1), "--preload", "--stats"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"colibri-run failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-800:]}")
    return {"threads": threads, "prompt_tok_s": _stats(done.stderr, "prompt", "tokens_per_s"),
            "decode_tok_s": _stats(done.stderr, "decode", "tokens_per_s"),
            "peak_rss_bytes": int(_stats(done.stderr, "memory", "peak_rss_kib")) * 1024}


def projections(per_token: int, image_bytes: int, measured_fraction: float) -> list[dict]:
    """Decode speed projected to each board from its read bandwidth B:
    bound = B / bytes per decoded token, expected = bound x the best fraction
    of this machine's measured bandwidth Colibri reached here (the machine is
    shared: the best run is the nearest to what the engine does alone; above
    1 where the last-level cache held part of the image, so capped at 1)."""
    rows = []
    for name in PROJECTED_BOARDS:
        bandwidth, source = _board_bandwidth(name)
        bound = bandwidth / per_token
        rows.append({"board": name, "bandwidth": bandwidth, "bandwidth_source": source,
                     "bound_tok_s": bound, "expected_tok_s": bound * measured_fraction,
                     "image_bytes": image_bytes})
    return rows
