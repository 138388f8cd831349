"""The real-shape benchmark image (bench_synth.py) as llama.cpp's GGUF, byte
for byte the same weights: so that colibri-bench --budgets runs llama.cpp on
the model Colibri runs, in the same memory cgroup.

A Colibri Q4 block (binary16 scale, 16 bytes: element j in the low nibble of
byte j, element j + 16 in the high one, weight = d * (nibble - 8)) is
llama.cpp's Q4_0 block, and a Q8 block (scale, 32 int8) its Q8_0 block, so
every quantized matrix is copied unchanged; norms and routers stay float32.
Only OLMoE's shapes (arch "olmoe", which applies RoPE to halves as
transformers does, so q and k need no permutation) are written: each
layer's experts become llama.cpp's stacked gate, up and down tensors.
"""
from __future__ import annotations

import pathlib

import numpy as np

from ..image.image_reader import read_image
from ..image.image_spec import DTYPE_F32, DTYPE_Q4, DTYPE_Q8, Arch, Role
from .bench_llama import LlamaBenchError

_LAYER = {Role.ATTN_NORM: "attn_norm", Role.ATTN_Q: "attn_q", Role.ATTN_K: "attn_k",
          Role.ATTN_V: "attn_v", Role.ATTN_O: "attn_output", Role.ATTN_Q_NORM: "attn_q_norm",
          Role.ATTN_K_NORM: "attn_k_norm", Role.FFN_NORM: "ffn_norm",
          Role.ROUTER: "ffn_gate_inp"}
_EXPERTS = {Role.EXPERT_GATE: "ffn_gate_exps", Role.EXPERT_UP: "ffn_up_exps",
            Role.EXPERT_DOWN: "ffn_down_exps"}


def _ggml_type(dtype: int):
    import gguf

    types = {DTYPE_F32: gguf.GGMLQuantizationType.F32, DTYPE_Q4: gguf.GGMLQuantizationType.Q4_0,
             DTYPE_Q8: gguf.GGMLQuantizationType.Q8_0}
    if dtype not in types:
        raise LlamaBenchError(f"dtype {dtype} has no llama.cpp twin (write the image without "
                              "--row-groups)")
    return types[dtype]


def _raw(image, t) -> np.ndarray:
    """The tensor's bytes, one row of blocks (or float32 values) per row."""
    data = image.data[t.offset:t.offset + t.size]
    if t.dtype == DTYPE_F32:
        return data.view("<f4").reshape(t.shape)
    return data.reshape(t.shape[0], -1)


def _add(writer, name: str, array: np.ndarray, dtype: int) -> None:
    if dtype == DTYPE_F32:
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    else:
        writer.add_tensor(name, np.ascontiguousarray(array), raw_dtype=_ggml_type(dtype))


def _metadata(writer, rec) -> None:
    import gguf

    writer.add_name("colibri-bench")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    writer.add_vocab_size(rec.vocab_size)
    writer.add_context_length(rec.max_context)
    writer.add_embedding_length(rec.hidden_size)
    writer.add_block_count(rec.n_layers)
    writer.add_feed_forward_length(rec.expert_intermediate)
    writer.add_head_count(rec.n_heads)
    writer.add_head_count_kv(rec.n_kv_heads)
    writer.add_rope_dimension_count(rec.head_dim)
    writer.add_rope_freq_base(rec.rope_theta)
    writer.add_layer_norm_rms_eps(rec.rms_eps)
    writer.add_expert_count(rec.n_experts)
    writer.add_expert_used_count(rec.top_k)
    writer.add_tokenizer_model("none")


def _layer(writer, image, i: int) -> None:
    rec = image.record
    for role, name in _LAYER.items():
        t = image.find(role, i)
        _add(writer, f"blk.{i}.{name}.weight", _raw(image, t), t.dtype)
    for role, name in _EXPERTS.items():
        parts = [image.find(role, i, e) for e in range(rec.n_experts)]
        stacked = np.stack([_raw(image, t) for t in parts])
        _add(writer, f"blk.{i}.{name}.weight", stacked, parts[0].dtype)


def write_olmoe_gguf(image_path: pathlib.Path, gguf_path: pathlib.Path) -> pathlib.Path:
    """Write the OLMoE-shape Colibri image at image_path as a GGUF."""
    import gguf

    image = read_image(image_path)
    if image.arch != int(Arch.OLMOE):
        raise LlamaBenchError(f"{image_path}: the GGUF twin is written for OLMoE images only")
    writer = gguf.GGUFWriter(str(gguf_path), "olmoe")
    _metadata(writer, image.record)
    for role, name in ((Role.TOKEN_EMBED, "token_embd"), (Role.OUTPUT_NORM, "output_norm"),
                       (Role.LM_HEAD, "output")):
        t = image.find(role)
        _add(writer, f"{name}.weight", _raw(image, t), t.dtype)
    for i in range(image.record.n_layers):  # the stacked experts are copies: ~ the image in RAM
        _layer(writer, image, i)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return gguf_path
