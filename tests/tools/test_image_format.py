"""The writer against docs/format.md, byte for byte, and the reader against
deliberately broken images.

Offsets, roles and the canonical order are spelled out here from the document
(or parsed from it), independently of colibri_tools.image.image_spec.
"""

from __future__ import annotations

import math
import random
import re
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from colibri_tools import convert, fix_meta_crc, read_image
from colibri_tools.errors import ImageFormatError
from colibri_tools.image.image_spec import (
    EXTENSION_END,
    EXTENSION_FIELDS,
    HEADER_FIELDS,
    LAYER_FIELDS,
    MODEL_RECORD_END,
    MODEL_RECORD_FIELDS,
    TENSOR_FIELDS,
    Role,
)
from colibri_tools.image.layer_shapes import canonical_tensors
from colibri_tools.image.status import Status
from hf_expect import GLOBAL, expected_record
from hf_models import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
FORMAT_MD = (ROOT / "docs" / "format.md").read_text()
COLIBRI_H = (ROOT / "sdk" / "include" / "colibri.h").read_text()
DOC_TYPES = {"u8[8]": "8s", "u16": "H", "u32": "I", "u64": "Q", "f32": "f", "u32[4]": "4I"}

# Model record offsets exactly as docs/format.md 1.1 lists them.
RECORD_AT = {
    "vocab_size": (64, "I"), "hidden_size": (68, "I"), "n_layers": (72, "I"),
    "n_heads": (76, "I"), "n_kv_heads": (80, "I"), "head_dim": (84, "I"),
    "max_context": (88, "I"), "dense_intermediate": (92, "I"),
    "expert_intermediate": (96, "I"), "n_experts": (100, "I"),
    "shared_intermediate": (104, "I"), "rms_eps": (108, "f"), "rope_theta": (112, "f"),
    "attn_bias": (116, "I"), "qk_norm": (120, "I"), "tie_embeddings": (124, "I"),
    "router_score": (128, "I"), "top_k": (132, "I"), "router_norm_topk": (136, "I"),
    "routed_scaling": (140, "f"), "shared_gate": (144, "I"), "n_group": (148, "I"),
    "topk_group": (152, "I"), "activation": (156, "I"), "norm_kind": (160, "I"),
    "embedding_scale": (164, "f"), "residual_scale": (168, "f"), "attention_scale": (172, "f"),
    "logits_divisor": (176, "f"), "router_jitter": (180, "f"),
    "router_norm_min": (184, "f"), "rope_dim": (188, "I"), "rope_kind": (192, "I"),
    "rope_factor": (196, "f"), "rope_ramp_low": (200, "f"), "rope_ramp_width": (204, "f"),
    "rope_attn_factor": (208, "f"),
    "sliding_window": (212, "I"), "swiglu_limit": (216, "f"), "swiglu_alpha": (220, "f"),
    "mla": (224, "I"), "q_lora_rank": (228, "I"), "kv_lora_rank": (232, "I"),
    "v_head_dim": (236, "I"), "lora_eps": (240, "f"), "qkv_clip": (244, "f"),
    "attn_temp_floor": (248, "f"), "attn_temp_scale": (252, "f"), "zero_experts": (60, "I"),
}


def _doc_section(start: str, end: str) -> list[list[str]]:
    text = FORMAT_MD[FORMAT_MD.index(start):FORMAT_MD.index(end)]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]
    return [r for r in rows if r[0].isdigit()]


@pytest.mark.parametrize("start,end,table", [
    ("## 1. Header", "### 1.1", HEADER_FIELDS),
    ("### 1.1", "### 1.2", MODEL_RECORD_FIELDS),
    ("### 1.2", "## 2.", EXTENSION_FIELDS),
    ("## 2. Layer table", "## 3.", LAYER_FIELDS),
    ("## 3. Tensor table", "### 3.1", TENSOR_FIELDS),
])
def test_field_tables_match_the_document(start, end, table):
    doc = [(name, int(off), DOC_TYPES[typ]) for off, typ, name, *_ in _doc_section(start, end)
           if typ in DOC_TYPES and not (name == "reserved" and typ.startswith("u8["))]
    assert [(n, o, c) for n, o, c in table] == doc


def test_reserved_tails_match_the_document():
    """The model record fills the header up to its end (format 1.11); its extension
    (1.13) ends in reserved bytes up to 512; a tensor entry ends in 8 reserved bytes."""
    name, offset, code = MODEL_RECORD_FIELDS[-1]
    assert MODEL_RECORD_END == 256 == offset + struct.calcsize(code)
    assert _doc_section("### 1.1", "### 1.2")[-1][:3] == [str(offset), "f32", name]
    name, offset, code = EXTENSION_FIELDS[-1]
    assert EXTENSION_END == offset + struct.calcsize(code)
    assert _doc_section("### 1.2", "## 2.")[-1][:3] == [str(EXTENSION_END),
                                                       f"u8[{512 - EXTENSION_END}]", "reserved"]
    assert _doc_section("## 3. Tensor table", "### 3.1")[-1][:3] == ["56", "u8[8]", "reserved"]


def test_roles_match_the_document():
    doc = {int(r[0]): r[1] for r in _doc_section("### 3.1", "### 3.2")}
    assert doc == {int(role): role.name for role in Role}


