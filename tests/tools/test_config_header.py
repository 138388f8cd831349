"""model_config.h compiles as strict C11 and states the right numbers; the
workspace sizes follow docs/core.md (state and scratch layout).

Expected values come from the HF model and the document's formulas, computed
here; the expert blocks are compared with a raw parse of the image's table.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from colibri_tools import convert, read_image
from colibri_tools.errors import OptionError
from colibri_tools.image.sizes import scratch_size, state_size
from hf_expect import expected_record

ROOT = Path(__file__).resolve().parents[2]
GCC = shutil.which("gcc") or shutil.which("cc")


def _round16(n: int) -> int:
    return (n + 15) // 16 * 16


def doc_state_bytes(rec: dict, ctx: int) -> int:
    """docs/core.md: K and V of the layers that attend, two copies of each short
    convolution layer's conv_kernel - 1 inputs (format 1.13)."""
    conv = rec.get("attn_kinds", []).count(4)
    kv = 2 * (rec["n_layers"] - conv) * ctx * rec["n_kv_heads"] * rec["head_dim"]
    return 4 * (kv + 2 * conv * max(rec.get("conv_kernel", 0) - 1, 0) * rec["hidden_size"])


def doc_scratch_bytes(rec: dict, ctx: int, b: int = 1) -> int:
    h, hd = rec["hidden_size"], rec["head_dim"]
    q, k = rec["n_heads"] * hd, rec["n_kv_heads"] * hd
    m = max(rec["dense_intermediate"], rec["expert_intermediate"], rec["shared_intermediate"])
    top_k = max(rec["top_k"], 1)
    counts = [b * h, b * h, b * h, b * h, b * q, b * k, b * k, b * q, rec["n_heads"] * ctx,
              b * m, b * m,
              b * max(rec["n_experts"], 1), b * hd, b * top_k, b * top_k,
              b * h, max(b, min(rec["n_experts"], b * top_k)), b]
    # the last three: one expert's gathered inputs, their tokens (or the experts in use), weights
    if rec.get("quantized"):  # activation blocks of 36 bytes (9 floats) per 32 inputs
        counts.append(b * -(-max(h, q, m) // 32) * 9)
    return 4 * sum(_round16(c) for c in counts)


def _raw_blocks(data: bytes) -> list[tuple[int, int, int, int]]:
    n_layers, n_tensors = struct.unpack_from("<I", data, 72)[0], struct.unpack_from("<I", data, 56)[0]
    gates, out = {}, []
    for i in range(n_tensors):
        role, layer, expert = struct.unpack_from("<3H", data, 256 + 16 * n_layers + 64 * i)
        offset, size = struct.unpack_from("<2Q", data, 256 + 16 * n_layers + 64 * i + 32)
        if role == 48:
            gates[layer, expert] = offset
        if role == 50:
            out.append((layer, expert, gates[layer, expert], offset + size - gates[layer, expert]))
    return out


def _fingerprint(data: bytes) -> int:
    end = struct.unpack_from("<Q", data, 48)[0] + 64 * struct.unpack_from("<I", data, 56)[0]
    return zlib.crc32(data[:24] + bytes(4) + data[28:end])


def _c_program(rec: dict, ctx: int, data: bytes, batch: int = 1) -> str:
    n_moe = sum(rec["ffn_kinds"])
    checks = {
        "FINGERPRINT": f"0x{_fingerprint(data):08X}u", "ARCH": rec["arch"],
        "VOCAB_SIZE": rec["vocab_size"], "HIDDEN_SIZE": rec["hidden_size"],
        "N_LAYERS": rec["n_layers"], "N_HEADS": rec["n_heads"], "N_KV_HEADS": rec["n_kv_heads"],
        "HEAD_DIM": rec["head_dim"], "MAX_CONTEXT": rec["max_context"],
        "DENSE_INTERMEDIATE": rec["dense_intermediate"],
        "EXPERT_INTERMEDIATE": rec["expert_intermediate"], "N_EXPERTS": rec["n_experts"],
        "SHARED_INTERMEDIATE": rec["shared_intermediate"], "TOP_K": rec["top_k"],
        "ALIGNMENT": 4096, "IMAGE_SIZE": len(data), "CONTEXT": ctx, "BATCH": batch,
        "STATE_BYTES": doc_state_bytes(rec, ctx),
        "SCRATCH_BYTES": doc_scratch_bytes(rec, ctx, batch),
        "N_EXPERT_BLOCKS": n_moe * rec["n_experts"], "QUANTIZED": int(rec.get("quantized", 0)),
    }
    lines = ["#include <stdint.h>", "#include <stdio.h>", '#include "colibri.h"',
             '#include "model_config.h"', '#include "model_config.h" /* guarded */']
    for name, value in checks.items():
        lines += [f"#if COLIBRI_MODEL_{name} != {value}", f'#error "{name}"', "#endif",
                  f'_Static_assert(COLIBRI_MODEL_{name} == {value}, "{name}");']
    lines += [
        "#if COLIBRI_MODEL_TOP_K > COLIBRI_MAX_TOP_K", '#error "top_k"', "#endif",
        "struct block { uint32_t layer, expert; uint64_t offset, size; };",
        "static const struct block blocks[] = COLIBRI_MODEL_EXPERT_BLOCKS;",
        "static unsigned char state[COLIBRI_MODEL_STATE_BYTES];",
        "static unsigned char scratch[COLIBRI_MODEL_SCRATCH_BYTES];",
        "int main(void) {",
        "    size_t i, n = COLIBRI_MODEL_N_EXPERT_BLOCKS;",
        "    for (i = 0; i < n; i++)",
        '        printf("%u %u %llu %llu\\n", (unsigned)blocks[i].layer, (unsigned)blocks[i].expert,',
        "               (unsigned long long)blocks[i].offset, (unsigned long long)blocks[i].size);",
        "    return (int)(sizeof blocks == 0 || sizeof state == 0 || sizeof scratch == 0);",
        "}",
    ]
    return "\n".join(lines) + "\n"


CASES = [
    ("mixtral", {}, None, 1, None),
    ("qwen2_moe", {}, 40, 7, None),
    ("switch", {}, 1, 256, None),
    ("qwen2_moe", {"mlp_only_layers": [0, 1, 2]}, None, 1, None),  # no MoE layer: no expert block
    ("qwen2_moe", {}, 40, 7, "int8"),  # quantized: scratch with activation blocks
    ("mixtral", {}, None, 3, "int4"),
]


@pytest.mark.skipif(GCC is None, reason="no C compiler")
@pytest.mark.parametrize("family,overrides,context,batch,quant", CASES)
def test_header_compiles_and_states_the_model(family, overrides, context, batch, quant, hf_model,
                                              hf_checkpoint, tmp_path):
    model, _ = hf_model(family, **overrides)
    result = convert(hf_checkpoint(family, **overrides), tmp_path / "out", context=context,
                     progress=False, batch=batch, quant=quant)
    rec = {**expected_record(model, family), "quantized": quant is not None}
    ctx = context if context is not None else min(rec["max_context"], 2048)
    data = result.image_path.read_bytes()
    src = tmp_path / "check.c"
    src.write_text(_c_program(rec, ctx, data, batch))
    exe = tmp_path / "check"
    cmd = [GCC, "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
           "-I", str(ROOT / "sdk" / "include"), "-I", str(tmp_path / "out"), str(src), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    printed = [tuple(int(x) for x in line.split()) for line in run.stdout.splitlines()]
    assert printed == _raw_blocks(data)
    text = result.header_path.read_text()
    assert "generated by colibri-convert; do not edit" in text
    if not printed:
        assert "{0u, 0u, 0u, 0u}" in text


def test_batch_out_of_range_is_refused(hf_checkpoint, tmp_path):
    for batch in (0, 257):
        with pytest.raises(OptionError, match="--batch"):
            convert(hf_checkpoint("mixtral"), tmp_path / str(batch), progress=False, batch=batch)
        assert not (tmp_path / str(batch) / "model.bin").exists()


def test_header_names_the_source_directory(hf_checkpoint, tmp_path):
    src = hf_checkpoint("olmoe")
    result = convert(src, tmp_path, progress=False)
    assert f" * Source: {src.name}\n" in result.header_path.read_text()


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "olmoe", "qwen3_moe", "switch",
                                    "lfm2_moe"])
def test_sizes_follow_section_8(family, hf_model, hf_checkpoint, tmp_path):
    model, _ = hf_model(family)
    rec = expected_record(model, family)
    image = read_image(convert(hf_checkpoint(family), tmp_path, progress=False).image_path)
    for ctx in (1, 7, 16, rec["max_context"]):
        assert state_size(image.record, ctx, image.conv_layers) == doc_state_bytes(rec, ctx)
        assert scratch_size(image.record, ctx) == doc_scratch_bytes(rec, ctx)
        assert scratch_size(image.record, ctx, 13) == doc_scratch_bytes(rec, ctx, 13)
    for ctx in (0, rec["max_context"] + 1):
        with pytest.raises(OptionError):
            state_size(image.record, ctx)
        with pytest.raises(OptionError):
            scratch_size(image.record, ctx)