def _u(fmt: str, data: bytes, offset: int):
    return struct.unpack_from("<" + fmt, data, offset)[0]


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _attention_tail(rec: dict) -> list[tuple]:
    """An attention layer's rows after its projections (section 3.1)."""
    h, hd = rec["hidden_size"], rec["head_dim"]
    q, k = rec["n_heads"] * hd, rec["n_kv_heads"] * hd
    rows = [(21 + bit, shape) for bit, shape in enumerate([(q,), (k,), (k,), (h,)])
            if rec["attn_bias"] & (1 << bit)]
    if rec["qk_norm"] == 1:
        rows += [(25, (q,)), (26, (k,))]
    if rec["qk_norm"] in (2, 3):  # per head (3: after RoPE, format 1.10; 4 has none)
        rows += [(25, (hd,)), (26, (hd,))]
    rows.append((27, (h,)))
    if rec["norm_kind"] == 1:
        rows += [(28, (h,)), (29, (h,))]
    if rec["norm_kind"] == 3:  # the norms after the attention and the FFN (1.11)
        rows += [(71, (h,)), (72, (h,))]
    if rec["attn_bias"] & 32:
        rows.append((30, (rec["n_heads"],)))
    if rec["layer_rope"]:  # the layer's RoPE inverse frequencies (1.12)
        rows.append((75, (rec["rope_dim"] // 2,)))
    if rec["attn_bias"] & 2048:  # the MLA head gate (1.14)
        rows.append((96, (rec["n_heads"], h)))
    return rows


def _doc_order(rec: dict) -> list[tuple]:
    """Section 3.1, written out plainly: (role, layer, expert, shape) in table order."""
    h, v, hd = rec["hidden_size"], rec["vocab_size"], rec["head_dim"]
    q, k = rec["n_heads"] * hd, rec["n_kv_heads"] * hd
    d, i, s, e = (rec["dense_intermediate"], rec["expert_intermediate"],
                  rec["shared_intermediate"], rec["n_experts"])
    out = [(1, GLOBAL, GLOBAL, (v, h)), (2, GLOBAL, GLOBAL, (h,))]
    if not rec["tie_embeddings"]:
        out.append((3, GLOBAL, GLOBAL, (v, h)))
    if rec["norm_kind"] == 1:
        out.append((4, GLOBAL, GLOBAL, (h,)))
    if rec["attn_bias"] & 16:
        out.append((5, GLOBAL, GLOBAL, (v,)))
    for layer, kind in enumerate(rec["ffn_kinds"]):
        if rec["attn_kinds"][layer] == 5:  # a Mamba2 mixer (1.14): z, xBC, dt, taps, .., out
            heads, inner = rec["ssm_heads"], rec["ssm_heads"] * rec["ssm_head_dim"]
            c = inner + 2 * rec["ssm_groups"] * rec["ssm_state"]
            rows = [(16, (h,)), (81, (inner, h)), (82, (c, h)), (83, (heads, h)),
                    (84, (c, rec["conv_kernel"])), (85, (c,)), (86, (heads,)), (87, (heads,)),
                    (88, (heads,)), (89, (inner,)), (90, (h, inner)), (27, (h,))]
        elif rec["attn_kinds"][layer] == 6:  # a gated delta layer (1.14): beta, no bias or D
            heads, inner = rec["ssm_heads"], rec["ssm_heads"] * rec["ssm_head_dim"]
            c = inner + 2 * rec["ssm_groups"] * rec["ssm_state"]
            rows = [(16, (h,)), (81, (inner, h)), (82, (c, h)), (83, (heads, h)), (91, (heads, h)),
                    (84, (c, rec["conv_kernel"])), (86, (heads,)), (87, (heads,)),
                    (89, (rec["ssm_head_dim"],)), (90, (h, inner)), (27, (h,))]
        elif rec["attn_kinds"][layer] == 7:  # a KDA layer (1.14): gates of rank kda_rank
            heads, inner = rec["ssm_heads"], rec["ssm_heads"] * rec["ssm_head_dim"]
            c, rank = inner + 2 * rec["ssm_groups"] * rec["ssm_state"], rec["kda_rank"]
            gate = [(rank, h), (inner, rank)] if rank else [(inner, h)]
            rows = [(16, (h,)), (82, (c, h)), (91, (heads, h)), *zip((92, 93), gate),
                    *zip((94, 95), gate), (84, (c, rec["conv_kernel"])), (86, (inner,)),
                    (87, (heads,)), (89, (rec["ssm_head_dim"],)), (90, (h, inner)), (27, (h,))]
        elif rec["attn_kinds"][layer] == 8:  # a Mamba1 layer (1.14): a head per channel
            inner, n, rank = rec["ssm_heads"], rec["ssm_state"], rec["ssm_dt_rank"]
            rows = [(16, (h,)), (81, (inner, h)), (82, (inner, h)), (84, (inner, rec["conv_kernel"])),
                    (85, (inner,)), (97, (rank + 2 * n, inner)), (98, (rank,)), (99, (n,)),
                    (100, (n,)), (101, (inner, rank)), (86, (inner,)), (102, (inner, n)),
                    (88, (inner,)), (90, (h, inner)), (27, (h,))]
        elif rec["attn_kinds"][layer] == 4:  # a short convolution (1.13): B, C, X, taps, out
            rows = [(16, (h,)), (76, (h, h)), (77, (h, h)), (78, (h, h)),
                    (79, (h, rec["conv_kernel"])), (80, (h, h)), (27, (h,))]
            rows += [(28, (h,)), (29, (h,))] if rec["norm_kind"] == 1 else []
            rows += [(71, (h,)), (72, (h,))] if rec["norm_kind"] == 3 else []
        elif rec["mla"] == 1:  # MLA (format 1.7)
            lq, lkv, rope, v_dim = (rec["q_lora_rank"], rec["kv_lora_rank"], rec["rope_dim"],
                                    rec["v_head_dim"])
            rows = [(16, (h,))] + ([(17, (q, h))] if lq == 0 else
                                   [(64, (lq, h)), (65, (lq,)), (66, (q, lq))])
            rows += [(67, (lkv + rope, h)), (68, (lkv,)),
                     (69, (rec["n_heads"] * (hd - rope + v_dim), lkv)),
                     (20, (h, rec["n_heads"] * v_dim))]
        else:
            experts = rec["attn_bias"] & 512  # attention experts (1.11): q and o stacked
            rows = [(16, (h,)), (17, (e * k, h) if experts else (q, h)), (18, (k, h)), (19, (k, h))]
            rows += [(70, (q, h))] if rec["attn_bias"] & 256 else []  # the output's gate (1.11)
            rows += [(73, (e, h))] if experts else []  # the attention experts' router
            rows.append((20, (e * h, k) if experts else (h, q)))
        if rec["attn_kinds"][layer] == 9:  # no operator (1.14): the FFN's norm only
            rows = [(27, (h,))]
        elif rec["attn_kinds"][layer] not in (4, 5, 6, 7, 8):
            rows += _attention_tail(rec)
        if kind == 3:  # no FFN (1.14): no FFN norm either
            rows = [row for row in rows if row[0] not in (27, 29, 72)]
        gated = rec["activation"] != 2  # relu^2 (1.14): no gate matrices
        if kind in (0, 2):  # dense, or (1.12) a shortcut layer's dense part
            rows += [(32, (d, h))] * gated + [(33, (d, h)), (34, (h, d))]
        if kind in (1, 2):
            w = e + rec["zero_experts"]  # the router scores the zero experts too (1.12)
            if rec["attn_bias"] & 64:
                rows.append((39, (w,)))
            rows.append((40, (w, h)))
            if s:
                rows += [(41, (s, h))] * gated + [(42, (s, h)), (43, (h, s))]
                if rec["shared_gate"]:
                    rows.append((44, (1, h)))
            if rec["router_score"] in (1, 4):
                rows.append((45, (w,)))
            if rec["attn_bias"] & 128:
                rows += [(46, (e, 2 * i)), (47, (e, h))]
            if rec["attn_bias"] & 1024:  # the bias after the experts' sum (1.11)
                rows.append((74, (h,)))
        out += [(role, layer, GLOBAL, shape) for role, shape in rows]
        if kind in (1, 2):
            for x in range(e):
                out += [(48, layer, x, (i, h))] * gated + [(49, layer, x, (i, h)),
                                                           (50, layer, x, (h, i))]
    return out


def _raw_tensors(data: bytes, table: int, n: int) -> list[dict]:
    out = []
    for idx in range(n):
        b = table + 64 * idx
        ndim = _u("I", data, b + 8)
        out.append({"role": _u("H", data, b), "layer": _u("H", data, b + 2),
                    "expert": _u("H", data, b + 4), "dtype": _u("H", data, b + 6), "ndim": ndim,
                    "shape": struct.unpack_from("<4I", data, b + 12),
                    "crc": _u("I", data, b + 28), "offset": _u("Q", data, b + 32),
                    "size": _u("Q", data, b + 40), "reserved": data[b + 48:b + 64]})
    return out


def _check_header(data: bytes, rec: dict, alignment: int) -> tuple[int, int]:
    n_layers = rec["n_layers"]
    assert data[0:8] == b"COLIBRI\x1a"
    scales = rec["embedding_scale"] != 0.0  # the 1.1 SCALES flag (docs/format.md section 1)
    rope = rec["rope_dim"] != 0  # the 1.5 ROPE flag
    minor = 1 if scales or rec["router_score"] == 2 or rec["arch"] >= 6 else 0
    if rec["arch"] >= 8 or rec["norm_kind"] == 1 or rec["router_score"] == 3 or rec["attn_bias"] & 16:
        minor = 2  # section 7: LayerNorm, sparsemixer, LM-head bias, PhiMoE
    if rec["arch"] >= 9 or rec["router_score"] == 4:
        minor = 4  # section 7: the biased softmax router, ERNIE-4.5
    if rope or rec["router_score"] == 1 or rec["n_group"] > 1 or rec["arch"] >= 10:
        minor = 5  # section 7: sigmoid router, groups, RoPE fields, GLM-4.5 / dots1
    if rec["arch"] >= 12 or rec["sliding_window"] or rec["activation"] or rec["attn_bias"] & 0xE0:
        minor = 6  # section 7: gpt-oss
    mla = rec["mla"] != 0  # the 1.7 MLA flag
    if mla or rec["arch"] >= 13:
        minor = 7  # section 7: Multi-head Latent Attention, DeepSeek-V2 / V3
    if rec["norm_kind"] == 2 or rec["qk_norm"] == 3 or rec["arch"] >= 15:
        minor = 10  # section 7: norms after the sublayers, q/k norms after RoPE, FlexOlmo, Hunyuan
    if (rec["norm_kind"] == 3 or rec["qkv_clip"] or rec["attn_bias"] & 256 or rec["arch"] >= 20
            or rec["attn_temp_floor"] or rec["qk_norm"] == 4 or rec["router_score"] == 5
            or 3 in rec["attn_kinds"]):
        minor = 11  # section 7: DBRX's clamp, AFMoE's gate and norms, Llama 4's features
    if rec["zero_experts"] or rec["arch"] >= 24 or 2 in rec["ffn_kinds"] or rec["layer_rope"]:
        minor = 12  # section 7: zero experts, shortcut layers, each layer's RoPE (1.12)
    extended = rec["conv_kernel"] != 0 or rec["router_sum_eps"] != 0.0  # section 1.2
    extended = extended or rec["ssm_heads"] != 0 or rec["kda_rank"] or rec["kda_bound"] \
        or rec["ssm_dt_rank"] or rec["ssm_dt_min"]
    if extended or rec["arch"] >= 26 or 4 in rec["attn_kinds"]:
        minor = 13  # section 7: the record's extension, short convolutions, LFM2-MoE
    if rec["ssm_heads"] or rec["arch"] >= 27 or {5, 6, 7, 8, 9} & set(rec["attn_kinds"]) \
            or 3 in rec["ffn_kinds"] or rec["activation"] == 2:
        minor = 14  # section 7: the extension's ssm_* sizes, Mamba2 and gated delta layers
    header = 512 if extended else 256
    assert (_u("H", data, 8), _u("H", data, 10), _u("I", data, 12)) == (1, minor, header)
    assert _u("Q", data, 16) == len(data)
    flags = int(scales) | 2 * int(rope) | (4 if rec["sliding_window"] else 0)  # SLIDING: 1.6
    flags |= 8 * int(mla) | 32 * rec["layer_rope"]  # MLA: 1.7; LAYER_ROPE: 1.12
    assert (_u("I", data, 28), _u("I", data, 32), _u("I", data, 36)) == (
        flags, alignment, rec["arch"])
    assert _u("Q", data, 40) == header and _u("Q", data, 48) == header + 16 * n_layers
    assert _u("I", data, 60) == rec["zero_experts"]  # 1.12; reserved, 0, before
    for name, (offset, code) in RECORD_AT.items():
        assert _u(code, data, offset) == pytest.approx(rec[name], rel=1e-7), name
    if extended:  # section 1.2 (1.13, 1.14), the rest of the 512 bytes zero
        assert (_u("I", data, 256), _u("f", data, 260)) == pytest.approx(
            (rec["conv_kernel"], rec["router_sum_eps"]), rel=1e-7)
        assert struct.unpack_from("<5IfIf", data, 264) == pytest.approx((
            rec["ssm_heads"], rec["ssm_head_dim"], rec["ssm_state"], rec["ssm_groups"],
            rec["kda_rank"], rec["kda_bound"], rec["ssm_dt_rank"], rec["ssm_dt_min"]), rel=1e-7)
        assert data[296:512] == bytes(216)
    table, n_tensors = header + 16 * n_layers, _u("I", data, 56)
    end = table + 64 * n_tensors
    assert _u("I", data, 24) == zlib.crc32(data[:24] + bytes(4) + data[28:end])
    return table, n_tensors


def _check_layer_table(data: bytes, rec: dict, order: list[tuple]) -> None:
    header = _u("I", data, 12)  # 256, or 512 with the record's extension (1.13)
    for layer, kind in enumerate(rec["ffn_kinds"]):
        b = header + 16 * layer
        members = [idx for idx, t in enumerate(order) if t[1] == layer]
        assert struct.unpack_from("<4I", data, b) == (kind, members[0], len(members),
                                                      rec["attn_kinds"][layer])


def _check_placement(data: bytes, tensors: list[dict], table_end: int, alignment: int,
                     padding: bool = True) -> None:
    """tensors placed in their order from table_end (3.2); with padding, every
    other byte past the tables zero."""
    covered = bytearray(len(data))
    covered[:table_end] = b"\1" * table_end
    cursor = table_end
    for idx, t in enumerate(tensors):
        assert t["offset"] >= cursor and t["offset"] % 64 == 0
        # an expert block starts at its gate, or its up matrix without one (1.14)
        first = t["role"] == 48 or (t["role"] == 49 and tensors[idx - 1]["role"] != 48)
        if first:
            assert t["offset"] % alignment == 0
        if t["role"] in (49, 50) and not first:  # back to back after the gate (resp. up)
            assert t["offset"] == _align(tensors[idx - 1]["offset"] + tensors[idx - 1]["size"], 64)
        body = data[t["offset"]:t["offset"] + t["size"]]
        assert len(body) == t["size"] and zlib.crc32(body) == t["crc"]
        covered[t["offset"]:t["offset"] + t["size"]] = b"\1" * t["size"]
        cursor = t["offset"] + t["size"]
    if padding:
        rest = bytes(b for b, c in zip(data, covered) if not c)
        assert rest == bytes(len(rest))


@pytest.mark.parametrize("family", FAMILIES)
def test_written_image_follows_the_document(family, hf_model, hf_checkpoint, tmp_path):
    model, _ = hf_model(family)
    alignment = 4096 if family != "olmoe" else 256
    result = convert(hf_checkpoint(family), tmp_path, alignment=alignment, progress=False)
    data = result.image_path.read_bytes()
    rec = expected_record(model, family)
    table, n_tensors = _check_header(data, rec, alignment)
    order = _doc_order(rec)
    _check_layer_table(data, rec, order)
    tensors = _raw_tensors(data, table, n_tensors)
    got = [(t["role"], t["layer"], t["expert"], tuple(t["shape"][:t["ndim"]])) for t in tensors]
    assert got == order
    for t in tensors:
        assert t["dtype"] == 0 and t["reserved"] == bytes(16) and t["ndim"] in (1, 2)
        assert t["shape"][t["ndim"]:] == (0,) * (4 - t["ndim"])
        assert t["size"] == 4 * math.prod(t["shape"][:t["ndim"]])
    _check_placement(data, tensors, table + 64 * n_tensors, alignment)


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe"])
def test_experts_last_image_follows_the_document(family, hf_checkpoint, tmp_path):
    """Format 1.9 (3.2): flag bit 4 and minor 9; the tensors that are not
    experts' in table order from the tables' end, then every expert block,
    in table order, each gate at a multiple of the alignment, up and down
    back to back; zero padding; the same data as the interleaved image."""
    plain = convert(hf_checkpoint(family), tmp_path / "plain", progress=False)
    last = convert(hf_checkpoint(family), tmp_path / "last", progress=False, experts_last=True)
    data = last.image_path.read_bytes()
    assert _u("I", data, 28) & 16 and _u("H", data, 10) == 9
    assert not _u("I", plain.image_path.read_bytes(), 28) & 16
    table, n_tensors = _u("Q", data, 48), _u("I", data, 56)
    tensors = _raw_tensors(data, table, n_tensors)
    others = [t for t in tensors if t["role"] not in (48, 49, 50)]
    experts = [t for t in tensors if t["role"] in (48, 49, 50)]
    assert experts and others
    _check_placement(data, others, table + 64 * n_tensors, 4096, padding=False)
    first = experts[0]["offset"]
    assert first >= others[-1]["offset"] + others[-1]["size"] and first % 4096 == 0
    _check_placement(data, experts, first, 4096, padding=False)
    covered = bytearray(len(data))
    covered[:table + 64 * n_tensors] = b"\1" * (table + 64 * n_tensors)
    for t in tensors:
        covered[t["offset"]:t["offset"] + t["size"]] = b"\1" * t["size"]
    assert bytes(b for b, c in zip(data, covered) if not c) == bytes(covered.count(0))
    plain_data = plain.image_path.read_bytes()
    plain_tensors = _raw_tensors(plain_data, table, n_tensors)
    assert [t["crc"] for t in tensors] == [t["crc"] for t in plain_tensors]
    assert read_image(last.image_path).fingerprint == _u("I", data, 24)


def test_meta_crc_is_the_crc_of_the_check_string():
    from colibri_tools.image.image_spec import meta_crc32
    assert zlib.crc32(b"123456789") == 0xCBF43926
    buf = bytearray(b"x" * 40)
    assert meta_crc32(buf, 40) == zlib.crc32(bytes(buf[:24]) + bytes(4) + bytes(buf[28:40]))


# ---------------------------------------------------------------------------
# Broken images: each defect gives the status colibri_init reports for it.


@pytest.fixture(scope="module")
def good_image(tmp_path_factory, hf_checkpoint) -> bytes:
    out = tmp_path_factory.mktemp("good_image")
    return convert(hf_checkpoint("qwen2_moe"), out, progress=False).image_path.read_bytes()


def _tensor_entry(data: bytes | bytearray, index: int) -> int:
    n_layers = _u("I", data, 72)
    return 256 + 16 * n_layers + 64 * index


def _first(data: bytes, role: int) -> int:
    n = _u("I", data, 56)
    return next(i for i in range(n) if _u("H", data, _tensor_entry(data, i)) == role)


def _put(buf: bytearray, fmt: str, offset: int, value) -> None:
    struct.pack_into("<" + fmt, buf, offset, value)


def _mutations(data: bytes) -> dict:
    """name -> (function of a bytearray, whether to fix the meta CRC, expected status)."""
    gate = _tensor_entry(data, _first(data, 48))
    last = _tensor_entry(data, _u("I", data, 56) - 1)
    second = _tensor_entry(data, 1)
    return {
        "bad magic": (lambda b: _put(b, "B", 0, 0x44), False, "COLIBRI_E_BAD_MAGIC"),
        "major 2": (lambda b: _put(b, "H", 8, 2), False, "COLIBRI_E_UNSUPPORTED_VERSION"),
        "unknown flag": (lambda b: _put(b, "I", 28, 1 << 31), False, "COLIBRI_E_UNSUPPORTED_VERSION"),
        "header_size": (lambda b: _put(b, "I", 12, 128), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "tensor_table_offset": (lambda b: _put(b, "Q", 48, 512), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "image_size too big": (lambda b: _put(b, "Q", 16, len(data) + 64), True,
                               "COLIBRI_E_TRUNCATED"),
        "tables past end": (lambda b: _put(b, "I", 56, 1 << 30), True, "COLIBRI_E_TRUNCATED"),
        "flipped table byte": (lambda b: _put(b, "B", gate + 20, 0x77), False, "COLIBRI_E_CHECKSUM"),
        "odd head_dim": (lambda b: _put(b, "I", 84, 7), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "kv heads": (lambda b: _put(b, "I", 80, 4), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "top_k > n_experts": (lambda b: _put(b, "I", 132, 5), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "rms_eps 0": (lambda b: _put(b, "f", 108, 0.0), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "arch 99": (lambda b: _put(b, "I", 36, 99), True, "COLIBRI_E_UNSUPPORTED_ARCH"),
        "activation": (lambda b: _put(b, "I", 156, 3), True, "COLIBRI_E_UNSUPPORTED_ARCH"),
        "qk_norm 5": (lambda b: _put(b, "I", 120, 5), True, "COLIBRI_E_UNSUPPORTED_ARCH"),
        "sigmoid router, no bias": (lambda b: _put(b, "I", 128, 1), True,
                                    "COLIBRI_E_BAD_LAYER_TABLE"),
        "router 6": (lambda b: _put(b, "I", 128, 6), True, "COLIBRI_E_UNSUPPORTED_ROUTER"),
        "n_group 3 of 4": (lambda b: _put(b, "I", 148, 3), True, "COLIBRI_E_UNSUPPORTED_ROUTER"),
        "rope_dim, no flag": (lambda b: _put(b, "I", 188, 4), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "rope flag, no dim": (lambda b: _put(b, "I", 28, 2), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "rope kind 2": (lambda b: (_put(b, "I", 28, 2), _put(b, "I", 188, 4), _put(b, "I", 192, 2)),
                        True, "COLIBRI_E_UNSUPPORTED_ARCH"),
        "alignment 100": (lambda b: _put(b, "I", 32, 100), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "image_size 200": (lambda b: _put(b, "Q", 16, 200), True, "COLIBRI_E_TRUNCATED"),
        "routed_scaling 0": (lambda b: _put(b, "f", 140, 0.0), True, "COLIBRI_E_UNSUPPORTED_ROUTER"),
        "no dense width": (lambda b: _put(b, "I", 92, 0), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "ffn_kind 3": (lambda b: _put(b, "I", 256, 3), True, "COLIBRI_E_BAD_LAYER_TABLE"),
        "zero experts, router rows": (lambda b: _put(b, "I", 60, 1), True, "COLIBRI_E_BAD_SHAPE"),
        "zero experts 4096": (lambda b: _put(b, "I", 60, 4096), True, "COLIBRI_E_BAD_HYPERPARAMS"),
        "layer n_tensors": (lambda b: _put(b, "I", 256 + 8, 5), True, "COLIBRI_E_BAD_LAYER_TABLE"),
        "moe without experts": (lambda b: (_put(b, "I", 100, 0), _put(b, "I", 132, 0)), True,
                                "COLIBRI_E_BAD_LAYER_TABLE"),
        "first_tensor": (lambda b: _put(b, "I", 256 + 16 + 4, 7), True, "COLIBRI_E_BAD_LAYER_TABLE"),
        "wrong role": (lambda b: _put(b, "H", second, 3 if _u("H", data, second) != 3 else 2),
                       True, "COLIBRI_E_BAD_TENSOR_TABLE"),
        "wrong expert": (lambda b: _put(b, "H", gate + 4, 1), True, "COLIBRI_E_BAD_TENSOR_TABLE"),
        "unknown dtype": (lambda b: _put(b, "H", gate + 6, 15), True, "COLIBRI_E_UNSUPPORTED_DTYPE"),
        "q8 dtype on an f32 entry": (lambda b: _put(b, "H", gate + 6, 1), True,
                                     "COLIBRI_E_QUANT_BLOCKS"),
        "shape": (lambda b: _put(b, "I", gate + 12, 13), True, "COLIBRI_E_BAD_SHAPE"),
        "ndim": (lambda b: _put(b, "I", gate + 8, 3), True, "COLIBRI_E_BAD_SHAPE"),
        "size": (lambda b: _put(b, "Q", gate + 40, 8), True, "COLIBRI_E_BAD_SHAPE"),
        "gate misaligned": (lambda b: _put(b, "Q", gate + 32, _u("Q", data, gate + 32) + 64), True,
                            "COLIBRI_E_MISALIGNED"),
        "odd offset": (lambda b: _put(b, "Q", second + 32, _u("Q", data, second + 32) + 4), True,
                       "COLIBRI_E_MISALIGNED"),
        "past the end": (lambda b: _put(b, "Q", last + 32, len(data) - 64), True,
                         "COLIBRI_E_OUT_OF_RANGE"),
        "overlap": (lambda b: _put(b, "Q", last + 32, _u("Q", data, last + 32) - 64), True,
                    "COLIBRI_E_OVERLAP"),
        "into the tables": (lambda b: _put(b, "Q", _tensor_entry(data, 0) + 32, 256), True,
                            "COLIBRI_E_OVERLAP"),
    }


def test_broken_images_give_their_status(good_image):
    read_image(good_image, verify_data=True)
    statuses = set(re.findall(r"\b(COLIBRI_E_[A-Z_]+)\s*=", COLIBRI_H))
    for name, (mutate, fix, status) in _mutations(good_image).items():
        buf = bytearray(good_image)
        mutate(buf)
        if fix:
            fix_meta_crc(buf)
        with pytest.raises(ImageFormatError) as info:
            read_image(bytes(buf))
        assert info.value.status == status, f"{name}: {info.value}"
        assert status in statuses


def test_truncation_checksum_fingerprint_and_data_crc(good_image):
    with pytest.raises(ImageFormatError, match="TRUNCATED"):
        read_image(good_image[:255])
    with pytest.raises(ImageFormatError, match="TRUNCATED"):
        read_image(good_image[:-1])
    fingerprint = _u("I", good_image, 24)
    assert read_image(good_image, expected_fingerprint=fingerprint).fingerprint == fingerprint
    with pytest.raises(ImageFormatError) as info:
        read_image(good_image, expected_fingerprint=fingerprint ^ 1)
    assert info.value.status == "COLIBRI_E_CONFIG_MISMATCH"
    buf = bytearray(good_image)
    gate = _tensor_entry(buf, _first(good_image, 48))
    buf[_u("Q", good_image, gate + 32) + 5] ^= 0x10
    image = read_image(bytes(buf))  # colibri_init does not read tensor data
    with pytest.raises(ImageFormatError) as info:
        image.verify_data()
    assert info.value.status == "COLIBRI_E_CHECKSUM" and info.value.offset == _u("Q", buf, gate + 32)


def test_a_later_minor_version_is_accepted(good_image):
    buf = bytearray(good_image)
    _put(buf, "H", 10, 9)
    fix_meta_crc(buf)
    assert read_image(bytes(buf)).header["version_minor"] == 9


@pytest.mark.parametrize("offset", ["tensor 56", "tensor 63"])
def test_reserved_bytes_are_refused(good_image, offset):
    """docs/format.md 7: a later minor version's feature lives in reserved bytes, so an
    older reader refuses a non-zero one instead of misreading the image (the header's
    last ones, at 60, became zero_experts in 1.12)."""
    buf = bytearray(good_image)
    if isinstance(offset, str):
        offset = _u("Q", buf, 48) + 3 * 64 + int(offset.split()[1])
    buf[offset] = 1
    fix_meta_crc(buf)
    with pytest.raises(ImageFormatError) as info:
        read_image(bytes(buf))
    assert info.value.status == "COLIBRI_E_RESERVED" and "reserved" in str(info.value)


def test_fix_meta_crc_returns_what_the_reader_accepts(good_image):
    buf = bytearray(good_image)
    _put(buf, "I", 24, 0)
    assert fix_meta_crc(buf) == _u("I", good_image, 24)
    assert bytes(buf) == good_image


def test_random_table_corruption_never_crashes(good_image):
    """Mutation fuzzing of header and tables: valid or ImageFormatError, nothing else."""
    table_end = _tensor_entry(good_image, _u("I", good_image, 56))
    rng = random.Random(99)
    rejected = 0
    for trial in range(600):
        buf = bytearray(good_image)
        for _ in range(rng.randint(1, 3)):
            buf[rng.randrange(table_end)] = rng.randrange(256)
        if trial % 2:
            fix_meta_crc(buf)
        if trial % 7 == 0:
            buf = buf[:rng.randrange(len(buf))]
        try:
            read_image(bytes(buf)).verify_data()
        except ImageFormatError:
            rejected += 1
    assert rejected > 300


def test_python_reader_agrees_with_the_broken_image_folder(good_image, tmp_path):
    """Every image of tests/sdk/broken_images.py that colibri_init must refuse
    (test_core runs them through the C reader) gives the same status here."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
    from broken_images import write_broken_images

    manifest = write_broken_images(good_image, tmp_path)
    wrong = {}
    for name, expect in manifest.items():
        want = Status(expect["init"]).c_name
        if want == Status.OK.c_name:
            continue
        try:
            read_image(tmp_path / f"{name}.bin")
            got = Status.OK.c_name
        except ImageFormatError as exc:
            got = exc.status
        if got != want:
            wrong[name] = (want, got)
    assert not wrong


def _refused_by_both(buf: bytearray, status: Status, tmp_path: Path) -> None:
    """The edited image (its checksum fixed) refused with `status` by the Python
    reader and by the C core (colibri-run)."""
    import subprocess

    fix_meta_crc(buf)
    with pytest.raises(ImageFormatError) as info:
        read_image(bytes(buf))
    assert info.value.status == status.c_name
    image = tmp_path / "refused.bin"
    image.write_bytes(bytes(buf))
    run = ROOT / "build" / "host" / "colibri-run"
    subprocess.run(["make", "-s", str(run.relative_to(ROOT))], cwd=ROOT, check=True, timeout=600)
    done = subprocess.run([str(run), str(image), "--ids", "1"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and f"(status {status.value})" in done.stderr, done.stderr


@pytest.mark.parametrize("fields", [{244: 8.0}, {248: 8192.0, 252: 0.1}, {116: 0x100}])
def test_clamp_temperature_and_gate_are_refused_with_mla(fields, hf_checkpoint, tmp_path):
    """Format 1.11's q/k/v clamp, attention temperature and output gate (attn_bias
    bit 8) go with standard attention: an MLA image with any of them is a bad
    model record to both readers."""
    result = convert(hf_checkpoint("deepseek_v3"), tmp_path / "out", progress=False)
    buf = bytearray(result.image_path.read_bytes())
    for offset, value in fields.items():
        _put(buf, "I" if isinstance(value, int) else "f", offset, value)
    _refused_by_both(buf, Status.E_BAD_HYPERPARAMS, tmp_path)


@pytest.mark.parametrize("kind", [1, 3, 4])
def test_a_windowed_or_convolution_layer_is_refused_with_mla(kind, hf_checkpoint, tmp_path):
    """Multi-head Latent Attention is full attention, with RoPE (0) or, since
    format 1.14, without (2: Kimi-Linear's, tested against transformers): a
    sliding (1) or chunked (3) MLA layer, or a short convolution (4) in an MLA
    model without its taps, is a bad layer table to the Python reader and the
    C core (colibri-run) alike."""
    result = convert(hf_checkpoint("deepseek_v3"), tmp_path / "out", progress=False)
    buf = bytearray(result.image_path.read_bytes())
    _put(buf, "I", 256 + 12, kind)  # layer 0's attn_kind
    _refused_by_both(buf, Status.E_BAD_LAYER_TABLE, tmp_path)


@pytest.mark.parametrize("fields,status", [
    ({128: 3, 180: 0.1}, Status.E_UNSUPPORTED_ROUTER),  # sparsemixer, with its top-2 of 6 + 3
    # the router first, as colibri_init checks it, though the SwiGLU limit is wrong too
    ({128: 3, 216: 1.0}, Status.E_UNSUPPORTED_ROUTER),
    ({60: 4096 - 5}, Status.E_BAD_HYPERPARAMS),  # n_experts + zero_experts past 4096
    ({60: 0}, Status.E_BAD_SHAPE),  # the router's rows count the zero experts
])
def test_zero_experts_out_of_bounds_are_refused(fields, status, hf_checkpoint, tmp_path):
    """Format 1.12's zero-computation experts go with the routers that score all
    experts alike, within 4096 experts in all, and widen the router: an image
    that breaks one of these is refused by both readers with the same status."""
    result = convert(hf_checkpoint("longcat_flash"), tmp_path / "out", progress=False)
    buf = bytearray(result.image_path.read_bytes())
    for offset, value in fields.items():
        _put(buf, "I" if isinstance(value, int) else "f", offset, value)
    if 128 in fields:
        _put(buf, "I", 132, 2)
    _refused_by_both(buf, status, tmp_path)


def test_a_shortcut_layer_must_be_followed_by_a_dense_one(tmp_path, monkeypatch):
    """A shortcut layer's MoE output is added after the next layer's FFN (format
    1.12): an image whose last layer is one (its tables otherwise in order) is a
    bad layer table to both readers, and the writer will not write it."""
    from colibri_tools.image import image_writer
    from colibri_tools.image.image_spec import Arch, FfnKind, ModelRecord

    record = ModelRecord(vocab_size=8, hidden_size=8, n_layers=2, n_heads=2, n_kv_heads=1,
                         head_dim=4, max_context=16, dense_intermediate=8,
                         expert_intermediate=4, n_experts=2, shared_intermediate=0,
                         rms_eps=1e-5, rope_theta=1e4, top_k=1, zero_experts=1)
    kinds = [FfnKind.DENSE, FfnKind.SHORTCUT]
    entries, _ = canonical_tensors(record, kinds)
    sources = [image_writer.SourceTensor(e, lambda e=e: np.zeros(e.shape, np.float32))
               for e in entries]
    with pytest.raises(ImageFormatError, match="ffn_kinds"):
        image_writer.write_image(tmp_path / "no.bin", arch=Arch.LONGCAT_FLASH, record=record,
                                 ffn_kinds=kinds, sources=sources)
    monkeypatch.setattr(image_writer, "model_problems", lambda *args: [])
    written = image_writer.write_image(tmp_path / "last.bin", arch=Arch.LONGCAT_FLASH,
                                       record=record, ffn_kinds=kinds, sources=sources)
    _refused_by_both(bytearray(written.path.read_bytes()), Status.E_BAD_LAYER_TABLE, tmp_path)


@pytest.mark.parametrize("family,flags", [("mimo_v2_flash", ~2), ("mixtral", 32)])
def test_layer_rope_needs_the_rope_fields(family, flags, hf_checkpoint, tmp_path):
    """Each layer's RoPE table (format 1.12, header flag LAYER_ROPE) says which
    frequencies turn the rope_dim dimensions the ROPE flag sets: without that flag
    (MiMo's image with it cleared, Mixtral's with LAYER_ROPE set) both readers
    refuse the record."""
    result = convert(hf_checkpoint(family), tmp_path / "out", progress=False)
    buf = bytearray(result.image_path.read_bytes())
    old = _u("I", buf, 28)
    _put(buf, "I", 28, old & flags if flags < 0 else old | flags)
    _refused_by_both(buf, Status.E_BAD_HYPERPARAMS, tmp_path)


@pytest.mark.parametrize("fields,status", [
    ({256: 0}, Status.E_BAD_LAYER_TABLE),  # a short convolution layer without its taps
    ({256: 65}, Status.E_BAD_HYPERPARAMS),  # more taps than 64
    ({260: -1.0}, Status.E_BAD_HYPERPARAMS),  # the router's sum term below 0
    ({300: 1}, Status.E_RESERVED),  # the extension's reserved bytes
])
def test_record_extension_out_of_bounds_is_refused(fields, status, hf_checkpoint, tmp_path):
    """Format 1.13's extension (header_size 512): LFM2's conv_kernel 2 .. 64, needed by
    its conv layers; router_sum_eps 0 .. 1; the rest zero. An image that breaks one
    is refused by both readers with the same status."""
    result = convert(hf_checkpoint("lfm2_moe"), tmp_path / "out", progress=False)
    buf = bytearray(result.image_path.read_bytes())
    assert _u("I", buf, 12) == 512 and _u("I", buf, 256) == 3
    for offset, value in fields.items():
        _put(buf, "I" if isinstance(value, int) else "f", offset, value)
    _refused_by_both(buf, status, tmp_path)


@pytest.mark.parametrize("fields,status", [
    ({264: 0}, Status.E_BAD_HYPERPARAMS),  # Mamba2 sizes without heads
    ({276: 3}, Status.E_BAD_HYPERPARAMS),  # groups that do not divide the heads
    ({272: 1025}, Status.E_BAD_HYPERPARAMS),  # a state wider than 1024
    ({268: 8}, Status.E_BAD_SHAPE),  # narrower heads than the tensors
    ({256: 0}, Status.E_BAD_LAYER_TABLE),  # Mamba2 layers without taps
    ({296: 1}, Status.E_RESERVED),  # the extension's reserved bytes after 1.14's fields
    ({288: 2}, Status.E_BAD_HYPERPARAMS),  # a Mamba1 dt rank with Mamba2's head_dim 16
    ({280: 2000}, Status.E_BAD_HYPERPARAMS),  # a KDA rank above 1024
])
def test_mamba2_sizes_out_of_bounds_are_refused(fields, status, hf_checkpoint, tmp_path):
    """Format 1.14's Mamba2 sizes (bytes 264 .. 279 of the extension): heads, head_dim
    and state 1 .. 1024, groups dividing the heads, all zero without Mamba2 layers;
    the tensors' shapes follow from them. Both readers refuse a broken one alike."""
    result = convert(hf_checkpoint("granitemoehybrid"), tmp_path / "out", progress=False)
    buf = bytearray(result.image_path.read_bytes())
    assert struct.unpack_from("<6I", buf, 256) == (4, 0, 4, 16, 8, 2)
    for offset, value in fields.items():
        _put(buf, "I", offset, value)
    _refused_by_both(buf, status, tmp_path)


def test_a_model_with_mamba2_sizes_but_no_mamba2_layer_is_refused(hf_checkpoint, tmp_path):
    """LFM2's image with Mamba2 sizes set: its convolution layers (attn_kind 4) go
    with ssm_heads 0 only, a model's recurrent layers being of one kind."""
    result = convert(hf_checkpoint("lfm2_moe"), tmp_path / "out", progress=False)
    buf = bytearray(result.image_path.read_bytes())
    for offset, value in {264: 2, 268: 4, 272: 4, 276: 1}.items():
        _put(buf, "I", offset, value)
    _refused_by_both(buf, Status.E_BAD_LAYER_TABLE, tmp_path)


def test_an_older_reader_layout_is_refused(hf_checkpoint, tmp_path):
    """A 1.13 image read as if its header were 256 bytes (header_size edited, the
    tables where they are) is inconsistent to both readers: the layer table must
    start at header_size."""
    result = convert(hf_checkpoint("lfm2_moe"), tmp_path / "out", progress=False)
    buf = bytearray(result.image_path.read_bytes())
    _put(buf, "I", 12, 256)
    _refused_by_both(buf, Status.E_BAD_HYPERPARAMS, tmp_path)


def test_an_extension_of_zeros_is_valid_to_both_readers(tmp_path):
    """header_size 512 with an all-zero extension (format 1.13: nothing the record
    needs) is valid: both readers find the layer table at 512."""
    import subprocess

    from colibri_tools.image import image_spec

    record = image_spec.ModelRecord(vocab_size=8, hidden_size=8, n_layers=2, n_heads=2,
                                    n_kv_heads=1, head_dim=4, max_context=16,
                                    dense_intermediate=8, expert_intermediate=0, n_experts=0,
                                    shared_intermediate=0, rms_eps=1e-5, rope_theta=1e4)
    from colibri_tools.image import image_writer
    entries, _ = canonical_tensors(record, [0, 0])
    sources = [image_writer.SourceTensor(e, lambda e=e: np.ones(e.shape, np.float32))
               for e in entries]
    written = image_writer.write_image(tmp_path / "m.bin", arch=1, record=record,
                                       ffn_kinds=[0, 0], sources=sources)
    data = bytearray(written.path.read_bytes())
    end = _u("Q", data, 48) + 64 * _u("I", data, 56)
    # the same tables after 256 zero bytes more; offsets shifted by 256
    moved = data[:256] + bytes(256) + data[256:]
    _put(moved, "I", 12, 512)
    _put(moved, "Q", 40, 512)
    _put(moved, "Q", 48, _u("Q", data, 48) + 256)
    _put(moved, "Q", 16, len(moved))
    table = _u("Q", moved, 48)
    for i in range(_u("I", moved, 56)):
        _put(moved, "Q", table + 64 * i + 32, _u("Q", moved, table + 64 * i + 32) + 256)
    assert end + 256 <= len(moved)
    fix_meta_crc(moved)
    image = read_image(bytes(moved))
    assert [layer.ffn_kind for layer in image.layers] == [0, 0]
    path = tmp_path / "zeros.bin"
    path.write_bytes(bytes(moved))
    run = ROOT / "build" / "host" / "colibri-run"
    done = subprocess.run([str(run), str(path), "--ids", "1"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
